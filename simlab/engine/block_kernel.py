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
def run_block(scheduler, gamma, max_batch_tokens, threshold, cumulative, slo_ms, lagged, stop_at_finish, num_steps,
              remaining, context, join, steps, base, end, start, lag_steps, store_conf, store_accepted, store_proposed,
              prior_conf, draft, cost, price_cost, priced, plans_draft, verified_by_length, max_concurrency,
              max_drafting):
    """Step a roster through up to K = ``num_steps`` steps.

    Per request r (N rows): ``remaining`` tokens to emit, ``context`` KV tokens held, ``join`` its first decoding
    step, ``steps`` its decode steps done before the block. Its draws are the draw store's rows (``store_conf``
    [M, G], ``store_accepted`` [M] and ``store_proposed`` [M]: the positions the step's draft proposes, at most gamma,
    :class:`simlab.engine.drawstore.DrawStore`): decode step s is row
    ``base + min(s, end - 1)``, ``end`` the step after its last held (a step beyond them ends the block before
    it). A ``lagged`` scheduler reads the confidences ``lag_steps`` decode steps earlier (from step ``start``
    on, the first held; before a request's step 0, ``prior_conf`` [G]).
    ``draft`` prices the draft (goodput, adaptive; :func:`simlab.hardware.cost_kernel.planned_draft_s`);
    ``cost`` the cost model's verify spec (:mod:`simlab.hardware.cost_spec`);
    ``threshold`` and ``cumulative`` are the threshold scheduler's, ``slo_ms`` adaptive's TPOT limit (0: none).
    With ``stop_at_finish`` the block ends after the first step in which a request emits its last token. With
    ``priced`` each step's decode part is priced as the engine prices it: verify seconds from ``price_cost`` (the
    verify spec steps are timed on, which the scheduler may read another view of) and draft seconds from
    ``draft`` (the plan's when ``plans_draft``). A
    request that may verify ℓ positions verifies ``verified_by_length[ℓ]`` draft tokens (ℓ; a tree's nodes). A step
    where more than ``max_concurrency`` (> 0) requests decode drafts and verifies nothing, and only the first
    ``max_drafting`` (> 0) requests decoding draft (never with ``adaptive``); with ``plans_draft`` the
    plan of every step is recorded (a scheduler that plans its draft, or a gamma draft by every request where on).
    Returns lengths, accepted and emitted [K, N], active [K, N], the decode part's total context [K], the draft
    plan (draft length [K], requests drafting [K]; adaptive only), the exact steps, the verify and draft seconds
    [K] (zeros unless ``priced``), per step the requests decoding, the positions verified and those accepted [K],
    and per request the step at whose end it emits its last token [N] (K if not in the block); rows from the
    exact steps on are zeros."""
    num_rows = remaining.shape[0]
    conf = np.zeros((num_rows, gamma))  # step k's draws of every row
    true_accepted = np.zeros(num_rows, dtype=np.int64)
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
    verify_s = np.zeros(num_steps)
    draft_s = np.zeros(num_steps)
    num_active = np.zeros(num_steps, dtype=np.int64)
    num_verified = np.zeros(num_steps, dtype=np.int64)
    num_accepted = np.zeros(num_steps, dtype=np.int64)
    finish = np.full(num_rows, num_steps, dtype=np.int64)
    exact = num_steps
    for k in range(num_steps):
        anchors = 0
        step_context = 0
        undrawn = False
        for r in range(num_rows):
            # the request's own decode step (its draws' key); rows past its last possible step repeat that one
            own = min(max(steps[r] + k - join[r], steps[r]), steps[r] + remaining[r] - 1)
            row = base[r] + min(own, end[r] - 1)
            for j in range(gamma):
                conf[r, j] = store_conf[row, j]
            true_accepted[r] = store_accepted[row]
            proposed = store_proposed[row]
            if lagged:
                earlier = own - lag_steps
                if earlier >= 0:
                    row = base[r] + min(max(earlier, start[r]), end[r] - 1)
                    for j in range(gamma):
                        source[r, j] = store_conf[row, j]
                else:
                    for j in range(gamma):
                        source[r, j] = prior_conf[j]
            left = remaining[r] - before[r]
            on = k >= join[r] and left > 0
            active[k, r] = on
            if on:
                anchors += 1
                step_context += context[r] + before[r]
                row_len[0, r] = min(left - 1, gamma, proposed)
                if max_drafting > 0 and anchors > max_drafting:  # only the first max_drafting requests draft
                    row_len[0, r] = 0
                if own >= end[r]:  # past the draws it holds
                    undrawn = True
            else:
                row_len[0, r] = 0
        if undrawn:
            active[k] = False
            exact = k
            break
        total_context[k] = step_context
        speculating = max_concurrency == 0 or anchors <= max_concurrency
        if not speculating:
            for r in range(num_rows):
                row_len[0, r] = 0
        budget[0] = max(max_batch_tokens - anchors, 0)
        batch = max(anchors, 1)
        if scheduler == HARDWARE_AWARE:
            step_lengths = step.early_stop_step(conf, row_len, batch, float(step_context), budget, 0.0, 0, cost, a,
                                                neg, head)
        elif scheduler == FIXED:
            step_lengths = step.fixed_step(conf, row_len, budget, a, neg)
        elif scheduler == THRESHOLD:
            step_lengths = step.threshold_step(conf, row_len, budget, threshold, cumulative, a, neg)
        elif scheduler == ORACLE:
            step_lengths = step.oracle_step(true_accepted, row_len, batch, float(step_context), budget, cost, a,
                                            neg)
        else:  # async_topk, goodput, adaptive: they read (lagged) confidences
            if not lagged:
                source[:, :] = conf
        if scheduler == ADAPTIVE and slo_ms > 0.0:
            step_lengths, plan_len[k], plan_num[k] = step.adaptive_slo_step(
                conf, source, row_len, batch, float(step_context), budget, draft, cost, a, neg,
                lagged_a, slo_ms)
        elif scheduler == ADAPTIVE:
            step_lengths, plan_len[k], plan_num[k] = step.adaptive_step(
                conf, source, row_len, batch, float(step_context), budget, draft, cost, a, neg,
                head, lagged_a)
        elif scheduler == ASYNC_TOPK or scheduler == GOODPUT:  # a budget from those, then the current top-K
            extra_s = 0.0
            if scheduler == GOODPUT:
                extra_s = cost_kernel.full_draft_s(draft, gamma, batch, float(step_context))
            most = step.best_budget_step(source, row_len, batch, float(step_context), extra_s, budget, cost, a,
                                         neg)
            step_lengths = step.top_k_step(conf, row_len, max(min(most, budget[0]), 0), a, neg, head)
        if max_concurrency > 0 or max_drafting > 0:
            if not speculating:
                plan_len[k] = 0
                plan_num[k] = 0
            elif scheduler != ADAPTIVE:
                plan_len[k] = gamma if anchors > 0 else 0
                plan_num[k] = min(anchors, max_drafting) if max_drafting > 0 else anchors
        finished = False
        verified = 0
        step_accepted = 0
        for r in range(num_rows):
            length = step_lengths[0, r]
            lengths[k, r] = length
            verified += verified_by_length[length]
            if active[k, r]:
                count = min(true_accepted[r], length)
                accepted[k, r] = count
                step_accepted += count
                emitted[k, r] = count + 1
                before[r] += count + 1
                if before[r] >= remaining[r]:
                    finished = True
                    finish[r] = k
        num_active[k] = anchors
        num_verified[k] = verified
        num_accepted[k] = step_accepted
        if priced and anchors > 0:
            verify_s[k] = cost_kernel.verify_s(price_cost, anchors + verified, float(step_context), batch)
            if plans_draft:
                draft_s[k] = cost_kernel.planned_draft_s(draft, plan_len[k], plan_num[k], anchors,
                                                         float(step_context))
            else:
                draft_s[k] = cost_kernel.full_draft_s(draft, gamma, anchors, float(step_context))
        if finished and stop_at_finish:
            exact = k + 1
            break
    totals = (num_active, num_verified, num_accepted, finish)
    return lengths, accepted, emitted, active, total_context, plan_len, plan_num, exact, verify_s, draft_s, totals


