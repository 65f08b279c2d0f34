"""Format ``vllm-metrics``: the Prometheus text that vLLM serves at ``/metrics``.

Read: the counters ``vllm:spec_decode_num_drafts``, ``vllm:spec_decode_num_draft_tokens``,
``vllm:spec_decode_num_accepted_tokens`` and ``vllm:spec_decode_num_accepted_tokens_per_pos{position="k"}``
(k = 0..gamma-1; with or without the ``_total`` suffix; other labels such as ``engine`` are summed over, one
``model_name`` at a time).

The per-position counter is **unconditional**: A_k counts drafts whose position k (0-based) was accepted, so
A_k / num_drafts is the survival a_{k+1}, not the conditional acceptance. Position k is reached by the drafts that
accepted 0..k-1, i.e. A_{k-1} of them (num_drafts for k = 0), hence c_{k+1} = A_k / A_{k-1}.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Optional

import numpy as np

from simlab.acceptance.logs.parsed import MAX_POSITIONS, AcceptanceLog, PositionCounts
from simlab.common.errors import InputError

NAME = "vllm-metrics"
DESCRIPTION = "Prometheus text from vLLM's /metrics (spec_decode counters; per-position counts are unconditional)"
HAS_CONFIDENCE = False
PREFIX = "vllm:spec_decode_"
COUNTERS = ("num_drafts", "num_draft_tokens", "num_accepted_tokens", "num_accepted_tokens_per_pos")
_SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?\s*$')
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')


def parse_prometheus(path: Path) -> list[tuple[int, str, dict[str, str], float]]:
    """(line number, metric name, labels, value) of every sample in a Prometheus text exposition."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason})", file=path) from None
    samples = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            raise InputError("not a Prometheus sample line", file=path, field=f"line {number}", value=line[:60],
                             valid='NAME{LABEL="VALUE",...} NUMBER, or a # comment')
        labels = {}
        if match.group(3):
            body = match.group(3)
            position = 0
            while position < len(body):
                label = _LABEL.match(body, position)
                if label is None:
                    raise InputError("malformed labels", file=path, field=f"line {number}", value=body[:60],
                                     valid='LABEL="VALUE" pairs separated by commas')
                labels[label.group(1)] = label.group(2)
                position = label.end()
        try:
            value = float(match.group(4))
        except ValueError:
            raise InputError("not a number", file=path, field=f"line {number}", value=match.group(4),
                             valid="a sample value such as 1234 or 1.2e3") from None
        samples.append((number, match.group(1), labels, value))
    return samples


def read(paths: list[Path], *, model: Optional[str] = None, **_: object) -> AcceptanceLog:
    counts: dict = {}
    notes = ["vLLM's per-position counter is unconditional (accepted at k / drafts); converted to conditional "
             "rates c_k = A_k / A_(k-1)"]
    for path in paths:
        if not path.is_file():
            raise InputError("no such metrics file", file=path, valid="a file holding the text of vLLM's /metrics")
        key, value, note = _read_one(path, model)
        counts[key] = counts[key] + value if key in counts else value
        if note and note not in notes:
            notes.append(note)
    return AcceptanceLog(NAME, [str(p) for p in paths], counts, None, notes)


def _read_one(path: Path, model: Optional[str]) -> tuple[tuple[str, str], PositionCounts, str]:
    samples = [s for s in parse_prometheus(path) if s[1].startswith(PREFIX)]
    models = sorted({s[2].get("model_name", "") for s in samples})
    if model is not None:
        if model not in models:
            raise InputError("no spec_decode counters for that model", file=path, field="--model", value=model,
                             valid=", ".join(m for m in models if m) or "(no model_name labels)")
        samples = [s for s in samples if s[2].get("model_name", "") == model]
    elif len(models) > 1:
        raise InputError("counters of several models", file=path, field="model_name",
                         value=", ".join(models), valid="pick one with --model NAME")
    totals: dict[str, float] = {}
    per_position: dict[int, float] = {}
    for number, name, labels, value in samples:
        base = name[len(PREFIX):]
        if base.endswith("_created"):
            continue
        base = base[: -len("_total")] if base.endswith("_total") else base
        if base not in COUNTERS:
            continue
        if not math.isfinite(value) or value < 0:
            raise InputError("a counter must be a finite non-negative number", file=path, field=f"line {number}",
                             value=value, valid="a count")
        if base == "num_accepted_tokens_per_pos":
            text = labels.get("position")
            if text is None or not text.isdigit():
                raise InputError("per-position counter without a position label", file=path,
                                 field=f"line {number}", value=text, valid='position="0", "1", ...')
            per_position[int(text)] = per_position.get(int(text), 0.0) + value
        else:
            totals[base] = totals.get(base, 0.0) + value
    for counter in ("num_drafts",):
        if counter not in totals:
            raise InputError(f"no {PREFIX}{counter} counter", file=path, field=f"{PREFIX}{counter}",
                             valid="a scrape of a vLLM server running speculative decoding")
    if not per_position:
        raise InputError(f"no {PREFIX}num_accepted_tokens_per_pos counter", file=path,
                         field=f"{PREFIX}num_accepted_tokens_per_pos",
                         valid="a vLLM version that exports per-position acceptance (v1 engine)")
    positions = sorted(per_position)
    if positions != list(range(len(positions))) or len(positions) > MAX_POSITIONS:
        raise InputError("per-position counters must cover positions 0..gamma-1 without gaps", file=path,
                         field=f"{PREFIX}num_accepted_tokens_per_pos", value=positions,
                         valid=f"positions 0..gamma-1, gamma <= {MAX_POSITIONS}")
    drafts = totals["num_drafts"]
    survived = np.array([per_position[k] for k in positions])
    reached = np.concatenate([[drafts], survived[:-1]])
    if drafts <= 0:
        raise InputError("no drafts were counted", file=path, field=f"{PREFIX}num_drafts", value=drafts,
                         valid="a scrape taken after speculative decoding ran")
    if (survived > reached + 1e-6).any():
        k = int(np.flatnonzero(survived > reached + 1e-6)[0])
        raise InputError("accepted at a position exceeds the drafts that reached it", file=path,
                         field=f'{PREFIX}num_accepted_tokens_per_pos{{position="{k}"}}', value=survived[k],
                         valid=f"at most {reached[k]:g} (drafts accepted up to position {k - 1}, or num_drafts)")
    accepted_total = totals.get("num_accepted_tokens")
    if accepted_total is not None and abs(accepted_total - survived.sum()) > 1e-6 * max(1.0, accepted_total):
        raise InputError("the per-position counters do not add up to the accepted tokens", file=path,
                         field=f"{PREFIX}num_accepted_tokens", value=accepted_total,
                         valid=f"the sum of the per-position counters, {survived.sum():g}")
    note = ""
    draft_tokens = totals.get("num_draft_tokens")
    if draft_tokens is not None and abs(draft_tokens - drafts * len(positions)) > 1e-6 * draft_tokens:
        note = (f"num_draft_tokens / num_drafts = {draft_tokens / drafts:.3f} < {len(positions)}: some drafts were "
                "shorter, so the drafts reaching position k are over-counted and c_k is understated there")
    return ("", "*"), PositionCounts(reached, survived).trimmed(), note  # the metrics do not name the drafter
