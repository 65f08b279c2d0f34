"""Format ``deepspec``: the ``metrics.json`` that DeepSpec's evaluator writes per dataset.

Layout (DeepSpec ``deepspec/eval``; read from its source, not from a published schema):
``{"config": ..., "spec": ROW, "confidence": CONFIDENCE_ROW, "confidence_summary": ...}``, where ROW is
``build_metrics_row``'s ``{"dataset", "num_samples", "draft_tokens_per_proposal", "acceptance_length",
"verify_rate", "accept_rates_by_position", "output_tokens", ...}`` and CONFIDENCE_ROW (written when the
confidence head is evaluated) holds ``proposal_count`` and ``per_position: [{"position", "total_weight",
"target_mean", ...}]``. Also accepted: ``{"metrics": [ROW, ...]}`` (the results JSON of some forks), a list of
ROWs, or one ROW.

``accept_rates_by_position[k]`` is **prefix survival**: proposals that accepted more than k drafts / proposals
that drafted more than k (n_k). With every proposal of full length (n_k = N) the conditional acceptance is
c_{k+1} = s_k / s_{k-1}, reached by N s_{k-1} proposals, exactly. With proposals of varying length (a dynamic
draft length) the same ratio assumes acceptance does not depend on the proposal's length; the counts are then
marked reconstructed. Counts come from ``confidence.per_position`` (n_k = total_weight), else from
``confidence.proposal_count``, else from ``(output_tokens - num_samples) / acceptance_length`` (reconstructed);
without any of these the file gives rates only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import numpy as np

from simlab.acceptance.logs.parsed import MAX_POSITIONS, AcceptanceLog, PositionCounts
from simlab.common.errors import InputError

NAME = "deepspec"
DESCRIPTION = "DeepSpec evaluation metrics.json (accept_rates_by_position is prefix survival)"
HAS_CONFIDENCE = False


def read(paths: list[Path], **_: object) -> AcceptanceLog:
    counts: dict = {}
    notes = ["DeepSpec's accept_rates_by_position is prefix survival; converted to conditional rates "
             "c_k = s_k / s_(k-1)"]
    files = []
    for path in paths:
        for file in (sorted(path.rglob("metrics.json")) if path.is_dir() else [path]):
            files.append(str(file))
            for dataset, value, note in _read_file(file):
                key = ("", dataset)
                counts[key] = counts[key] + value if key in counts else value
                if note and note not in notes:
                    notes.append(note)
    if not files:
        raise InputError("no metrics.json under this folder", file=paths[0], valid="DeepSpec's evaluation output")
    return AcceptanceLog(NAME, files, counts, None, notes)


def _read_file(path: Path) -> list[tuple[str, PositionCounts, str]]:
    if not path.is_file():
        raise InputError("no such metrics file", file=path, valid="DeepSpec's metrics.json")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"not valid JSON ({exc})", file=path) from None
    if isinstance(data, dict) and "spec" in data:
        return [_row(data["spec"], data.get("confidence"), path, "spec")]
    if isinstance(data, dict) and isinstance(data.get("metrics"), list):
        return [_row(row, None, path, f"metrics[{i}]") for i, row in enumerate(data["metrics"])]
    if isinstance(data, list):
        return [_row(row, None, path, f"[{i}]") for i, row in enumerate(data)]
    if isinstance(data, dict) and "accept_rates_by_position" in data:
        return [_row(data, None, path, "")]
    raise InputError("not a DeepSpec metrics document", file=path, field="(top level)",
                     valid='{"spec": {..., "accept_rates_by_position": [...]}, "confidence": {...}}, '
                           '{"metrics": [ROW, ...]}, or a list of such rows')


def _row(row: Any, confidence: Any, path: Path, where: str) -> tuple[str, PositionCounts, str]:
    field = lambda name: f"{where}.{name}" if where else name  # noqa: E731
    if not isinstance(row, dict):
        raise InputError("a metrics row must be a mapping", file=path, field=where or "(top level)")
    rates = row.get("accept_rates_by_position")
    if not isinstance(rates, list) or not rates:
        raise InputError("missing or empty", file=path, field=field("accept_rates_by_position"),
                         valid="a list of per-position prefix-survival rates")
    values = []
    for k, value in enumerate(rates):
        if value is None:
            break  # no proposal drafted this far
        if not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
            raise InputError("not a rate", file=path, field=field(f"accept_rates_by_position[{k}]"), value=value,
                             valid="a number from 0 to 1, or null")
        values.append(float(value))
    survival = np.array(values[:MAX_POSITIONS])
    if (np.diff(survival) > 1e-9).any():
        k = int(np.flatnonzero(np.diff(survival) > 1e-9)[0]) + 1
        raise InputError("prefix survival rises along the block", file=path,
                         field=field(f"accept_rates_by_position[{k}]"), value=values[k],
                         valid=f"at most the previous position's {values[k - 1]} (survival cannot rise)")
    dataset = str(row.get("dataset") or "*")
    drafted, kind, note = _proposals_per_position(row, confidence, len(survival))
    previous = np.concatenate([[1.0], survival[:-1]])
    reached = drafted * previous
    accepted = drafted * survival
    if kind != "rates":
        reached, accepted = np.round(reached), np.round(accepted)
    return dataset, PositionCounts(reached, accepted, kind).trimmed(), note


def _proposals_per_position(row: dict, confidence: Any, size: int) -> tuple[np.ndarray, str, str]:
    """n_k, the proposals that drafted position k, and how it was found."""
    per_position = confidence.get("per_position") if isinstance(confidence, dict) else None
    if isinstance(per_position, list) and per_position:
        weights = {int(e["position"]): float(e["total_weight"]) for e in per_position
                   if isinstance(e, dict) and "position" in e and "total_weight" in e}
        if all(k in weights for k in range(size)):
            drafted = np.array([weights[k] for k in range(size)])
            varying = drafted.max() - drafted.min() > 0.5
            note = ("proposals of varying length: conditional rates assume acceptance does not depend on the "
                    "proposal's length" if varying else "")
            return drafted, "reconstructed" if varying else "exact", note
    count = _number(confidence.get("proposal_count")) if isinstance(confidence, dict) else None
    if count is None:
        output, samples, length = (_number(row.get(k)) for k in ("output_tokens", "num_samples", "acceptance_length"))
        if output is not None and samples is not None and length:
            count = (output - samples) / length
            return np.full(size, count), "reconstructed", ("proposal count reconstructed as (output_tokens - "
                                                           "num_samples) / acceptance_length")
        return np.ones(size), "rates", "no proposal counts in the file: rates only, no confidence intervals"
    mean_length = _number(row.get("draft_tokens_per_proposal"))
    if mean_length is not None and mean_length < size - 0.5:
        return np.full(size, count), "reconstructed", ("proposals of varying length: every proposal counted at "
                                                       "every position, so deep positions' counts are overstated")
    return np.full(size, count), "exact", ""


def _number(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
