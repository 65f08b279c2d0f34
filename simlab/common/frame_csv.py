"""Writing a data frame as CSV text, byte for byte as ``DataFrame.to_csv(index=False, float_format=...)`` writes it,
in about half the time.

pandas formats every float cell through a Python call when given a ``float_format``; here every 16,384 rows are
one ``%`` operation over a row template (``%.9f`` for a float column without NaN, ``%d`` for integers, ``%s`` for
text quoted as the csv module's minimal quoting does). A results folder's step log is tens of thousands of rows
per arm, so this is a visible share of a sweep's time (docs/performance.md); formatting a million-row frame at
once would hold all its cells as Python objects.
"""

from __future__ import annotations

import gzip
import io
import itertools
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd

_SPECIAL = (",", '"', "\n")  # the delimiter, the quote and the line end (pandas writes "\n")


def _text(value: Any) -> str:
    """A text cell: empty for a missing value, quoted when it holds the delimiter, a quote or a line end."""
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return ""
    text = str(value)
    if any(c in text for c in _SPECIAL):
        return '"' + text.replace('"', '""') + '"'
    return text


CHUNK_ROWS = 1 << 14  # rows formatted at a time: a million-row frame's cells as Python objects would take GBs


def _spec(values: np.ndarray, float_format: str) -> str:
    """The column's conversion in the row template (a float column with NaN is written as text)."""
    kind = values.dtype.kind
    if kind == "f":
        return "%s" if np.isnan(values).any() else float_format
    return "%d" if kind in "iu" else "%s"


def _cells(values: np.ndarray, spec: str, float_format: str) -> list:
    """Some rows of a column as the Python values its conversion ``spec`` formats."""
    kind = values.dtype.kind
    if kind == "f" and spec == "%s":
        return ["" if x != x else float_format % x for x in values.tolist()]
    if kind in "fiub":
        return values.tolist()
    return [_text(x) for x in values.tolist()]


def frame_csv_chunks(frame: pd.DataFrame, float_format: str = "%.9f", chunk_rows: int = CHUNK_ROWS):
    """``frame.to_csv(index=False, float_format=float_format)`` as consecutive strings: the header, then
    ``chunk_rows`` rows at a time, each ending with its line end."""
    arrays, specs = [], []
    for name in frame.columns:
        series = frame[name]
        numeric = isinstance(series.dtype, np.dtype) and series.dtype.kind in "fiub"  # not pandas' nullable types
        values = series.to_numpy() if numeric else series.to_numpy(dtype=object)
        arrays.append(values)
        specs.append(_spec(values, float_format))
    yield ",".join(_text(name) for name in frame.columns) + "\n"
    row = ",".join(specs) + "\n"
    for first in range(0, len(frame), chunk_rows):
        columns = [_cells(values[first:first + chunk_rows], spec, float_format)
                   for values, spec in zip(arrays, specs)]
        yield (row * len(columns[0])) % tuple(itertools.chain.from_iterable(zip(*columns)))


def frame_csv_text(frame: pd.DataFrame, float_format: str = "%.9f") -> str:
    """``frame.to_csv(index=False, float_format=float_format)`` as a string (``\\n`` line ends)."""
    return "".join(frame_csv_chunks(frame, float_format))


def write_frame_csv(frame: pd.DataFrame, path: Path, *, float_format: str = "%.9f",
                    gzip_level: Optional[int] = None) -> None:
    """Write ``frame`` as pandas would with ``to_csv(path, index=False, float_format=...)``, gzipped at
    ``gzip_level`` (with ``mtime`` 0, so equal frames give equal files) when given."""
    path = Path(path)
    if gzip_level is None:
        with open(path, "wb") as fh:
            for text in frame_csv_chunks(frame, float_format):
                fh.write(text.encode("utf-8"))
        return
    # as pandas writes it, so that the compressed bytes are its bytes too: a text wrapper over the gzip file (whose
    # header names the file without .gz) given one row at a time (the wrapper's flushes decide deflate's blocks)
    with gzip.GzipFile(filename=str(path), mode="wb", compresslevel=gzip_level, mtime=0) as raw, \
            io.TextIOWrapper(raw, encoding="utf-8", newline="") as fh:
        write = fh.write
        for text in frame_csv_chunks(frame, float_format):
            for line in text.split("\n")[:-1]:
                write(line + "\n")
