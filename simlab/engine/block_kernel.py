"""A block of decode steps in one call of compiled code (numba): every step's inputs, its verify lengths, the
accepted counts and the emissions, step after step.

The numpy block (:func:`simlab.engine.block.plan_block`) guesses a block's emissions and solves it as a fixed
point, because a step's inputs (who is active, how far each may verify, the batch's context) depend on what
earlier steps emitted. Compiled code needs no guess: it steps the block in order, so every step is exact and no
pass is repeated. It serves the arms :meth:`simlab.engine.decode.ArmPolicy.block_kernel` names: chain drafts
with drawn outcomes under ``fixed`` and ``threshold``, or under ``hardware_aware``, ``async_topk``, ``goodput``,
``oracle`` and ``adaptive`` (with or without a TPOT limit) on a cost model whose verify seconds compiled code
prices (:meth:`~simlab.hardware.base.CostModel.verify_kernel`: a table at every integer batch, or a
roofline). Each step runs its scheduler (:mod:`simlab.engine.block_steps`: the scheduler's own compiled walks on
that step alone), so the lengths are those of the vectorised policy bit for bit (tests/test_block_kernel.py).

This module is imported on a block's first call, never at the command line's start-up.
"""

from __future__ import annotations

import numpy as np

from simlab.common.jit import njit
from simlab.engine import block_steps as step
from simlab.hardware import cost_kernel
from simlab.hardware.cost_spec import table_spec
from simlab.schedulers.path import HEAD_CANDIDATES
from simlab.schedulers.registry import REGISTRY

# the registry's block codes of the policies stepped here
FIXED = REGISTRY["fixed"].block_code
HARDWARE_AWARE = REGISTRY["hardware_aware"].block_code
THRESHOLD = REGISTRY["threshold"].block_code
ASYNC_TOPK = REGISTRY["async_topk"].block_code
GOODPUT = REGISTRY["goodput"].block_code
ORACLE = REGISTRY["oracle"].block_code
ADAPTIVE = REGISTRY["adaptive"].block_code


