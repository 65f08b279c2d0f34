"""What acceptance logs hold once parsed: per-position counts, and (where the log has them) draft rounds.

Every format parser (one module each in this package) returns an :class:`AcceptanceLog`. Two levels:

- **counts**, always: per (method label, domain), how many rounds reached draft position k (judged: verified
  with positions 1..k-1 all accepted) and how many accepted it. ``accepted[k] / reached[k]`` is the
  *conditional* acceptance c_k that a ``kind: positional`` curve holds.
- **rounds**, where the log has per-round detail: one row per draft round (a request's decode step), with the
  request it belongs to, its position in that request's run of rounds, how many positions were drafted, verified
  (the verify length l) and accepted (a <= l), and the confidence head's raw estimates when the log has them.
  That is what the latent model (request and step heterogeneity, the head's error) is fitted on.

Method labels are what the log calls the drafter (an arm's method, a proposer name); the fit maps them to
simlab's methods (``--method``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

MAX_POSITIONS = 16


@dataclass(frozen=True)
class PositionCounts:
    """reached[k] and accepted[k] for positions k = 1..len (index k-1).

    ``kind`` says where the numbers come from: ``exact`` (counted from rounds or counters), ``reconstructed``
    (rebuilt from published rates and a known number of rounds; approximate) or ``rates`` (the log gives rates
    only: ``reached`` is then a survival scale, not a count, and no confidence interval can be given).
    """

    reached: np.ndarray
    accepted: np.ndarray
    kind: str = "exact"

    def __post_init__(self) -> None:
        object.__setattr__(self, "reached", np.asarray(self.reached, dtype=float))
        object.__setattr__(self, "accepted", np.asarray(self.accepted, dtype=float))

    def __add__(self, other: "PositionCounts") -> "PositionCounts":
        if "rates" in (self.kind, other.kind):
            raise ValueError("rates without counts cannot be pooled")
        size = max(len(self.reached), len(other.reached))
        kind = "exact" if self.kind == other.kind == "exact" else "reconstructed"
        return PositionCounts(_pad(self.reached, size) + _pad(other.reached, size),
                              _pad(self.accepted, size) + _pad(other.accepted, size), kind)

    @property
    def rates(self) -> np.ndarray:
        """Conditional acceptance accepted[k] / reached[k] (NaN where nothing reached k)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.reached > 0, self.accepted / np.where(self.reached > 0, self.reached, 1), np.nan)

    def trimmed(self) -> "PositionCounts":
        """Without the trailing positions that no round reached."""
        nonzero = np.flatnonzero(self.reached > 0)
        size = int(nonzero[-1]) + 1 if nonzero.size else 0
        return PositionCounts(self.reached[:size], self.accepted[:size], self.kind)


def _pad(values: np.ndarray, size: int) -> np.ndarray:
    return np.concatenate([values, np.zeros(size - len(values), dtype=values.dtype)])


