"""The adaptive scheduler's draft plan, compiled (numba): every draft length's best verify budget in one walk per
step, then the plan's choice (docs/schedulers.md, ``adaptive``). Built on the path walks of
:mod:`simlab.schedulers.kernels` (its docstring says how paths are read); tested bit for bit against the numpy
reference in tests/reference/schedulers/adaptive.py.
"""

from __future__ import annotations

import numpy as np

from simlab.common.jit import njit
from simlab.schedulers.kernels import best_prefix, reciprocal_deltas, valid_length

SMALL_SORT = 48  # columns of at most this many candidates are sorted by insertion


@njit(cache=True)
def draft_plan(a, row_len, anchors, seconds, draft_all_s, budget):
    """For every draft length d = 1..G (index d - 1): the best verify budget K_d of the path of positions j < d,
    with the cost ``seconds[K] + draft_all_s[s, d]`` (:func:`simlab.schedulers.kernels.best_budget`'s rule);
    the path's gain at K_d; and which requests verify anything at K_d (their first candidate is among the first
    K_d). Path d is path d - 1 merged with the candidates at position d - 1, so each step sorts only its columns."""
    steps, num_rows = row_len.shape
    gamma = a.shape[2]
    best_k = np.zeros((steps, gamma), dtype=np.int64)
    gain = np.zeros((steps, gamma))
    drafting = np.zeros((steps, gamma, num_rows), dtype=np.bool_)
    path = np.empty(num_rows * gamma)  # path d's values, descending
    merged = np.empty(num_rows * gamma)
    column = np.empty(num_rows)
    for s in range(steps):
        size = 0
        for i in range(gamma):
            d = i + 1
            count = 0
            for r in range(num_rows):
                if valid_length(row_len, s, r, gamma) > i:
                    column[count] = a[s, r, i]
                    count += 1
            if count <= SMALL_SORT:  # insertion sort in place: no allocation for the usual small columns
                for x in range(1, count):
                    value = column[x]
                    y = x - 1
                    while y >= 0 and column[y] > value:
                        column[y + 1] = column[y]
                        y -= 1
                    column[y + 1] = value
                added = column
            else:
                added = np.sort(column[:count])  # ascending: read from its end
            x, y, z = 0, count - 1, 0
            while x < size or y >= 0:
                if y < 0 or (x < size and path[x] >= added[y]):
                    merged[z] = path[x]
                    x += 1
                else:
                    merged[z] = added[y]
                    y -= 1
                z += 1
            path, merged = merged, path
            size = z
            k, gain[s, i] = best_prefix(path, 1.0, min(size, max(budget[s], 0)), anchors[s], seconds[s],
                                         draft_all_s[s, d], False)
            best_k[s, i] = k
            if k == 0:
                continue
            if k >= size:
                for r in range(num_rows):
                    drafting[s, i, r] = valid_length(row_len, s, r, gamma) > 0
                continue
            # a request verifies something when its first candidate is among the first k of path d
            cut = path[k - 1]
            above = 0
            for x in range(k):
                if path[x] > cut:
                    above += 1
            room = k - above
            for r in range(num_rows):
                length = min(valid_length(row_len, s, r, gamma), d)
                if length == 0:
                    continue
                head = a[s, r, 0]
                drafting[s, i, r] = head > cut or (head == cut and room > 0)
                for j in range(length):
                    if a[s, r, j] == cut and room > 0:
                        room -= 1
    return best_k, gain, drafting