def load() -> None:
    """Load the compiled block (from numba's cache; compiled there on its first use) by stepping a tiny roster
    with each scheduler, so that no arm's time includes it."""
    remaining = np.array([3, 1], dtype=np.int64)
    zeros = np.zeros(2, dtype=np.int64)
    end = np.array([3, 1], dtype=np.int64)
    conf = np.full((4, 2), 0.5)
    true_accepted = np.ones(4, dtype=np.int64)
    proposed = np.full(4, 2, dtype=np.int64)
    table = table_spec(np.linspace(0.0, 1.0, 8), 4, np.array([0.0, 1.0]))
    for code, slo_ms in ((FIXED, 0.0), (HARDWARE_AWARE, 0.0), (THRESHOLD, 0.0), (ASYNC_TOPK, 0.0), (GOODPUT, 0.0),
                         (ORACLE, 0.0), (ADAPTIVE, 0.0), (ADAPTIVE, 20.0)):
        for lagged in (False, True):
            run_block(code, 2, 3, 0.5, False, slo_ms, lagged, lagged, 2, remaining, zeros, zeros, zeros, zeros, end,
                      zeros, 1, conf, true_accepted, proposed, conf[0], (np.ones((3, 3)), np.zeros(0)), table, table,
                      lagged, code == ADAPTIVE, np.arange(3), 0, 0)
