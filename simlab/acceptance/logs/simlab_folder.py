"""Format ``simlab``: a simlab results folder (real mode or simulated).

- ``rounds.csv.gz``: one row per request-step, columns ``arm, id, domain, step, drafted, verified, accepted,
  conf_1..conf_G`` (see docs/acceptance-logs.md). Gives per-round detail: heterogeneity and the head's error
  can be fitted.
- otherwise ``summary.json``: per arm, ``spec_decode_num_reached_per_position`` and
  ``spec_decode_num_accepted_per_position``: positional rates only (domain ``*``).

An arm's method is read from the scenario in ``summary.json`` when the folder has one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import numpy as np

from simlab.acceptance.logs.parsed import AcceptanceLog, PositionCounts, concat_rounds
from simlab.acceptance.logs.table import (
    confidence_columns,
    integer_column,
    ordered_rounds,
    read_table,
    require_columns,
    text_column,
)
from simlab.common.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

NAME = "simlab"
DESCRIPTION = "a simlab results folder: rounds.csv.gz (per request-step) or summary.json (per-position counts)"
HAS_CONFIDENCE = True
ROUNDS_FILE = "rounds.csv.gz"
REQUIRED = ("arm", "id", "domain", "step", "drafted", "verified", "accepted")


def read(paths: list[Path], *, arms: Optional[list[str]] = None, **_: object) -> AcceptanceLog:
    logs = [_read_one(p, arms) for p in paths]
    if len(logs) == 1:
        return logs[0]
    if all(log.rounds is not None for log in logs):
        return AcceptanceLog.from_rounds(NAME, [f for log in logs for f in log.files],
                                         concat_rounds([log.rounds for log in logs]),
                                         [n for log in logs for n in log.notes])
    counts: dict = {}
    for log in logs:
        for key, value in log.counts.items():
            counts[key] = counts[key] + value if key in counts else value
    return AcceptanceLog(NAME, [f for log in logs for f in log.files], counts, None,
                         ["several folders: per-position counts pooled, rounds not used"])


def _read_one(path: Path, arms: Optional[list[str]]) -> AcceptanceLog:
    folder = path if path.is_dir() else path.parent
    if path.is_file() and path.name not in (ROUNDS_FILE, "summary.json"):
        raise InputError("not a simlab results folder", file=path,
                         valid=f"a results folder (holding {ROUNDS_FILE} or summary.json), or one of those files")
    if not folder.is_dir():
        raise InputError("no such results folder", file=path, valid="a folder written by simlab")
    summary = _summary(folder / "summary.json") if (folder / "summary.json").is_file() else None
    methods = _arm_methods(summary, folder / "summary.json") if summary is not None else {}
    if (folder / ROUNDS_FILE).is_file() and not (path.is_file() and path.name == "summary.json"):
        return _read_rounds(folder / ROUNDS_FILE, methods, arms)
    if summary is None:
        raise InputError(f"neither {ROUNDS_FILE} nor summary.json", file=folder,
                         valid="a simlab results folder (real-mode folders hold rounds.csv.gz)")
    return _read_summary(folder / "summary.json", summary, methods, arms)


def _summary(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"not valid JSON ({exc})", file=path) from None
    if not isinstance(data, dict) or not isinstance(data.get("arms"), dict):
        raise InputError("not a simlab summary", file=path, field="arms", valid='{"arms": {ARM: {METRICS}}}')
    return data


def _arm_methods(summary: dict, path: Path) -> dict[str, str]:
    """Arm label -> drafter method, from the resolved scenario in summary.json."""
    from simlab.config.arms import Arm

    out: dict[str, str] = {}
    for item in (summary.get("scenario") or {}).get("arms") or []:
        try:
            arm = Arm.model_validate(item)
        except Exception:  # an arm this version cannot read: the user maps it with --method
            continue
        out[arm.label] = arm.method
    return out


def _select_arms(names: list[str], arms: Optional[list[str]], path: Path) -> set[str]:
    if not arms:
        return set(names)
    unknown = [a for a in arms if a not in names]
    if unknown:
        raise InputError("no such arm in the log", file=path, field="--arm", value=unknown[0],
                         valid=", ".join(sorted(names)) or "(no arms)")
    return set(arms)


def _read_summary(path: Path, summary: dict, methods: dict[str, str], arms: Optional[list[str]]) -> AcceptanceLog:
    chosen = _select_arms(list(summary["arms"]), arms, path)
    counts: dict = {}
    for name, metrics in summary["arms"].items():
        if name not in chosen or methods.get(name) == "none":
            continue
        reached = metrics.get("spec_decode_num_reached_per_position")
        accepted = metrics.get("spec_decode_num_accepted_per_position")
        if reached is None or accepted is None:
            raise InputError("per-position counts missing", file=path, field=f"arms.{name}",
                             valid="spec_decode_num_reached_per_position and spec_decode_num_accepted_per_position "
                                   "(written by simlab since the per-position counts were added)")
        reached, accepted = np.asarray(reached, dtype=float), np.asarray(accepted, dtype=float)
        if reached.shape != accepted.shape or (accepted > reached).any() or (accepted < 0).any():
            raise InputError("inconsistent per-position counts", file=path,
                             field=f"arms.{name}.spec_decode_num_accepted_per_position",
                             valid="as many values as reached, each between 0 and reached")
        key = (methods.get(name, name), "*")
        value = PositionCounts(reached, accepted).trimmed()
        counts[key] = counts[key] + value if key in counts else value
    notes = ["summary.json only: per-position counts per arm, no per-request detail (no heterogeneity, no head)"]
    return AcceptanceLog(NAME, [str(path)], {k: v for k, v in counts.items() if len(v.reached)}, None, notes)


def _read_rounds(path: Path, methods: dict[str, str], arms: Optional[list[str]]) -> AcceptanceLog:
    frame = read_table(path, what="rounds table")
    require_columns(frame, path, REQUIRED, ())
    arm = text_column(frame, "arm", path)
    drafted = integer_column(frame, "drafted", path)
    verified = integer_column(frame, "verified", path, high=drafted, high_text="drafted")
    accepted = integer_column(frame, "accepted", path, high=verified, high_text="verified")
    request = text_column(frame, "id", path)
    domain = text_column(frame, "domain", path)
    step = integer_column(frame, "step", path)
    conf = confidence_columns(frame, path, drafted)
    chosen = _select_arms(sorted(set(arm.tolist())), arms, path)
    keep = np.isin(arm, list(chosen)) & ~np.isin(arm, [a for a, m in methods.items() if m == "none"])
    keep &= drafted > 0  # a round without drafts (no speculation) says nothing about acceptance
    rows = np.flatnonzero(keep)
    rounds = ordered_rounds(
        path=path, method=np.array([methods.get(a, a) for a in arm[rows]], dtype=object), domain=domain[rows],
        sequence_key=[arm[rows], request[rows]], request=request[rows], step=step[rows], drafted=drafted[rows],
        verified=verified[rows], accepted=accepted[rows], conf=None if conf is None else conf[rows], lines=rows + 2,
    )
    return AcceptanceLog.from_rounds(NAME, [str(path)], rounds)


def rounds_frame(rounds, arm) -> "pd.DataFrame":
    """The ``rounds.csv.gz`` table of some rounds: columns arm, id, domain, step, drafted, verified, accepted,
    conf_1..conf_G (empty where there is no confidence). ``arm`` is one name or one per round."""
    import pandas as pd

    frame = pd.DataFrame({
        "arm": np.broadcast_to(np.asarray(arm, dtype=object), (len(rounds),)),
        "id": rounds.cluster, "domain": rounds.domain, "step": rounds.step, "drafted": rounds.drafted,
        "verified": rounds.verified, "accepted": rounds.accepted,
    })
    if rounds.conf is not None:
        for k in range(rounds.conf.shape[1]):
            frame[f"conf_{k + 1}"] = rounds.conf[:, k]
    return frame


def write_rounds(frame, path: Path) -> None:
    """Write a rounds table as simlab does (gzip, reproducible bytes, 9 significant digits)."""
    frame.to_csv(path, index=False, float_format="%.9g", compression={"method": "gzip", "compresslevel": 6, "mtime": 0})
