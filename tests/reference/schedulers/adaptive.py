"""``adaptive`` written with numpy and a full sort per draft length: the reference simlab/schedulers/adaptive.py
is tested against (that module's docstring says what the scheduler does)."""

from __future__ import annotations

from typing import Optional

import numpy as np

from simlab.schedulers.inputs import ScheduleInputs
from .path import build_path, cap, survival


def plan_draft(inp: ScheduleInputs, *, lag_steps: int, slo_tpot_ms: Optional[float]
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draft lengths [S], which requests draft [S, R] (only rows that may verify, ``max_len > 0``) and the
    verify budget [S] the draft was paid for (see :func:`_committed_budget`)."""
    steps, num_requests, gamma = inp.conf.shape
    if num_requests == 0:
        return np.zeros(steps, dtype=np.int64), np.zeros((steps, 0), dtype=bool), np.zeros(steps, dtype=np.int64)
    if inp.lagged_conf is None or inp.draft_cost is None:
        raise ValueError("adaptive needs lagged_conf and draft_cost")
    may_verify = inp.max_len > 0  # [S, R]
    batch = inp.num_requests if inp.num_requests is not None else np.full(steps, num_requests)
    lagged = survival(inp.lagged_conf, inp.max_len)  # positions a request cannot verify now are invalid
    all_drafting = np.add.reduce(may_verify, axis=1)  # [S]
    rows = np.arange(steps)
    plain_s = _plain_seconds(inp, batch)  # d = 0: no draft, every request emits one token
    best = _Choice(batch / plain_s, plain_s * 1e3, slo_tpot_ms)
    best_len = np.zeros(steps, dtype=np.int64)
    best_set = np.zeros((steps, num_requests), dtype=bool)
    best_draft = np.zeros(steps)
    for d in range(1, gamma + 1):
        a = np.where(np.arange(gamma) < d, lagged, -1.0)
        path = build_path(a, inp.num_requests)
        gained = path.gained  # [S, n + 1]
        verify = np.broadcast_to(path.seconds(inp.verify_s), gained.shape)
        draft_all = inp.draft_cost(np.full(steps, d), all_drafting)  # [S]
        mean_recip = _mean_reciprocal_tokens(a, batch) if slo_tpot_ms is not None else None
        k = _best_budget(gained, verify + draft_all[:, None], cap(path.num_valid, inp.token_budget), mean_recip,
                         slo_tpot_ms)
        drafting = (path.lengths(k) > 0) & may_verify  # who verifies anything at the lagged optimum
        fewer = np.add.reduce(drafting, axis=1)
        draft_fewer = inp.draft_cost(np.full(steps, d), fewer)
        use_fewer = draft_fewer < draft_all
        drafting = np.where(use_fewer[:, None], drafting, may_verify)
        draft = np.where(use_fewer, draft_fewer, draft_all)
        step_s = verify[rows, k] + draft
        factor = mean_recip[rows, k] if mean_recip is not None else batch / gained[rows, k]
        choice = _Choice(gained[rows, k] / step_s, step_s * factor * 1e3, slo_tpot_ms)
        better = best.beaten_by(choice) & np.logical_or.reduce(drafting, axis=1)  # nobody drafting is d = 0
        best = best.where(better, choice)
        best_len = np.where(better, d, best_len)
        best_set = np.where(better[:, None], drafting, best_set)
        best_draft = np.where(better, draft, best_draft)
    best_set &= best_len[:, None] > 0
    return best_len, best_set, _committed_budget(inp, lagged, best_len, best_set, best_draft, batch, slo_tpot_ms)


class _Choice:
    """A plan's expected tokens per second and expected TPOT (ms), per step, and whether it meets the SLO."""

    def __init__(self, objective: np.ndarray, tpot_ms: np.ndarray, slo_tpot_ms: Optional[float]) -> None:
        self.objective, self.tpot_ms = objective, tpot_ms
        self.ok = np.ones(objective.shape, dtype=bool) if slo_tpot_ms is None else tpot_ms <= slo_tpot_ms

    def beaten_by(self, other: "_Choice") -> np.ndarray:
        """Feasible beats infeasible; among feasible the higher objective, among infeasible the lower TPOT;
        ties go to ``other`` (the longer draft)."""
        same = other.ok == self.ok
        return np.where(same, np.where(other.ok, other.objective >= self.objective, other.tpot_ms <= self.tpot_ms),
                        other.ok)

    def where(self, take: np.ndarray, other: "_Choice") -> "_Choice":
        merged = _Choice(np.where(take, other.objective, self.objective), np.where(take, other.tpot_ms, self.tpot_ms),
                         None)
        merged.ok = np.where(take, other.ok, self.ok)
        return merged


def _mean_reciprocal_tokens(a: np.ndarray, batch: np.ndarray) -> np.ndarray:
    """[S, n + 1] the batch's mean over requests of 1 / (expected tokens of the request) after admitting the
    first K candidates of the survival path of ``a``: a step's expected TPOT is its seconds times this."""
    steps = a.shape[0]
    valid = a >= 0.0
    cumulative = np.add.accumulate(np.where(valid, a, 0.0), axis=-1)  # expected accepted up to position j
    delta = np.where(valid, 1.0 / (1.0 + cumulative) - 1.0 / (1.0 + cumulative - np.where(valid, a, 0.0)), 0.0)
    order = np.argsort(-a.reshape(steps, -1), axis=-1, kind="stable")  # the path's order, ties by (r, j)
    out = np.empty((steps, order.shape[-1] + 1))
    out[:, 0] = 0.0
    np.add.accumulate(np.take_along_axis(delta.reshape(steps, -1), order, axis=-1), axis=-1, out=out[:, 1:])
    return (batch[:, None] + out) / np.maximum(batch, 1)[:, None]


def _committed_budget(inp: ScheduleInputs, lagged: np.ndarray, draft_len: np.ndarray, drafting: np.ndarray,
                      draft_s: np.ndarray, batch: np.ndarray, slo_tpot_ms: Optional[float]) -> np.ndarray:
    """[S] the verify budget the plan paid its draft for: the best K of the lagged path over what is drafted
    (0 where drafting costs nothing: nothing was paid, so nothing is committed)."""
    gamma = lagged.shape[-1]
    steps = len(draft_len)
    paid = draft_s > 0.0
    if not np.logical_or.reduce(paid):
        return np.zeros(steps, dtype=np.int64)
    a = np.where((np.arange(gamma)[None, None, :] < draft_len[:, None, None]) & drafting[..., None], lagged, -1.0)
    path = build_path(a, inp.num_requests)
    seconds = np.broadcast_to(path.seconds(inp.verify_s), path.gained.shape) + draft_s[:, None]
    mean_recip = _mean_reciprocal_tokens(a, batch) if slo_tpot_ms is not None else None
    k = _best_budget(path.gained, seconds, cap(path.num_valid, inp.token_budget), mean_recip, slo_tpot_ms)
    return np.where(paid, k, 0).astype(np.int64)


def _plain_seconds(inp: ScheduleInputs, batch: np.ndarray) -> np.ndarray:
    """Verify seconds of a step in which nobody drafts (B = R)."""
    seconds = np.asarray(inp.verify_s(batch[:, None]), dtype=float)
    return np.broadcast_to(seconds.reshape(-1, 1), (len(batch), 1))[:, 0] if seconds.size == 1 else \
        seconds.reshape(len(batch), -1)[:, 0]


def _best_budget(gained: np.ndarray, seconds: np.ndarray, limit: np.ndarray, mean_recip: Optional[np.ndarray],
                 slo_tpot_ms: Optional[float]) -> np.ndarray:
    """Per step, the K in [0, limit] with the most expected tokens per second; with an SLO, among the K whose
    expected TPOT (seconds x mean reciprocal tokens) is within it, or the K with the lowest TPOT when none is.
    The first maximum wins."""
    ks = np.arange(gained.shape[-1])[None, :]
    valid = ks <= limit[:, None]
    objective = np.where(valid, gained / seconds, -np.inf)
    if slo_tpot_ms is None:
        return np.argmax(objective, axis=-1)
    tpot_ms = seconds * mean_recip * 1e3
    feasible = valid & (tpot_ms <= slo_tpot_ms)
    within = np.argmax(np.where(feasible, objective, -np.inf), axis=-1)
    fastest = np.argmin(np.where(valid, tpot_ms, np.inf), axis=-1)
    return np.where(np.logical_or.reduce(feasible, axis=-1), within, fastest)


def verify(inp: ScheduleInputs, *, lag_steps: int, slo_tpot_ms: Optional[float]) -> np.ndarray:
    """Algorithm 1 with the whole step's cost (draft included), started at the plan's committed budget:
    the top ``min_budget`` candidates of the current survival path are admitted, then candidates while
    Θ = τ / (draft_s + verify_s(B)) strictly rises (and, with ``slo_tpot_ms``, while the expected TPOT stays
    within it). ``inp.max_len`` is already cut to the plan;
    ``inp.draft_s`` is the plan's draft seconds. Without a draft cost this is exactly ``hardware_aware``."""
    from .policies import hardware_aware

    draft_s = np.asarray(inp.draft_s, dtype=float)
    steps, num_requests, _ = inp.conf.shape
    start = np.zeros(steps, dtype=np.int64) if inp.min_budget is None else np.asarray(inp.min_budget)
    if not np.logical_or.reduce(draft_s.ravel() != 0.0) and not np.logical_or.reduce(start > 0) \
            and slo_tpot_ms is None:
        return hardware_aware(inp)
    if num_requests == 0:
        return np.zeros((steps, 0), dtype=np.int64)
    path = build_path(survival(inp.conf, inp.max_len), inp.num_requests, max_len=inp.max_len)
    limit = cap(path.num_valid, inp.token_budget)
    seconds = path.seconds(inp.verify_s) + (draft_s[:, None] if draft_s.ndim else draft_s)
    theta = path.gained / seconds  # [S, n + 1]
    n = theta.shape[-1] - 1
    first = np.minimum(start, limit)
    ks = np.arange(n)[None, :]
    falls = theta[:, 1:] <= theta[:, :-1]
    if slo_tpot_ms is not None:  # nor past the SLO: the next candidate must keep the expected TPOT within it
        batch = inp.num_requests if inp.num_requests is not None else np.full(steps, num_requests)
        a = survival(inp.conf, inp.max_len)
        tpot_ms = seconds * _mean_reciprocal_tokens(a, batch) * 1e3
        falls |= tpot_ms[:, 1:] > slo_tpot_ms
    stop = (falls & (ks >= first[:, None])) | (ks >= limit[:, None])
    admitted = np.where(np.logical_or.reduce(stop, axis=-1), stop.argmax(axis=-1), n)
    return path.lengths(np.maximum(admitted, first))
