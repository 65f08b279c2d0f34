"""Format ``specdecode-bench``: JSON lines, one request each, with recorded acceptance lengths per proposer.

A line: ``{"id": ..., "prompt_token_ids": [...], "generated_token_ids": [...], "acc_<proposer>": {"acc_len":
[...]}, ...}`` with one or more proposers and an optional ``"domain"``. ``acc_len[i]`` is the number of tokens
the target emits in one round that starts at generated position i with an unbounded draft: accepted drafts + 1,
so at least 1; one value per generated position.

:func:`read_acc_len` returns the per-request arrays (what trace replay needs). For fitting, a speculative run
with draft length gamma is replayed along each request: a round at position i accepts a = min(acc_len[i] - 1,
gamma) drafts and the next round starts at i + a + 1. A round whose acceptance runs into the end of the request
(i + acc_len[i] >= length) tells only that a drafts were accepted (no rejection is seen).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from simlab.acceptance.logs.parsed import MAX_POSITIONS, AcceptanceLog, Rounds, concat_rounds
from simlab.common.errors import InputError

NAME = "specdecode-bench"
DESCRIPTION = "JSON lines per request with acc_<proposer>: {acc_len: [...]} (unbounded-draft acceptance lengths)"
HAS_CONFIDENCE = False
PREFIX = "acc_"
DEFAULT_GAMMA = MAX_POSITIONS


@dataclass(frozen=True)
class RecordedRequest:
    """One line: the request's id, domain (``*`` when the line has none) and acceptance lengths per proposer."""

    id: str
    domain: str
    acc_len: dict[str, np.ndarray]


def read_requests(path: str | Path) -> list[RecordedRequest]:
    """Every line of a specdecode-bench file, validated (InputError naming the line and the field)."""
    path = Path(path)
    if not path.is_file():
        raise InputError("no such specdecode-bench file", file=path, valid="a JSON-lines file, one request per line")
    out, seen = [], set()
    with path.open(encoding="utf-8") as fh:
        try:
            lines = list(fh)
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text ({exc.reason})", file=path) from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise InputError(f"not a JSON object ({exc.msg})", file=path, field=where,
                             valid="one JSON object per line") from None
        if not isinstance(row, dict):
            raise InputError("not a JSON object", file=path, field=where, valid="one JSON object per line")
        for key in ("id", "generated_token_ids"):
            if key not in row:
                raise InputError("missing", file=path, field=f"{where}: {key}",
                                 valid="id, prompt_token_ids, generated_token_ids and acc_<proposer>")
        generated = row["generated_token_ids"]
        if not isinstance(generated, list) or not generated:
            raise InputError("not a non-empty list", file=path, field=f"{where}: generated_token_ids",
                             valid="the generated token ids")
        request_id = str(row["id"])
        if request_id in seen:
            raise InputError("a request id appears twice", file=path, field=f"{where}: id", value=row["id"],
                             valid="one line per request")
        seen.add(request_id)
        domain = row.get("domain", "*")
        if not isinstance(domain, str) or not domain:
            raise InputError("not a name", file=path, field=f"{where}: domain", value=domain, valid="a domain name")
        acc = {}
        for key, value in row.items():
            if not key.startswith(PREFIX):
                continue
            acc[key[len(PREFIX):]] = _acc_len(value, len(generated), path, f"{where}: {key}.acc_len")
        if not acc:
            raise InputError("no acc_<proposer> entry", file=path, field=where,
                             valid='at least one "acc_NAME": {"acc_len": [...]}')
        out.append(RecordedRequest(request_id, domain, acc))
    if not out:
        raise InputError("no requests", file=path, valid="one JSON object per line")
    return out


