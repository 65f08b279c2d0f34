"""The results folder's CSV writer gives exactly the bytes pandas' to_csv gives (simlab.common.frame_csv)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from simlab.common.frame_csv import frame_csv_text, write_frame_csv


def _frames() -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(3)
    n = 500
    mixed = pd.DataFrame({
        "arm": "no-spec",
        "id": np.arange(n),
        "t_s": rng.exponential(3.0, n) * 10.0 ** rng.integers(-12, 8, n),
        "neg": -rng.random(n),
        "flag": rng.random(n) < 0.5,
        "count": rng.integers(-5, 1 << 40, n),
        "small": rng.integers(0, 9, n).astype(np.int32),
    })
    with_gaps = mixed.copy()
    with_gaps.loc[::7, "t_s"] = np.nan
    special = pd.DataFrame({
        "x": [0.0, -0.0, np.inf, -np.inf, np.nan, 1e300, 5e-324, 0.5e-9, 1.5e-9, 2.5e-9, 123456789.123456789],
        "text": ["plain", "a,b", 'say "hi"', "two\nlines", "cr\r", "", None, np.nan, "nan", " lead", "é"],
    })
    text_dtype = pd.DataFrame({"domain": pd.array(["chat", None, "code,math", "math"], dtype="string"),
                               "n": pd.array([1, None, 3, 4], dtype="Int64")})
    empty = pd.DataFrame({"a": np.zeros(0), "b": np.zeros(0, dtype=np.int64)})
    return {"mixed": mixed, "with_gaps": with_gaps, "special": special, "text_dtype": text_dtype, "empty": empty}


@pytest.mark.parametrize("name", list(_frames()))
@pytest.mark.parametrize("float_format", ["%.9f", "%.9g"])
def test_text_is_what_pandas_writes(name, float_format):
    frame = _frames()[name]
    assert frame_csv_text(frame, float_format) == frame.to_csv(index=False, float_format=float_format)


def test_files_are_byte_identical(tmp_path):
    frame = _frames()["with_gaps"]
    write_frame_csv(frame, tmp_path / "mine.csv")
    frame.to_csv(tmp_path / "theirs.csv", index=False, float_format="%.9f")
    assert (tmp_path / "mine.csv").read_bytes() == (tmp_path / "theirs.csv").read_bytes()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    write_frame_csv(frame, tmp_path / "a" / "steps.csv.gz", gzip_level=1)
    frame.to_csv(tmp_path / "b" / "steps.csv.gz", index=False, float_format="%.9f",
                 compression={"method": "gzip", "compresslevel": 1, "mtime": 0})
    assert (tmp_path / "a" / "steps.csv.gz").read_bytes() == (tmp_path / "b" / "steps.csv.gz").read_bytes()


@pytest.mark.parametrize("chunk_rows", [1, 7, 64, 500, 501])
def test_rows_formatted_a_chunk_at_a_time_are_the_same_text(chunk_rows):
    """A float column with NaN in some chunks only is text in every chunk, as in one pass."""
    from simlab.common.frame_csv import frame_csv_chunks

    for name in ("with_gaps", "special", "text_dtype", "empty"):
        frame = _frames()[name]
        assert "".join(frame_csv_chunks(frame, "%.9f", chunk_rows)) == frame.to_csv(index=False, float_format="%.9f")


def test_a_frame_of_several_chunks_writes_pandas_bytes(tmp_path):
    from simlab.common.frame_csv import CHUNK_ROWS

    rng = np.random.default_rng(5)
    n = 2 * CHUNK_ROWS + 17
    frame = pd.DataFrame({"t_s": rng.exponential(2.0, n), "id": np.arange(n), "late": rng.random(n)})
    frame.loc[n - 3, "late"] = np.nan  # only the last chunk holds a NaN
    write_frame_csv(frame, tmp_path / "mine.csv")
    frame.to_csv(tmp_path / "theirs.csv", index=False, float_format="%.9f")
    assert (tmp_path / "mine.csv").read_bytes() == (tmp_path / "theirs.csv").read_bytes()
    write_frame_csv(frame, tmp_path / "mine.csv.gz", gzip_level=1)
    (tmp_path / "b").mkdir()
    frame.to_csv(tmp_path / "b" / "mine.csv.gz", index=False, float_format="%.9f",
                 compression={"method": "gzip", "compresslevel": 1, "mtime": 0})
    assert (tmp_path / "mine.csv.gz").read_bytes() == (tmp_path / "b" / "mine.csv.gz").read_bytes()