@dataclass(frozen=True)
class Rounds:
    """Draft rounds, one row each (arrays of equal length N; ``conf`` is [N, G]).

    method, domain: labels per row.
    sequence:       rows with the same value are one request's run of rounds (one arm or proposer), ordered by
                    ``step``; -1 everywhere when the log does not say which request a round belongs to.
    cluster:        the request's identity across arms (rows of the same request under several arms share it;
                    standard errors are clustered on it).
    step:           the round's index within its sequence (gaps are rounds the log does not have).
    drafted:        positions drafted; verified: the verify length l <= drafted; accepted: drafts accepted, <= l.
    conf:           the head's raw confidence per drafted position, NaN where there is none; None when the log
                    has no confidences at all.
    """

    method: np.ndarray
    domain: np.ndarray
    sequence: np.ndarray
    cluster: np.ndarray
    step: np.ndarray
    drafted: np.ndarray
    verified: np.ndarray
    accepted: np.ndarray
    conf: Optional[np.ndarray] = None

    def __len__(self) -> int:
        return len(self.verified)

    @property
    def has_sequences(self) -> bool:
        """Whether rounds are tied to requests (needed to tell request from step heterogeneity)."""
        return len(self) > 0 and bool((self.sequence >= 0).all())

    @property
    def has_confidence(self) -> bool:
        return self.conf is not None and bool(np.isfinite(self.conf).any())

    def select(self, rows: np.ndarray) -> "Rounds":
        """The rounds in ``rows`` (a boolean mask or indices)."""
        conf = None if self.conf is None else self.conf[rows]
        return Rounds(self.method[rows], self.domain[rows], self.sequence[rows], self.cluster[rows],
                      self.step[rows], self.drafted[rows], self.verified[rows], self.accepted[rows], conf)

    def relabel(self, method: np.ndarray, domain: np.ndarray) -> "Rounds":
        return Rounds(method, domain, self.sequence, self.cluster, self.step, self.drafted, self.verified,
                      self.accepted, self.conf)

    @property
    def judged(self) -> np.ndarray:
        """Positions judged per round: 1..min(l, a + 1) (a rejection at a + 1, or all l accepted)."""
        return np.minimum(self.verified, self.accepted + 1)

    def counts(self) -> dict[tuple[str, str], PositionCounts]:
        """Exact per-position counts per (method, domain)."""
        out: dict[tuple[str, str], PositionCounts] = {}
        judged = self.judged
        for key in dict.fromkeys(zip(self.method.tolist(), self.domain.tolist())):
            rows = (self.method == key[0]) & (self.domain == key[1])
            size = int(self.verified[rows].max(initial=0))
            if size == 0:
                continue
            reached = np.bincount(judged[rows], minlength=size + 1)[::-1].cumsum()[::-1][1:]
            accepted = np.bincount(self.accepted[rows], minlength=size + 1)[::-1].cumsum()[::-1][1:]
            counts = PositionCounts(reached, accepted).trimmed()
            if len(counts.reached):
                out[key] = counts
        return out


@dataclass
class AcceptanceLog:
    """A parsed log: ``counts`` per (method label, domain), ``rounds`` where the log has them, and notes on
    how the format's numbers were converted (they go into the fitted file's provenance)."""

    format: str
    files: list[str]
    counts: dict[tuple[str, str], PositionCounts]
    rounds: Optional[Rounds] = None
    notes: list[str] = field(default_factory=list)

    @classmethod
    def from_rounds(cls, format: str, files: list[str], rounds: Rounds, notes: Optional[list[str]] = None
                    ) -> "AcceptanceLog":
        return cls(format, files, rounds.counts(), rounds, list(notes or []))


def concat_rounds(parts: list[Rounds]) -> Rounds:
    """One :class:`Rounds` from several (sequence numbers are kept apart)."""
    parts = [p for p in parts if len(p)]
    if not parts:
        raise ValueError("no rounds")
    width = max((p.conf.shape[1] for p in parts if p.conf is not None), default=0)
    offset, sequences = 0, []
    for p in parts:
        seq = np.where(p.sequence >= 0, p.sequence + offset, -1)
        sequences.append(seq)
        offset = int(seq.max(initial=offset - 1)) + 1
    conf = None
    if width:
        conf = np.full((sum(len(p) for p in parts), width), np.nan)
        row = 0
        for p in parts:
            if p.conf is not None:
                conf[row:row + len(p), : p.conf.shape[1]] = p.conf
            row += len(p)
    return Rounds(
        np.concatenate([p.method for p in parts]), np.concatenate([p.domain for p in parts]),
        np.concatenate(sequences), np.concatenate([p.cluster for p in parts]),
        np.concatenate([p.step for p in parts]), np.concatenate([p.drafted for p in parts]),
        np.concatenate([p.verified for p in parts]), np.concatenate([p.accepted for p in parts]), conf,
    )
