"""Format ``csv``: one row per request-step, for logs from any engine.

Columns (header required, any order):

- ``request``: the request's id;
- ``domain``: its domain (``*`` for one curve serving every domain);
- ``position``: where in the request's output the round starts (any number that increases along the request;
  it orders the rounds);
- ``accepted``: drafts accepted in the round;
- optional ``verified``: the verify length (default: ``--gamma``, the same for every round);
- optional ``drafted``: positions drafted (default: ``verified``);
- optional ``method``: the drafter (mtp, eagle3, dflash, dspark; default: ``--method``);
- optional ``conf_1..conf_G``: the head's raw confidence per drafted position (empty where there is none).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from simlab.acceptance.logs.parsed import MAX_POSITIONS, AcceptanceLog, concat_rounds
from simlab.acceptance.logs.table import (
    confidence_columns,
    integer_column,
    ordered_rounds,
    read_table,
    require_columns,
    text_column,
)
from simlab.common.errors import InputError

NAME = "csv"
DESCRIPTION = "CSV, one row per request-step: request, domain, position, accepted [, verified, drafted, method, conf_k]"
HAS_CONFIDENCE = True
REQUIRED = ("request", "domain", "position", "accepted")
OPTIONAL = ("verified", "drafted", "method")


def read(paths: list[Path], *, gamma: Optional[int] = None, **_: object) -> AcceptanceLog:
    parts = [_read_one(path, gamma) for path in paths]
    return AcceptanceLog.from_rounds(NAME, [str(p) for p in paths], concat_rounds(parts))


def _read_one(path: Path, gamma: Optional[int]):
    frame = read_table(path, what="CSV log")
    require_columns(frame, path, REQUIRED, OPTIONAL)
    if len(frame) == 0:
        raise InputError("no rows", file=path, valid="one row per request-step")
    if "verified" in frame.columns:
        verified = integer_column(frame, "verified", path, high=np.full(len(frame), MAX_POSITIONS),
                                  high_text=str(MAX_POSITIONS))
    elif gamma is None:
        raise InputError("no verified column, and no --gamma", file=path, field="verified",
                         valid="a verified column, or --gamma N when every round verified N drafts")
    else:
        verified = np.full(len(frame), gamma, dtype=np.int64)
    if "drafted" in frame.columns:
        drafted = integer_column(frame, "drafted", path, high=np.full(len(frame), MAX_POSITIONS),
                                 high_text=str(MAX_POSITIONS))
        short = drafted < verified
        if short.any():
            row = int(np.flatnonzero(short)[0])
            raise InputError("fewer drafted than verified", file=path, field=f"line {row + 2}: drafted",
                             value=int(drafted[row]), valid=f"at least verified ({int(verified[row])})")
    else:
        drafted = verified
    accepted = integer_column(frame, "accepted", path, high=verified, high_text="verified")
    position = pd.to_numeric(frame["position"].str.strip(), errors="coerce").to_numpy(dtype=float)
    if not np.isfinite(position).all():
        row = int(np.flatnonzero(~np.isfinite(position))[0])
        raise InputError("not a number", file=path, field=f"line {row + 2}: position",
                         value=frame["position"].iloc[row], valid="the round's start position in the output")
    request = text_column(frame, "request", path)
    method = text_column(frame, "method", path) if "method" in frame.columns else np.full(len(frame), "", dtype=object)
    sequence = pd.MultiIndex.from_arrays([method, request]).factorize()[0]
    twice = pd.DataFrame({"s": sequence, "p": position}).duplicated().to_numpy()
    if twice.any():
        row = int(np.flatnonzero(twice)[0])
        raise InputError("a request has two rows at the same position", file=path, field=f"line {row + 2}: position",
                         value=frame["position"].iloc[row], valid="one row per request-step")
    step = pd.Series(position).groupby(sequence).rank(method="first").to_numpy(dtype=np.int64) - 1
    rounds = ordered_rounds(path=path, method=method, domain=text_column(frame, "domain", path),
                            sequence_key=[method, request], request=request, step=step, drafted=drafted,
                            verified=verified, accepted=accepted, conf=confidence_columns(frame, path, drafted))
    return rounds.select(rounds.verified > 0)