@njit(cache=True)
def draft_plan_slo(a, order, row_len, anchors, seconds, draft_all_s, budget, batch, slo_ms):
    """:func:`draft_plan` with a TPOT limit (:func:`simlab.schedulers.kernels.best_budget_slo`'s rule), walking the
    full path's ``order`` once for every d (the path of positions j < d is the full path with the others left out).
    Also returns the batch's mean reciprocal tokens at each K_d."""
    steps, num_rows = row_len.shape
    gamma = a.shape[2]
    width = order.shape[1]
    deltas = reciprocal_deltas(a, row_len)
    chosen_k = np.zeros((steps, gamma), dtype=np.int64)
    chosen_gain = np.zeros((steps, gamma))
    chosen_reciprocal = np.zeros((steps, gamma))
    rank0 = np.full((gamma, num_rows), np.iinfo(np.int64).max, dtype=np.int64)
    drafting = np.zeros((steps, gamma, num_rows), dtype=np.bool_)
    count = np.zeros(gamma, dtype=np.int64)
    limit = np.zeros(gamma, dtype=np.int64)
    total = np.zeros(gamma)
    reciprocal = np.zeros(gamma)
    best, best_k, best_gain, best_reciprocal = np.zeros(gamma), np.zeros(gamma, np.int64), np.zeros(gamma), \
        np.zeros(gamma)
    fast, fast_k, fast_gain, fast_reciprocal = np.zeros(gamma), np.zeros(gamma, np.int64), np.zeros(gamma), \
        np.zeros(gamma)
    for s in range(steps):
        requests = float(batch[s])
        per_request = float(max(batch[s], 1))
        mean0 = (requests + 0.0) / per_request
        rank0[:, :] = np.iinfo(np.int64).max
        for i in range(gamma):
            d = i + 1
            valid = 0
            for r in range(num_rows):
                valid += min(valid_length(row_len, s, r, gamma), d)
            limit[i] = min(valid, max(budget[s], 0))
            count[i] = 0
            total[i] = 0.0
            reciprocal[i] = 0.0
            step_s = seconds[s, 0] + draft_all_s[s, d]
            tpot = step_s * mean0 * 1e3
            best[i] = anchors[s] / step_s if tpot <= slo_ms else -np.inf
            best_k[i], best_gain[i], best_reciprocal[i] = 0, anchors[s], mean0
            fast[i], fast_k[i], fast_gain[i], fast_reciprocal[i] = tpot, 0, anchors[s], mean0
        for position in range(width):
            r, j = order[s, position] // gamma, order[s, position] % gamma
            if j >= valid_length(row_len, s, r, gamma):
                break  # invalid candidates come last
            value = a[s, r, j]
            for i in range(j, gamma):
                d = i + 1
                if j == 0:
                    rank0[i, r] = count[i]
                k = count[i] + 1
                count[i] = k
                if k > limit[i]:
                    continue
                total[i] = value if k == 1 else total[i] + value
                reciprocal[i] = deltas[s, r, j] if k == 1 else reciprocal[i] + deltas[s, r, j]
                step_s = seconds[s, k] + draft_all_s[s, d]
                gained = total[i] + anchors[s]
                objective = gained / step_s
                mean = (requests + reciprocal[i]) / per_request
                tpot = step_s * mean * 1e3
                if tpot < fast[i]:
                    fast[i], fast_k[i], fast_gain[i], fast_reciprocal[i] = tpot, k, gained, mean
                if tpot <= slo_ms and objective > best[i]:
                    best[i], best_k[i], best_gain[i], best_reciprocal[i] = objective, k, gained, mean
        for i in range(gamma):
            if best[i] == -np.inf:  # nothing within the SLO: the lowest TPOT
                chosen_k[s, i], chosen_gain[s, i], chosen_reciprocal[s, i] = fast_k[i], fast_gain[i], \
                    fast_reciprocal[i]
            else:
                chosen_k[s, i], chosen_gain[s, i], chosen_reciprocal[s, i] = best_k[i], best_gain[i], \
                    best_reciprocal[i]
            for r in range(num_rows):
                drafting[s, i, r] = rank0[i, r] < chosen_k[s, i]
    return chosen_k, chosen_gain, chosen_reciprocal, drafting


