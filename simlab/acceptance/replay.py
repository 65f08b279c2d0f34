"""Replaying recorded acceptance (``acceptance: {kind: trace, ...}``): every simulated request replays one
recorded request's acceptance lengths instead of a fitted model.

``acc_len[i]`` of a recorded request is the number of tokens the target emitted in a round that started at
generated position i with an unbounded draft (accepted drafts + 1). A simulated round that starts at generated
position i (the tokens the request has emitted so far) with verify length l emits min(acc_len[i] - 1, l) + 1
tokens: the target accepts the first min(acc_len[i] - 1, gamma) drafts if all gamma are verified. A simulated
request longer than its recording continues from the recording's start (positions are taken modulo its
length). Which recording a request replays is drawn from the scenario's seed (stream RECORDING), so every arm
replays the same ones.

Recordings carry no confidence head: the head the schedulers see estimates each position's conditional rate
pooled over the recordings (plus the configured head error), so it knows positions apart but not easy rounds
from hard ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simlab.common import crn
from simlab.common.errors import InputError

MAX_POSITIONS = 16
RATE_FLOOR = 1e-4  # conditional rates are kept inside (0, 1) for their logits


@dataclass(frozen=True)
class RecordedAcceptance:
    """Every recorded request's acceptance lengths, ragged: request m's are ``values[offsets[m]:offsets[m+1]]``."""

    offsets: np.ndarray  # int64 [M + 1]
    values: np.ndarray  # int64, every value >= 1
    source: dict

    @classmethod
    def from_lists(cls, lists: list[np.ndarray], source: dict) -> "RecordedAcceptance":
        counts = np.array([len(x) for x in lists], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        values = np.concatenate(lists).astype(np.int64) if lists else np.zeros(0, dtype=np.int64)
        return cls(offsets, values, source)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def conditional_rates(self, num_positions: int = MAX_POSITIONS) -> np.ndarray:
        """c_k for k = 1..num_positions pooled over every recorded round start: P(accepted >= k | >= k - 1)."""
        accepted = self.values - 1
        reached = np.array([(accepted >= k - 1).sum() for k in range(1, num_positions + 1)], dtype=float)
        passed = np.array([(accepted >= k).sum() for k in range(1, num_positions + 1)], dtype=float)
        rates = np.divide(passed, reached, out=np.full(num_positions, np.nan), where=reached > 0)
        for k in range(num_positions):  # positions nobody reached repeat the last known rate
            if np.isnan(rates[k]):
                rates[k] = rates[k - 1] if k else 0.5
        return np.clip(rates, RATE_FLOOR, 1.0 - RATE_FLOOR)

    def bind(self, output_tokens: np.ndarray, seed: int) -> "BoundReplay":
        """Which recording each simulated request (with ``output_tokens``) replays: the same for every arm."""
        num_requests = len(output_tokens)
        pick = crn.keyed_uniform(seed, crn.RECORDING, np.arange(num_requests))
        chosen = np.minimum((pick * len(self)).astype(np.int64), len(self) - 1)
        return BoundReplay(self.offsets[chosen], self.offsets[chosen + 1] - self.offsets[chosen], self.values,
                           np.asarray(output_tokens, dtype=np.int64))


@dataclass(frozen=True)
class BoundReplay:
    """The recordings the simulated requests replay: each one's start in ``values`` and its length."""

    start: np.ndarray  # [N]
    length: np.ndarray  # [N]
    values: np.ndarray
    output_tokens: np.ndarray  # [N] the simulated requests' output lengths (positions are counted in them)

    def true_accepted(self, request_id: np.ndarray, position: np.ndarray, gamma: int) -> np.ndarray:
        """Drafts the target accepts when all ``gamma`` are verified, for requests at generated ``position``
        (broadcast with ``request_id``)."""
        start, length = self.start[request_id], self.length[request_id]
        return np.minimum(self.values[start + np.remainder(position, length)] - 1, gamma)


def load_recorded(path: Path, fmt: str, proposer: str | None, *, file, field: str) -> RecordedAcceptance:
    """Read a recording file (specdecode-bench JSON lines) into :class:`RecordedAcceptance`."""
    if fmt != "specdecode-bench":
        raise InputError("not a format trace replay reads", file=file, field=f"{field}.format", value=fmt,
                         valid="specdecode-bench")
    from simlab.acceptance.logs.specdecode_bench import read_acc_len

    by_request = read_acc_len(path, proposer)
    lists = [np.asarray(v, dtype=np.int64) for v in by_request.values() if len(v)]
    if not lists:
        raise InputError("no recorded acceptance lengths", file=path, valid="requests with acc_len values")
    for values in lists:
        if values.min() < 1:
            raise InputError("an acc_len value below 1 (a round emits at least one token)", file=path,
                             valid="integers >= 1")
    return RecordedAcceptance.from_lists(lists, {"path": str(path), "format": fmt, "proposer": proposer,
                                                 "num_recordings": len(lists)})
