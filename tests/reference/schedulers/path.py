"""The survival-sorted candidate path shared by the load-aware schedulers.

Every (request r, position j) pair is a candidate worth a_{r,j} = prod_{i<=j} c_hat_{r,i} expected tokens.
Sorting all candidates by a descending (ties in (request, position) order) keeps each request's admitted
positions a prefix, because a is non-increasing in j. Admitting the first K candidates of the path gives K
verify tokens.
"""

from __future__ import annotations

import numpy as np

from simlab.schedulers.path import survival  # noqa: F401  (the values; the path below is the reference)

_INVALID = -1.0


class Path:
    """Candidates of each step sorted by survival. Admitting the first K of step s admits every candidate above
    ``values[s, K-1]`` and, among those equal to it, the first ones in (request, position) order."""

    __slots__ = ("survival", "values", "num_valid", "anchors", "max_len")

    def __init__(self, survival: np.ndarray, values: np.ndarray, num_valid: np.ndarray,  # noqa: F811 (an argument)
                 anchors: np.ndarray | int, max_len: np.ndarray | None = None) -> None:
        self.survival = survival  # [S, R, G] the candidates' values (invalid ones -1)
        self.values = values  # [S, R*G] survival along the path, descending (invalid ones last, as -1)
        self.num_valid = num_valid  # [S]
        self.anchors = anchors  # requests in the batch at each step ([S], or R for every step)
        self.max_len = max_len  # the limits ``survival`` was masked with, when known

    @property
    def gained(self) -> np.ndarray:
        """[S, n + 1] expected tokens after admitting K = 0..n candidates: R + the sum of their survival.
        Entries past ``num_valid`` are meaningless; callers mask them with :func:`cap`."""
        steps, n = self.values.shape
        out = np.empty((steps, n + 1))
        out[:, 0] = 0.0
        np.add.accumulate(self.values, axis=-1, out=out[:, 1:])
        return out + (self.anchors[:, None] if isinstance(self.anchors, np.ndarray) else self.anchors)

    def seconds(self, verify_s) -> np.ndarray:
        """[S or 1, n + 1] verify seconds after admitting K = 0..n candidates (batch tokens R + K)."""
        ks = np.arange(self.values.shape[-1] + 1)
        if not isinstance(self.anchors, np.ndarray):
            return verify_s((self.anchors + ks)[None, :])
        return verify_s(self.anchors[:, None] + ks[None, :])

    def lengths(self, num_admitted: np.ndarray) -> np.ndarray:
        """Per-request verify lengths [S, R] when the first ``num_admitted[s]`` candidates are admitted."""
        a = self.survival
        if self.max_len is not None and np.logical_and.reduce(num_admitted == self.num_valid):
            return self._all_valid()
        steps = a.shape[0]
        # the K-th value of the path; nothing is admitted where K = 0 (no candidate is above 2)
        if steps == 1:
            k = int(num_admitted[0])
            cut = self.values[0, k - 1] if k > 0 else 2.0
        else:
            cut = np.where(num_admitted > 0, self.values[np.arange(steps), np.maximum(num_admitted, 1) - 1],
                           2.0)[:, None, None]
        at_least_cut = a >= cut
        if np.logical_and.reduce(np.add.reduce(at_least_cut.reshape(steps, -1), axis=-1) == num_admitted):
            return np.add.reduce(at_least_cut, axis=-1)  # no tie straddles the cut
        above = a > cut
        # ties at the cut: the first (K - those above) of them in (request, position) order
        tied = (a == cut).reshape(steps, -1)
        room = num_admitted - np.add.reduce(above.reshape(steps, -1), axis=-1)
        admitted = above | (tied & (np.add.accumulate(tied, axis=-1) <= room[:, None])).reshape(a.shape)
        return np.add.reduce(admitted, axis=-1)


    def _all_valid(self) -> np.ndarray:
        """Lengths when every valid candidate is admitted: each request's limit (what load-aware schedulers
        choose at low load), without comparing survival values."""
        steps, num_requests, gamma = self.survival.shape
        lengths = np.minimum(np.maximum(self.max_len, 0), gamma)
        if lengths.shape != (steps, num_requests):
            lengths = np.broadcast_to(lengths, (steps, num_requests)).copy()
        return lengths.astype(np.int64, copy=False)


def build_path(a: np.ndarray, anchors: np.ndarray | None = None, *, head: int | None = None,
               max_len: np.ndarray | None = None) -> Path:
    """Sort the candidates of each step in ``a`` [S, R, G] by survival, descending.

    ``anchors`` [S] counts the requests in each step's batch (default: all R rows). With ``head`` only the first
    ``head`` candidates of each path are sorted (the same values as the full path's first ``head``: ties are equal
    numbers); ``num_valid`` still counts every valid candidate. ``max_len``, the limits ``a`` was masked with by
    :func:`survival`, lets :meth:`Path.lengths` skip the comparison when every valid candidate is admitted."""
    steps, num_requests, gamma = a.shape
    flat = a.reshape(steps, num_requests * gamma)
    if head is not None and head < flat.shape[-1]:
        top = np.partition(flat, flat.shape[-1] - head, axis=-1)[:, flat.shape[-1] - head:]
        values = np.sort(top, axis=-1)[:, ::-1]
        num_valid = np.add.reduce(flat > _INVALID / 2, axis=-1)
    else:
        values = np.sort(flat, axis=-1)[:, ::-1]
        num_valid = np.add.reduce(values > _INVALID / 2, axis=-1)
    if anchors is None or np.logical_and.reduce(anchors == num_requests):
        anchors = num_requests
    return Path(survival=a, values=values, num_valid=num_valid, anchors=anchors, max_len=max_len)


def cap(num_valid: np.ndarray, token_budget) -> np.ndarray:
    """How far along each step's path a scheduler may go (``token_budget``: None, a scalar or [S])."""
    return num_valid if token_budget is None else np.minimum(num_valid, np.maximum(token_budget, 0))


def argmax_budget(objective: np.ndarray, limit: np.ndarray) -> np.ndarray:
    """Per step, the K in [0, limit] maximising ``objective`` [S, n + 1] (indexed by K); first maximum wins."""
    ks = np.arange(objective.shape[-1])[None, :]
    return np.argmax(np.where(ks <= limit[:, None], objective, -np.inf), axis=-1)


def over_budget(lengths: np.ndarray, token_budget) -> np.ndarray | None:
    """Which steps' lengths total more than their token budget; None when none does (or there is no budget)."""
    if token_budget is None:
        return None
    over = np.add.reduce(lengths, axis=-1) > token_budget
    return over if np.logical_or.reduce(over, axis=None) else None


def clip_to_budget(lengths: np.ndarray, a: np.ndarray, token_budget: int | None) -> np.ndarray:
    """Trim lengths whose total exceeds the budget, keeping the highest-survival positions."""
    over = over_budget(lengths, token_budget)
    if over is None:
        return lengths
    positions = np.arange(a.shape[-1])
    chosen = np.where(positions < lengths[..., None], a, _INVALID)
    path = build_path(chosen[over])
    budget = token_budget[over] if np.ndim(token_budget) else token_budget
    trimmed = path.lengths(np.minimum(path.num_valid, budget))
    out = lengths.copy()
    out[over] = trimmed
    return out
