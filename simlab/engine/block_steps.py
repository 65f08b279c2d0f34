"""Each scheduler on one step of a compiled block (:mod:`simlab.engine.block_kernel`): the step's verify lengths
from its confidences, verify cost and token budget, computed by the scheduler's own compiled walks
(:mod:`simlab.schedulers.kernels`, :mod:`simlab.schedulers.plan_kernels`) on that step alone, so that they are the
vectorised policy's lengths bit for bit. The work arrays (``a`` [1, R, G] survival products, ``neg`` [1, R*G] the
negated path, ``head`` [1, H] its head) are the block's, reused from step to step.
"""

from __future__ import annotations

import numpy as np

from simlab.common.jit import njit
from simlab.hardware import cost_kernel
from simlab.schedulers import kernels, plan_kernels
from simlab.schedulers.path import HEAD_CANDIDATES, SHORT_PATH


@njit(cache=True)
def admitted_seconds(cost, batch, context_tokens, num):
    """[1, num] verify seconds after admitting K = 0..num-1 candidates (batch tokens ``batch`` + K; ``batch``
    requests decoding) from the cost model's spec ``cost`` (:mod:`simlab.hardware.cost_spec`)."""
    out = np.empty((1, num))
    cost_kernel.verify_run_s(cost, batch, out[0], context_tokens, batch)
    return out


@njit(cache=True)
def fill_products(conf_step, row_len, a, neg):
    """Fill a [1, R, G] with the running products of ``conf_step`` [R, G] and neg [1, R*G] with the path's
    candidates (:func:`fill_negated`), as simlab.schedulers.path.products and fill_negated."""
    num_rows, gamma = conf_step.shape
    for r in range(num_rows):
        product = 1.0
        for j in range(gamma):
            product = conf_step[r, j] if j == 0 else product * conf_step[r, j]
            a[0, r, j] = product
    fill_negated(a, row_len, neg)


@njit(cache=True)
def fill_negated(a, row_len, neg):
    """neg [1, R*G]: each candidate's -a where j < ``row_len``, +1 elsewhere (so that invalid ones sort last)."""
    num_rows, gamma = a.shape[1], a.shape[2]
    for r in range(num_rows):
        for j in range(gamma):
            neg[0, r * gamma + j] = -a[0, r, j] if j < row_len[0, r] else 1.0


@njit(cache=True)
def sorted_head(a, row_len, gamma, head):
    """Fill ``head`` [H] with the H smallest -a over the valid candidates of a [1, R, G], ascending (padded with
    +1, the invalid candidates' value): the first H entries of the sorted path. Equal values are equal numbers,
    so this is the full sort's head whatever the ties. A row's -a does not decrease along it, so a row is left at
    its first value that cannot enter."""
    size = head.size
    filled = 0
    for r in range(a.shape[1]):
        for j in range(kernels.valid_length(row_len, 0, r, gamma)):
            value = -a[0, r, j]
            if filled == size and value >= head[size - 1]:
                break
            i = filled if filled < size else size - 1
            while i > 0 and head[i - 1] > value:
                head[i] = head[i - 1]
                i -= 1
            head[i] = value
            if filled < size:
                filled += 1
    for i in range(filled, size):
        head[i] = 1.0