def _acc_len(value: object, length: int, path: Path, field: str) -> np.ndarray:
    values = value.get("acc_len") if isinstance(value, dict) else None
    if not isinstance(values, list):
        raise InputError("missing", file=path, field=field, valid='{"acc_len": [integers >= 1]}')
    if len(values) != length:
        raise InputError(f"{len(values)} values for {length} generated tokens", file=path, field=field,
                         valid="one acceptance length per generated position")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in values):
        bad = next(v for v in values if not (isinstance(v, int) and not isinstance(v, bool) and v >= 1))
        raise InputError("not an acceptance length", file=path, field=field, value=bad,
                         valid="integers >= 1 (accepted drafts + 1)")
    return np.asarray(values, dtype=np.int64)


def proposers(requests: list[RecordedRequest]) -> list[str]:
    """Proposer names present on every request, in first-line order."""
    names = list(requests[0].acc_len)
    return [n for n in names if all(n in r.acc_len for r in requests)]


def read_acc_len(path: str | Path, proposer: Optional[str] = None) -> dict[str, np.ndarray]:
    """Request id -> acc_len array for one proposer (the only one when ``proposer`` is None). This is what trace
    replay (``acceptance: {kind: trace, format: specdecode-bench}``) reads."""
    requests = read_requests(path)
    name = choose_proposer(requests, proposer, Path(path))
    return {r.id: r.acc_len[name] for r in requests}


def choose_proposer(requests: list[RecordedRequest], proposer: Optional[str], path: Path,
                    field: str = "proposer") -> str:
    names = proposers(requests)
    if proposer is None:
        if len(names) != 1:
            raise InputError("several proposers in the file" if names else "no proposer on every line", file=path,
                             field=field, valid=f"one of {', '.join(names)}" if names else "acc_NAME on every line")
        return names[0]
    if proposer not in names:
        raise InputError("no such proposer on every line", file=path, field=field, value=proposer,
                         valid=", ".join(names) or "(none)")
    return proposer


def replay_rounds(acc_len: np.ndarray, gamma: int) -> tuple[np.ndarray, np.ndarray]:
    """The rounds of a run with draft length gamma: (verified, accepted) per round along the request."""
    verified, accepted = [], []
    length, i = len(acc_len), 0
    while i < length:
        a = min(int(acc_len[i]) - 1, gamma)
        runs_out = i + int(acc_len[i]) >= length and a < gamma
        verified.append(a if runs_out else gamma)  # no rejection seen when the request ends first
        accepted.append(a)
        i += a + 1
    return np.array(verified, dtype=np.int64), np.array(accepted, dtype=np.int64)


def read(paths: list[Path], *, proposer: Optional[str] = None, gamma: Optional[int] = None,
         **_: object) -> AcceptanceLog:
    gamma = gamma or DEFAULT_GAMMA
    parts = []
    for path in paths:
        requests = read_requests(path)
        name = choose_proposer(requests, proposer, path, field="--proposer")
        for r in requests:
            verified, accepted = replay_rounds(r.acc_len[name], gamma)
            keep = verified > 0
            n = int(keep.sum())
            parts.append(Rounds(
                method=np.full(n, name, dtype=object), domain=np.full(n, r.domain, dtype=object),
                sequence=np.zeros(n, dtype=np.int64), cluster=np.full(n, r.id, dtype=object),
                step=np.flatnonzero(keep).astype(np.int64), drafted=np.full(n, gamma, dtype=np.int64),
                verified=verified[keep], accepted=accepted[keep],
            ))
    notes = [f"specdecode-bench: rounds replayed along each request with gamma = {gamma} (a = min(acc_len - 1, "
             "gamma)); the method is the proposer name unless --method says otherwise"]
    return AcceptanceLog.from_rounds(NAME, [str(p) for p in paths], _per_request(parts), notes)


def _per_request(parts: list[Rounds]) -> Rounds:
    """Concatenate, giving each request its own sequence number."""
    numbered = [Rounds(p.method, p.domain, np.full(len(p), i, dtype=np.int64), p.cluster, p.step, p.drafted,
                       p.verified, p.accepted) for i, p in enumerate(parts)]
    return concat_rounds(numbered)
