"""Writing a data frame as CSV text, byte for byte as ``DataFrame.to_csv(index=False, float_format=...)`` writes it,
in about half the time.

pandas formats every float cell through a Python call when given a ``float_format``; here a whole frame is one
``%`` operation over a row template (``%.9f`` for a float column without NaN, ``%d`` for integers, ``%s`` for
text quoted as the csv module's minimal quoting does). A results folder's step log is tens of thousands of rows
per arm, so this is a visible share of a sweep's time (docs/performance.md).
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


def _column(values: np.ndarray, float_format: str) -> tuple[str, list]:
    """(the column's conversion in the row template, its cells as Python values)."""
    kind = values.dtype.kind
    if kind == "f":
        if np.isnan(values).any():
            return "%s", ["" if x != x else float_format % x for x in values.tolist()]
        return float_format, values.tolist()
    if kind in "iu":
        return "%d", values.tolist()
    if kind == "b":
        return "%s", values.tolist()
    return "%s", [_text(x) for x in values.tolist()]


def frame_csv_text(frame: pd.DataFrame, float_format: str = "%.9f") -> str:
    """``frame.to_csv(index=False, float_format=float_format)`` as a string (``\\n`` line ends)."""
    specs, columns = [], []
    for name in frame.columns:
        series = frame[name]
        numeric = isinstance(series.dtype, np.dtype) and series.dtype.kind in "fiub"  # not pandas' nullable types
        values = series.to_numpy() if numeric else series.to_numpy(dtype=object)
        spec, cells = _column(values, float_format)
        specs.append(spec)
        columns.append(cells)
    header = ",".join(_text(name) for name in frame.columns) + "\n"
    if not len(frame):
        return header
    row = ",".join(specs) + "\n"
    return header + (row * len(frame)) % tuple(itertools.chain.from_iterable(zip(*columns)))


def write_frame_csv(frame: pd.DataFrame, path: Path, *, float_format: str = "%.9f",
                    gzip_level: Optional[int] = None) -> None:
    """Write ``frame`` as pandas would with ``to_csv(path, index=False, float_format=...)``, gzipped at
    ``gzip_level`` (with ``mtime`` 0, so equal frames give equal files) when given."""
    text = frame_csv_text(frame, float_format)
    path = Path(path)
    if gzip_level is None:
        path.write_bytes(text.encode("utf-8"))
        return
    # as pandas writes it, so that the compressed bytes are its bytes too: a text wrapper over the gzip file (whose
    # header names the file without .gz) given one row at a time (the wrapper's flushes decide deflate's blocks)
    with gzip.GzipFile(filename=str(path), mode="wb", compresslevel=gzip_level, mtime=0) as raw, \
            io.TextIOWrapper(raw, encoding="utf-8", newline="") as fh:
        lines = text.split("\n")
        write = fh.write
        for line in lines[:-1]:
            write(line + "\n")