@njit(cache=True)
def early_stop_step(conf_step, row_len, batch, context_tokens, budget, extra_s, first, cost, a, neg, head):
    """Algorithm 1's lengths [1, R] of one step (simlab.schedulers.path.early_stop): admit candidates while
    Θ = (batch + Σ a) / (verify_s + ``extra_s``) strictly rises, the first ``first`` whatever it does. The walk
    reads the path's head first (``head`` [1, H], found without sorting) and sorts the whole path only when it
    walks past it."""
    num_rows, gamma = conf_step.shape
    fill_products(conf_step, row_len, a, neg)
    anchors = np.full(1, float(batch))
    extra = np.full(1, extra_s)
    start = np.full(1, first, dtype=np.int64)
    full = num_rows * gamma + 1
    if full > head.shape[1] + 1:
        sorted_head(a, row_len, gamma, head[0])
        seconds = admitted_seconds(cost, batch, context_tokens, head.shape[1] + 1)
        num_admitted, ended = kernels.early_stop(head, row_len, gamma, anchors, seconds, extra, budget, start)
        if ended[0]:
            return kernels.cut_lengths(a, row_len, head, num_admitted)
    neg[0] = np.sort(neg[0])
    width_s = full if full <= SHORT_PATH else HEAD_CANDIDATES + 1
    seconds = admitted_seconds(cost, batch, context_tokens, width_s)
    num_admitted, ended = kernels.early_stop(neg, row_len, gamma, anchors, seconds, extra, budget, start)
    if not ended[0]:
        seconds = admitted_seconds(cost, batch, context_tokens, full)
        num_admitted, _ = kernels.early_stop(neg, row_len, gamma, anchors, seconds, extra, budget, start)
    return kernels.cut_lengths(a, row_len, neg, num_admitted)


@njit(cache=True)
def all_draft_s(row_len, draft, gamma, batch, context_tokens):
    """[1, G + 1] the draft's seconds at each draft length d when every request that may verify drafts d
    (``draft``: :func:`simlab.hardware.cost_kernel.planned_draft_s`'s; ``batch`` requests decoding, holding
    ``context_tokens``)."""
    may_verify = 0
    for r in range(row_len.shape[1]):
        if row_len[0, r] > 0:
            may_verify += 1
    draft_all_s = np.zeros((1, gamma + 1))
    for d in range(1, gamma + 1):
        draft_all_s[0, d] = cost_kernel.planned_draft_s(draft, d, may_verify, batch, context_tokens)
    return draft_all_s


@njit(cache=True)
def fewer_drafting(drafting, draft, gamma, batch, context_tokens):
    """Per draft length d = 1..G: how many requests verify something at its lagged optimum ([G, 1]) and the
    draft's seconds when only they draft ([G, 1])."""
    fewer = np.zeros((gamma, 1), dtype=np.int64)
    draft_fewer = np.zeros((gamma, 1))
    for i in range(gamma):
        for r in range(drafting.shape[2]):
            fewer[i, 0] += drafting[0, i, r]
        draft_fewer[i, 0] = cost_kernel.planned_draft_s(draft, i + 1, fewer[i, 0], batch, context_tokens)
    return fewer, draft_fewer


@njit(cache=True)
def drafted_limits(best_len, best_set, row_len):
    """The plan's verify limits [1, R] (its draft length where a request drafts, else 0) and how many draft."""
    drafted = np.zeros((1, row_len.shape[1]), dtype=np.int64)
    num_drafting = 0
    for r in range(row_len.shape[1]):
        if best_set[0, r]:
            drafted[0, r] = min(row_len[0, r], best_len[0])
            num_drafting += 1
    return drafted, num_drafting


@njit(cache=True)
def adaptive_step(conf_step, source, row_len, batch, context_tokens, budget, draft, cost, a, neg,
                  head, lagged_a):
    """``adaptive`` without a TPOT limit (simlab.schedulers.adaptive: plan_draft, then verify) on one step:
    the draft plan from the lagged confidences ``source`` [R, G], then Algorithm 1 on what is drafted with the
    plan's draft cost. ``draft`` prices the draft (:func:`simlab.hardware.cost_kernel.planned_draft_s`).
    Returns the lengths [1, R], the draft length and the requests drafting."""
    num_rows, gamma = conf_step.shape
    if num_rows == 0:
        return np.zeros((1, 0), dtype=np.int64), 0, 0
    fill_products(source, row_len, lagged_a, neg)
    anchors = np.full(1, float(batch))
    verify = admitted_seconds(cost, batch, context_tokens, num_rows * gamma + 1)
    draft_all_s = all_draft_s(row_len, draft, gamma, batch, context_tokens)
    chosen_k, gained, drafting = plan_kernels.draft_plan(lagged_a, row_len, anchors, verify, draft_all_s, budget)
    fewer, draft_fewer = fewer_drafting(drafting, draft, gamma, batch, context_tokens)
    best_len, best_set, _, committed = plan_kernels.finish_plan(
        lagged_a, row_len, anchors, verify, budget, chosen_k, gained, np.zeros((1, gamma)), draft_all_s, drafting,
        fewer, draft_fewer, np.full(1, batch, dtype=np.int64), -1.0, False)
    drafted, num_drafting = drafted_limits(best_len, best_set, row_len)
    draft_len = best_len[0]
    draft_s = cost_kernel.planned_draft_s(draft, draft_len, num_drafting, batch, context_tokens)
    lengths = early_stop_step(conf_step, drafted, batch, context_tokens, budget, draft_s,
                              committed[0], cost, a, neg, head)
    return lengths, draft_len, num_drafting