@njit(cache=True)
def run_block(scheduler, gamma, max_batch_tokens, threshold, cumulative, slo_ms, lagged, stop_at_finish, remaining,
              context, join, held, conf, true_accepted, lagged_conf, lagged_known, prior_conf, draft,
              cost):
    """Step a roster through up to K = ``conf.shape[0]`` steps.

    Per request r (N rows): ``remaining`` tokens to emit, ``context`` KV tokens held, ``join`` its first decoding
    step, ``held`` steps of draws from its first (a step beyond them ends the block before it). ``conf`` [K, N, G]
    and ``true_accepted`` [K, N] are the draws of each request's decode step at each block step; a ``lagged``
    scheduler reads ``lagged_conf`` [K, N, G] where ``lagged_known`` [K, N], else ``prior_conf`` [G].
    ``draft`` prices the draft (goodput, adaptive; :func:`simlab.hardware.cost_kernel.planned_draft_s`);
    ``cost`` the cost model's verify spec (:mod:`simlab.hardware.cost_spec`);
    ``threshold`` and ``cumulative`` are the threshold scheduler's, ``slo_ms`` adaptive's TPOT limit (0: none).
    With ``stop_at_finish`` the block ends after the first step in which a request emits its last token. Returns
    lengths, accepted and emitted [K, N], active [K, N], the decode part's total context [K], the draft plan
    (draft length [K], requests drafting [K]; adaptive only) and the exact steps; rows from the exact steps on are
    zeros."""
    num_steps, num_rows = true_accepted.shape
    lengths = np.zeros((num_steps, num_rows), dtype=np.int64)
    accepted = np.zeros((num_steps, num_rows), dtype=np.int64)
    emitted = np.zeros((num_steps, num_rows), dtype=np.int64)
    active = np.zeros((num_steps, num_rows), dtype=np.bool_)
    total_context = np.zeros(num_steps, dtype=np.int64)
    before = np.zeros(num_rows, dtype=np.int64)
    row_len = np.zeros((1, num_rows), dtype=np.int64)
    a = np.zeros((1, num_rows, gamma))
    neg = np.zeros((1, num_rows * gamma))
    budget = np.zeros(1, dtype=np.int64)
    head = np.zeros((1, HEAD_CANDIDATES))
    source = np.zeros((num_rows, gamma))
    lagged_a = np.zeros((1, num_rows, gamma))
    plan_len = np.zeros(num_steps, dtype=np.int64)
    plan_num = np.zeros(num_steps, dtype=np.int64)
    for k in range(num_steps):
        anchors = 0
        step_context = 0
        undrawn = False
        for r in range(num_rows):
            left = remaining[r] - before[r]
            on = k >= join[r] and left > 0
            active[k, r] = on
            if on:
                anchors += 1
                step_context += context[r] + before[r]
                row_len[0, r] = min(left - 1, gamma)
                if min(k - join[r], remaining[r] - 1) >= held[r]:
                    undrawn = True
            else:
                row_len[0, r] = 0
        if undrawn:
            active[k] = False
            return lengths, accepted, emitted, active, total_context, plan_len, plan_num, k
        total_context[k] = step_context
        budget[0] = max(max_batch_tokens - anchors, 0)
        batch = max(anchors, 1)
        if scheduler == HARDWARE_AWARE:
            step_lengths = step.early_stop_step(conf[k], row_len, batch, float(step_context), budget, 0.0, 0, cost, a,
                                                neg, head)
        elif scheduler == FIXED:
            step_lengths = step.fixed_step(conf[k], row_len, budget, a, neg)
        elif scheduler == THRESHOLD:
            step_lengths = step.threshold_step(conf[k], row_len, budget, threshold, cumulative, a, neg)
        elif scheduler == ORACLE:
            step_lengths = step.oracle_step(true_accepted[k], row_len, batch, float(step_context), budget, cost, a,
                                            neg)
        else:  # async_topk, goodput, adaptive: they read (lagged) confidences
            if lagged:
                for r in range(num_rows):
                    for j in range(gamma):
                        source[r, j] = lagged_conf[k, r, j] if lagged_known[k, r] else prior_conf[j]
            else:
                source[:, :] = conf[k]
        if scheduler == ADAPTIVE and slo_ms > 0.0:
            step_lengths, plan_len[k], plan_num[k] = step.adaptive_slo_step(
                conf[k], source, row_len, batch, float(step_context), budget, draft, cost, a, neg,
                lagged_a, slo_ms)
        elif scheduler == ADAPTIVE:
            step_lengths, plan_len[k], plan_num[k] = step.adaptive_step(
                conf[k], source, row_len, batch, float(step_context), budget, draft, cost, a, neg,
                head, lagged_a)
        elif scheduler == ASYNC_TOPK or scheduler == GOODPUT:  # a budget from those, then the current top-K
            extra_s = 0.0
            if scheduler == GOODPUT:
                extra_s = cost_kernel.full_draft_s(draft, gamma, batch, float(step_context))
            most = step.best_budget_step(source, row_len, batch, float(step_context), extra_s, budget, cost, a,
                                         neg)
            step_lengths = step.top_k_step(conf[k], row_len, max(min(most, budget[0]), 0), a, neg, head)
        finished = False
        for r in range(num_rows):
            length = step_lengths[0, r]
            lengths[k, r] = length
            if active[k, r]:
                count = min(true_accepted[k, r], length)
                accepted[k, r] = count
                emitted[k, r] = count + 1
                before[r] += count + 1
                finished = finished or before[r] >= remaining[r]
        if finished and stop_at_finish:
            return lengths, accepted, emitted, active, total_context, plan_len, plan_num, k + 1
    return lengths, accepted, emitted, active, total_context, plan_len, plan_num, num_steps


def load() -> None:
    """Load the compiled block (from numba's cache; compiled there on its first use) by stepping a tiny roster
    with each scheduler, so that no arm's time includes it."""
    remaining = np.array([3, 1], dtype=np.int64)
    zeros = np.zeros(2, dtype=np.int64)
    conf = np.full((2, 2, 2), 0.5)
    true_accepted = np.ones((2, 2), dtype=np.int64)
    table = table_spec(np.linspace(0.0, 1.0, 8), 4, np.array([0.0, 1.0]))
    known = np.ones((2, 2), dtype=np.bool_)
    for code, slo_ms in ((FIXED, 0.0), (HARDWARE_AWARE, 0.0), (THRESHOLD, 0.0), (ASYNC_TOPK, 0.0), (GOODPUT, 0.0),
                         (ORACLE, 0.0), (ADAPTIVE, 0.0), (ADAPTIVE, 20.0)):
        for lagged in (False, True):
            run_block(code, 2, 3, 0.5, False, slo_ms, lagged, lagged, remaining, zeros, zeros, remaining, conf,
                      true_accepted, conf, known, conf[0, 0], (np.ones((3, 3)), np.zeros(0)), table)