@njit(cache=True)
def finish_plan(a, row_len, anchors, seconds, budget, chosen_k, gained, mean_recip, draft_all_s, drafting, fewer,
                draft_fewer, batch, slo_ms, with_slo):
    """The adaptive plan from each draft length's lagged optimum (:func:`draft_plan`): per d, draft only the
    ``fewer`` [G, S] requests that verify something there (``drafting``) when that is cheaper (``draft_fewer``
    [G, S] < ``draft_all_s[s, d]``, the draft of every request that may verify);
    price each plan (expected tokens per second, expected TPOT) and pick the best: one within the SLO beats one
    that is not; among those within, the higher objective; among those not, the lower TPOT; ties go to the longer
    draft; only plans in which someone drafts count beside d = 0 (plain decoding at ``seconds[s, 0]``).

    Returns the draft length [S], who drafts [S, R], the draft's seconds [S] and, without an SLO, the verify budget
    the draft was paid for [S] (:func:`best_budget` over the lagged path of what is drafted; 0 where the draft is
    free; with an SLO the caller computes it)."""
    steps, num_rows = row_len.shape
    gamma = a.shape[2]
    best_len = np.zeros(steps, dtype=np.int64)
    best_set = np.zeros((steps, num_rows), dtype=np.bool_)
    best_draft = np.zeros(steps)
    committed = np.zeros(steps, dtype=np.int64)
    objective = np.empty(gamma + 1)
    tpot = np.empty(gamma + 1)
    within = np.empty(gamma + 1, dtype=np.bool_)
    eligible = np.empty(gamma + 1, dtype=np.bool_)
    use_fewer = np.empty(gamma + 1, dtype=np.bool_)
    cost = np.empty(gamma + 1)
    values = np.empty(num_rows * gamma)
    for s in range(steps):
        plain_s = seconds[s, 0]
        objective[0] = batch[s] / plain_s
        tpot[0] = plain_s * 1e3
        within[0] = (not with_slo) or tpot[0] <= slo_ms
        eligible[0] = True
        num_may = 0  # requests that may verify: they all draft unless fewer is cheaper
        for r in range(num_rows):
            if valid_length(row_len, s, r, gamma) > 0:
                num_may += 1
        for d in range(1, gamma + 1):
            i = d - 1
            use_fewer[d] = draft_fewer[i, s] < draft_all_s[s, d]
            cost[d] = draft_fewer[i, s] if use_fewer[d] else draft_all_s[s, d]
            step_s = seconds[s, chosen_k[s, i]] + cost[d]
            factor = mean_recip[s, i] if with_slo else batch[s] / gained[s, i]
            objective[d] = gained[s, i] / step_s
            tpot[d] = step_s * factor * 1e3
            within[d] = (not with_slo) or tpot[d] <= slo_ms
            eligible[d] = fewer[i, s] > 0 if use_fewer[d] else num_may > 0
        best = 0
        for d in range(1, gamma + 1):
            if not eligible[d]:
                continue
            if within[d] == within[best]:
                better = objective[d] >= objective[best] if within[d] else tpot[d] <= tpot[best]
            else:
                better = within[d]
            if better:
                best = d
        best_len[s] = best
        if best == 0:
            continue
        best_draft[s] = cost[best]
        for r in range(num_rows):
            best_set[s, r] = drafting[s, best - 1, r] if use_fewer[best] else valid_length(row_len, s, r, gamma) > 0
        if with_slo or not best_draft[s] > 0.0:
            continue
        # the budget the draft was paid for: the best K of the lagged path over what is drafted
        count = 0
        for r in range(num_rows):
            if best_set[s, r]:
                for j in range(min(valid_length(row_len, s, r, gamma), best)):
                    values[count] = a[s, r, j]
                    count += 1
        if count <= SMALL_SORT:  # descending insertion sort in place: no allocation for the usual small paths
            for x in range(1, count):
                value = values[x]
                y = x - 1
                while y >= 0 and values[y] < value:
                    values[y + 1] = values[y]
                    y -= 1
                values[y + 1] = value
            ordered = values
        else:
            ordered = np.sort(values[:count])[::-1]
        committed[s], _ = best_prefix(ordered, 1.0, min(count, max(budget[s], 0)), anchors[s], seconds[s],
                                       best_draft[s], False)
    return best_len, best_set, best_draft, committed