@njit(cache=True)
def stable_order(a, row_len, neg):
    """[1, R*G] the path's candidate indices r * G + j in order (simlab.schedulers.path.path_order: a stable sort
    of the negated path; ``neg`` is overwritten)."""
    fill_negated(a, row_len, neg)
    order = np.empty((1, neg.shape[1]), dtype=np.int64)
    order[0] = np.argsort(neg[0], kind="mergesort")
    return order


@njit(cache=True)
def adaptive_slo_step(conf_step, source, row_len, batch, context_tokens, budget, draft, cost, a, neg,
                      lagged_a, slo_ms):
    """``adaptive`` with a TPOT limit on one step (simlab.schedulers.adaptive.plan_draft and verify with
    ``slo_tpot_ms``): the plan over draft lengths from one walk of the lagged path's order, the committed budget
    among the K within the limit, then Algorithm 1 with the limit on the current path. Returns the lengths
    [1, R], the draft length and the requests drafting."""
    num_rows, gamma = conf_step.shape
    if num_rows == 0:
        return np.zeros((1, 0), dtype=np.int64), 0, 0
    fill_products(source, row_len, lagged_a, neg)
    order = stable_order(lagged_a, row_len, neg)
    anchors = np.full(1, float(batch))
    batch_sizes = np.full(1, batch, dtype=np.int64)
    verify = admitted_seconds(cost, batch, context_tokens, num_rows * gamma + 1)
    draft_all_s = all_draft_s(row_len, draft, gamma, batch, context_tokens)
    chosen_k, gained, mean_recip, drafting = plan_kernels.draft_plan_slo(
        lagged_a, order, row_len, anchors, verify, draft_all_s, budget, batch_sizes, slo_ms)
    fewer, draft_fewer = fewer_drafting(drafting, draft, gamma, batch, context_tokens)
    best_len, best_set, best_draft, _ = plan_kernels.finish_plan(
        lagged_a, row_len, anchors, verify, budget, chosen_k, gained, mean_recip, draft_all_s, drafting, fewer,
        draft_fewer, batch_sizes, slo_ms, True)
    drafted, num_drafting = drafted_limits(best_len, best_set, row_len)
    draft_len = best_len[0]
    committed = 0
    if best_draft[0] > 0.0:  # the budget the draft was paid for, among the K within the limit
        plan_order = stable_order(lagged_a, drafted, neg)
        committed = kernels.best_budget_slo(lagged_a, drafted, plan_order, anchors, verify, best_draft, budget,
                                            batch_sizes, slo_ms)[0]
    # Algorithm 1 with the limit on the current path, started at the committed budget
    fill_products(conf_step, drafted, a, neg)
    current_order = stable_order(a, drafted, neg)
    extra = np.full(1, cost_kernel.planned_draft_s(draft, draft_len, num_drafting, batch, context_tokens))
    num_admitted, _ = kernels.early_stop_slo(a, drafted, current_order, anchors, verify, extra, budget,
                                             np.full(1, committed, dtype=np.int64), batch_sizes, slo_ms)
    neg[0] = np.sort(neg[0])  # stable_order left the current path's negated values there
    return kernels.cut_lengths(a, drafted, neg, num_admitted), draft_len, num_drafting


