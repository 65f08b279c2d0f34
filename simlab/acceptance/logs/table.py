"""Rounds from a table (one row per request-step), with errors that name the file, the line and the column.

Shared by the ``simlab`` format (``rounds.csv.gz``) and the ``csv`` format.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from simlab.acceptance.logs.parsed import MAX_POSITIONS, Rounds
from simlab.common.errors import InputError

CONF_COLUMN = re.compile(r"^conf_([1-9][0-9]*)$")


def read_table(path: Path, *, what: str) -> pd.DataFrame:
    """A CSV file (gzip when the name ends in .gz) as strings, or an InputError naming the file."""
    if not path.is_file():
        raise InputError(f"no such {what}", file=path, valid=f"a path to a {what}")
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[], skipinitialspace=True)
    except (pd.errors.ParserError, UnicodeDecodeError, OSError, EOFError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(
            f"not a readable CSV table ({first})",
            file=path,
            valid="comma-separated text with a header line (gzip-compressed when it ends in .gz)",
        ) from None
    frame.columns = [str(c).strip() for c in frame.columns]
    return frame


def require_columns(frame: pd.DataFrame, path: Path, required: tuple[str, ...], optional: tuple[str, ...]) -> None:
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise InputError(f"missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)}", file=path,
                         field="header", value=",".join(frame.columns[:12]),
                         valid=f"columns {', '.join(required)} (optional: {', '.join(optional)}, conf_1..conf_G)")
    known = set(required) | set(optional)
    unknown = [c for c in frame.columns if c not in known and not CONF_COLUMN.match(c)]
    if unknown:
        raise InputError(f"unknown column {unknown[0]!r}", file=path, field="header",
                         valid=f"columns {', '.join(required)}, optional {', '.join(optional)}, conf_1..conf_G")


def integer_column(frame: pd.DataFrame, column: str, path: Path, *, low: int = 0,
                   high: Optional[np.ndarray] = None, high_text: str = "") -> np.ndarray:
    """The column as int64; InputError at the first row that is not an integer in [low, high]."""
    text = frame[column].str.strip()
    values = pd.to_numeric(text, errors="coerce")
    bad = values.isna() | (values != np.floor(values)) | (values < low)
    if high is not None:
        bad |= values > high
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        valid = f"an integer >= {low}" + (f" and <= {high_text}" if high is not None else "")
        raise InputError("not a valid count", file=path, field=f"line {row + 2}: {column}", value=text.iloc[row],
                         valid=valid)
    return values.to_numpy(dtype=np.int64)


def text_column(frame: pd.DataFrame, column: str, path: Path) -> np.ndarray:
    values = frame[column].str.strip()
    empty = values == ""
    if empty.any():
        row = int(np.flatnonzero(empty.to_numpy())[0])
        raise InputError("empty", file=path, field=f"line {row + 2}: {column}", valid="a name")
    return values.to_numpy(dtype=object)


def confidence_columns(frame: pd.DataFrame, path: Path, drafted: np.ndarray) -> Optional[np.ndarray]:
    """[N, G] raw confidences from conf_1..conf_G (NaN where empty), or None without such columns."""
    numbered = sorted((int(CONF_COLUMN.match(c).group(1)), c) for c in frame.columns if CONF_COLUMN.match(c))
    if not numbered:
        return None
    width = numbered[-1][0]
    if [k for k, _ in numbered] != list(range(1, width + 1)):
        raise InputError("confidence columns must be numbered conf_1..conf_G without gaps", file=path,
                         field="header", value=",".join(c for _, c in numbered),
                         valid=f"conf_1..conf_{width}")
    if width > MAX_POSITIONS:
        raise InputError(f"{width} confidence columns", file=path, field="header",
                         valid=f"at most {MAX_POSITIONS} (conf_1..conf_{MAX_POSITIONS})")
    conf = np.full((len(frame), width), np.nan)
    for k, column in numbered:
        text = frame[column].str.strip()
        values = pd.to_numeric(text.replace("", np.nan), errors="coerce").to_numpy(dtype=float)
        bad = (text != "").to_numpy() & ~((values >= 0.0) & (values <= 1.0))
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise InputError("not a probability", file=path, field=f"line {row + 2}: {column}",
                             value=text.iloc[row], valid="a number from 0 to 1, or empty when the head gave none")
        conf[:, k - 1] = values
    beyond = np.arange(width)[None, :] >= drafted[:, None]
    conf[beyond] = np.nan  # a confidence for a position that was not drafted carries nothing
    return conf


def ordered_rounds(*, path: Path, method: np.ndarray, domain: np.ndarray, sequence_key: list, request: np.ndarray,
                   step: np.ndarray, drafted: np.ndarray, verified: np.ndarray, accepted: np.ndarray,
                   conf: Optional[np.ndarray], lines: Optional[np.ndarray] = None) -> Rounds:
    """Rounds sorted by sequence and step; a step given twice in one sequence is an InputError naming its line
    (``lines``: each row's line in the file; default row + 2, after a header line)."""
    sequence = pd.MultiIndex.from_arrays(sequence_key).factorize()[0] if len(sequence_key) > 1 else \
        pd.factorize(sequence_key[0])[0]
    order = np.lexsort((step, sequence))
    seq_sorted, step_sorted = sequence[order], step[order]
    repeated = (seq_sorted[1:] == seq_sorted[:-1]) & (step_sorted[1:] == step_sorted[:-1])
    if repeated.any():
        row = int(order[np.flatnonzero(repeated)[0] + 1])
        line = int(lines[row]) if lines is not None else row + 2
        raise InputError("a request has two rows for the same step", file=path, field=f"line {line}",
                         value=int(step[row]), valid="one row per request and step")
    pick = lambda a: None if a is None else a[order]  # noqa: E731
    return Rounds(method[order], domain[order], sequence[order].astype(np.int64), request[order],
                  step[order], drafted[order], verified[order], accepted[order], pick(conf))
