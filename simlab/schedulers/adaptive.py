"""``adaptive``: choose how much to draft, then what to verify, for the throughput of the whole step.

Algorithm 1 (``hardware_aware``) decides only what to verify: every request still drafts a full γ-block each
step, and at high load that block is compute it cannot get back. ``adaptive`` decides both, from what is known
before drafting:

1. **Draft plan** (:func:`plan_draft`), from each request's confidences ``lag_steps`` decode steps earlier
   (the arm's prior for younger requests), the batch and the cost curves. For every draft length d = 0..γ it
   walks the survival-sorted path of the lagged candidates at positions ≤ d and takes the verify budget K that
   maximises expected tokens per second of the whole step, ``(R + Σ a) / (draft_s(d, n) + verify_s(R + K))``,
   where n = R requests draft. Requests that would verify nothing at that optimum are then left out of the
   drafting (n shrinks) when that makes the draft cheaper. The plan is the (d, drafting set) of the best
   objective; ties go to the longer draft. With ``slo_tpot_ms``, only choices whose expected TPOT
   (step seconds × R ÷ expected tokens) is within it count; when none is, the one with the lowest TPOT.
2. **Verify** (:func:`verify`): Algorithm 1 on the current confidences of what was drafted, with the step's
   cost ``draft_s + verify_s(B)`` (the draft is paid whatever is verified, so the whole step's tokens per second
   is what the early stop maximises).

Lossless: the plan reads only confidences fixed before this step's drafts were sampled (the lag is a causal
barrier), and the verify lengths come from Algorithm 1's early stop, which never looks past the candidate it
decides. With a zero draft cost the plan drafts γ for every request and ``verify`` makes Algorithm 1's choices;
with a draft cost that speculation cannot repay it drafts nothing and the step is plain decoding.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from simlab.schedulers.inputs import ScheduleInputs
from simlab.schedulers.path import (
    batch_sizes, best_budget, budgets, early_stop, path_order, products, row_lengths, verify_seconds,
)


def plan_kernels():
    """The draft plan's compiled walks (numba is imported on a scheduler's first call)."""
    from simlab.schedulers import plan_kernels as compiled

    return compiled


def plan_draft(inp: ScheduleInputs, *, lag_steps: int, slo_tpot_ms: Optional[float]
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draft lengths [S], which requests draft [S, R] (only rows that may verify, ``max_len > 0``) and the
    verify budget [S] the draft was paid for (see :func:`_committed_budget`).

    The paths of every draft length are walked in one compiled call (:func:`simlab.schedulers.plan_kernels.draft_plan`;
    with an SLO one walk of the full path serves every d, the path of positions j < d being the full path with
    the others left out)."""
    steps, num_requests, gamma = inp.conf.shape
    if num_requests == 0:
        return np.zeros(steps, dtype=np.int64), np.zeros((steps, 0), dtype=bool), np.zeros(steps, dtype=np.int64)
    if inp.lagged_conf is None or inp.draft_cost is None:
        raise ValueError("adaptive needs lagged_conf and draft_cost")
    batch = batch_sizes(inp)
    lagged = products(inp.lagged_conf)
    row_len = row_lengths(inp.max_len, inp.conf.shape)  # positions a request cannot verify now are left out
    all_drafting = np.add.reduce(inp.max_len > 0, axis=1)  # [S] requests that may verify
    lengths = np.repeat(np.arange(1, gamma + 1), steps).reshape(gamma, steps)  # [G, S]: d = 1..G
    verify = verify_seconds(inp, batch, num_requests * gamma + 1)  # [S, n + 1]
    anchors, token_budget = batch.astype(np.float64), budgets(inp.token_budget, steps)
    draft_all_s = np.zeros((steps, gamma + 1))  # [S, d = 0..G]: every request that may verify drafts d
    draft_all_s[:, 1:] = inp.draft_cost(lengths, np.tile(all_drafting, (gamma, 1))).T
    if slo_tpot_ms is None:
        chosen_k, gained, drafting = plan_kernels().draft_plan(lagged, row_len, anchors, verify, draft_all_s,
                                                               token_budget)
        mean_recip = np.zeros((steps, gamma))
    else:
        chosen_k, gained, mean_recip, drafting = plan_kernels().draft_plan_slo(
            lagged, path_order(lagged, row_len), row_len, anchors, verify, draft_all_s, token_budget, batch,
            float(slo_tpot_ms))
    # [S, G, R] who verifies anything at each d's lagged optimum; leaving the others out may make the draft cheaper
    fewer = np.ascontiguousarray(np.add.reduce(drafting, axis=2).T)  # [G, S]
    draft_fewer = np.ascontiguousarray(inp.draft_cost(lengths, fewer), dtype=np.float64)
    best_len, best_set, best_draft, committed = plan_kernels().finish_plan(
        lagged, row_len, anchors, verify, token_budget, chosen_k, gained, mean_recip, draft_all_s, drafting, fewer,
        draft_fewer, batch, -1.0 if slo_tpot_ms is None else float(slo_tpot_ms), slo_tpot_ms is not None)
    if slo_tpot_ms is not None:
        committed = _committed_budget(inp, lagged, row_len, verify, best_len, best_set, best_draft, slo_tpot_ms)
    return best_len, best_set, committed


def _committed_budget(inp: ScheduleInputs, lagged: np.ndarray, row_len: np.ndarray, verify: np.ndarray,
                      draft_len: np.ndarray, drafting: np.ndarray, draft_s: np.ndarray,
                      slo_tpot_ms: Optional[float]) -> np.ndarray:
    """[S] the verify budget the plan paid its draft for: the best K of the lagged path over what is drafted
    (0 where drafting costs nothing: nothing was paid, so nothing is committed)."""
    paid = draft_s > 0.0
    if not np.logical_or.reduce(paid):
        return np.zeros(len(draft_len), dtype=np.int64)
    drafted = np.ascontiguousarray(np.where(drafting, np.minimum(row_len, draft_len[:, None]), 0), dtype=np.int64)
    k = best_budget(inp, lagged, drafted, extra_s=draft_s, slo_ms=slo_tpot_ms, seconds=verify)
    return np.where(paid, k, 0).astype(np.int64)


def verify(inp: ScheduleInputs, *, lag_steps: int, slo_tpot_ms: Optional[float]) -> np.ndarray:
    """Algorithm 1 with the whole step's cost (draft included), started at the plan's committed budget:
    the top ``min_budget`` candidates of the current survival path are admitted, then candidates while
    Θ = τ / (draft_s + verify_s(B)) strictly rises (and, with ``slo_tpot_ms``, while the expected TPOT stays
    within it). ``inp.max_len`` is already cut to the plan;
    ``inp.draft_s`` is the plan's draft seconds. Without a draft cost this is exactly ``hardware_aware``."""
    steps, num_requests, _ = inp.conf.shape
    draft_s = np.asarray(inp.draft_s, dtype=float)
    start = np.zeros(steps, dtype=np.int64) if inp.min_budget is None else np.asarray(inp.min_budget)
    if num_requests == 0:
        return np.zeros((steps, 0), dtype=np.int64)
    return early_stop(inp, products(inp.conf), row_lengths(inp.max_len, inp.conf.shape), extra_s=draft_s,
                      start=start, slo_ms=slo_tpot_ms)