@njit(cache=True)
def fixed_step(conf_step, row_len, budget, a, neg):
    """Every allowed position, trimmed to the token budget by survival (simlab.schedulers.policies.fixed)."""
    if kernels.num_valid(row_len, 0, conf_step.shape[1]) <= budget[0]:
        return row_len.copy()
    fill_products(conf_step, row_len, a, neg)
    neg[0] = np.sort(neg[0])
    admitted = np.full(1, max(budget[0], 0), dtype=np.int64)
    return kernels.cut_lengths(a, row_len, neg, admitted)


@njit(cache=True)
def threshold_step(conf_step, row_len, budget, threshold, cumulative, a, neg):
    """Each request up to its first position whose confidence (``cumulative``: survival) is below ``threshold``,
    trimmed to the token budget by survival (simlab.schedulers.policies.threshold)."""
    num_rows, gamma = conf_step.shape
    fill_products(conf_step, row_len, a, neg)
    lengths = np.zeros((1, num_rows), dtype=np.int64)
    total = 0
    for r in range(num_rows):
        count = 0
        for j in range(kernels.valid_length(row_len, 0, r, gamma)):
            score = a[0, r, j] if cumulative else conf_step[r, j]
            if not score >= threshold:
                break
            count += 1
        lengths[0, r] = count
        total += count
    if total <= budget[0]:
        return lengths
    fill_negated(a, lengths, neg)  # the trimmed path's candidates: each request's lengths, as clip_to_budget
    neg[0] = np.sort(neg[0])
    return kernels.cut_lengths(a, lengths, neg, np.full(1, max(budget[0], 0), dtype=np.int64))


@njit(cache=True)
def best_budget_step(conf_src, row_len, batch, context_tokens, extra_s, budget, cost, a, neg):
    """The budget K maximising (batch + Σ a) / (verify_s + ``extra_s``) along the path of ``conf_src``
    (simlab.schedulers.path.best_budget: global argmax, first maximum)."""
    gamma = conf_src.shape[1]
    fill_products(conf_src, row_len, a, neg)
    neg[0] = np.sort(neg[0])
    seconds = admitted_seconds(cost, batch, context_tokens,
                               kernels.walk_limit(row_len, 0, gamma, budget) + 1)
    out = kernels.best_budget(neg, row_len, gamma, np.full(1, float(batch)), seconds, np.full(1, extra_s), budget,
                              False)
    return out[0]


@njit(cache=True)
def top_k_step(conf_step, row_len, admitted, a, neg, head):
    """The first ``admitted`` candidates of the current path (simlab.schedulers.path.top_k): only the
    admitted-th value is read, found from the head when it is within it."""
    gamma = conf_step.shape[1]
    fill_products(conf_step, row_len, a, neg)
    path = neg
    if 0 < admitted < kernels.num_valid(row_len, 0, gamma):
        if admitted <= head.shape[1]:
            sorted_head(a, row_len, gamma, head[0])
            path = head
        else:
            neg[0] = np.sort(neg[0])
    return kernels.cut_lengths(a, row_len, path, np.full(1, admitted, dtype=np.int64))


@njit(cache=True)
def oracle_step(true_accepted_step, row_len, batch, context_tokens, budget, cost, a, neg):
    """Only the positions the target accepts, the count maximising (batch + K) / verify_s
    (simlab.schedulers.policies.oracle: every accepted candidate worth one, valued position-major)."""
    num_rows = row_len.shape[1]
    gamma = a.shape[2]
    will_accept = np.zeros((1, num_rows), dtype=np.int64)
    for r in range(num_rows):
        will_accept[0, r] = min(true_accepted_step[r], row_len[0, r])
        for j in range(gamma):
            a[0, r, j] = 1.0 - j / (gamma + 1.0)
    fill_negated(a, will_accept, neg)
    neg[0] = np.sort(neg[0])
    seconds = admitted_seconds(cost, batch, context_tokens,
                               kernels.walk_limit(will_accept, 0, gamma, budget) + 1)
    admitted = kernels.best_budget(neg, will_accept, gamma, np.full(1, float(batch)), seconds, np.zeros(1), budget,
                                   True)
    return kernels.cut_lengths(a, will_accept, neg, admitted)
