"""Compiled walks along the survival-sorted candidate path (numba), shared by every load-aware scheduler.

A step's candidates are the (request r, position j) pairs worth a[r, j], non-increasing in j along each row. The
path takes them in descending a, ties in (request, position) order. A walk reads the path's values from ``neg``
[S, n]: each step's ``-a`` sorted ascending (numpy's vectorised sort; invalid candidates are +1 and sort last),
so the k-th candidate is worth ``-neg[s, k]``. Equal values are equal numbers, so the running sums along ``neg``
are those along the path, and the first K candidates are found without their order: every candidate above the
K-th value and, among those equal to it, the first in (request, position) order (:func:`cut_lengths`). Walks that
sum something other than the values (the expected-TPOT terms of an SLO) read the path's order itself, ``order``
[S, n] (a stable argsort). Every sum runs in the path's order, as the numpy reference in
tests/reference/schedulers/ does, so the results are the same bit for bit.

Other arrays: ``a`` [S, R, G] the values (row r's first ``row_len[s, r]`` entries are valid), ``seconds`` [S, W]
the verify seconds after admitting K = 0..W-1 candidates, ``extra_s`` [S] seconds added to every K (the draft),
``anchors`` [S] the requests in each step's batch (the gain starts there), ``budget`` [S] the most candidates a
step may admit (the walks also stop at its valid ones). ``row_len`` may be the raw ``max_len``: walks clip it to
0..G.

numba compiles these on first use and caches the machine code in the user's cache folder (``NUMBA_CACHE_DIR``,
by default ``$XDG_CACHE_HOME/simlab/numba`` or ``~/.cache/simlab/numba``), so only the first run after an
install pays the compilation. This module is imported only when a scheduler first runs: the command line's
start-up never loads numba.
"""

from __future__ import annotations

import numpy as np

from simlab.common.jit import njit


@njit(cache=True, inline="always")
def _length(row_len, s, r, gamma) -> int:
    """Row r's valid candidates: its limit clipped to 0..G (callers pass the raw ``max_len``)."""
    return min(max(row_len[s, r], 0), gamma)


@njit(cache=True)
def _limit(row_len, s, gamma, budget) -> int:
    """How far along step s's path a walk may go: its valid candidates, within the token budget."""
    valid = 0
    for r in range(row_len.shape[1]):
        valid += min(max(row_len[s, r], 0), gamma)
    return min(valid, max(budget[s], 0))


# ----------------------------------------------------------------------------------------- which candidates
@njit(cache=True)
def cut_lengths(a, row_len, neg, num_admitted):
    """Verify lengths [S, R] when the first ``num_admitted[s]`` candidates of each step's path are admitted."""
    steps, num_rows = row_len.shape
    gamma = a.shape[2]
    lengths = np.zeros((steps, num_rows), dtype=np.int64)
    for s in range(steps):
        valid = 0
        for r in range(num_rows):
            valid += _length(row_len, s, r, gamma)
        k = num_admitted[s]
        if k <= 0:
            continue
        if k >= valid:
            for r in range(num_rows):
                lengths[s, r] = _length(row_len, s, r, gamma)
            continue
        cut = -neg[s, k - 1]
        above = 0
        for r in range(num_rows):
            for j in range(_length(row_len, s, r, gamma)):
                if a[s, r, j] > cut:
                    above += 1
        room = k - above  # of the candidates equal to the cut, the first `room` in (request, position) order
        for r in range(num_rows):
            count = 0
            for j in range(_length(row_len, s, r, gamma)):
                value = a[s, r, j]
                if value > cut:
                    count += 1
                elif value == cut and room > 0:
                    count += 1
                    room -= 1
            lengths[s, r] = count
    return lengths


# ----------------------------------------------------------------------------------------- how many
@njit(cache=True)
def early_stop(neg, row_len, gamma, anchors, seconds, extra_s, budget, start):
    """Algorithm 1's walk: admit candidates while Θ = (anchors + Σ a) / (seconds[K] + extra_s) strictly rises;
    the first ``min(start, limit)`` are admitted whatever Θ does. Returns K [S] and whether each walk ended within
    the ``seconds`` given (False: it needs more columns; that step's K is meaningless)."""
    steps, width = seconds.shape
    out = np.zeros(steps, dtype=np.int64)
    ended = np.ones(steps, dtype=np.bool_)
    for s in range(steps):
        most = _limit(row_len, s, gamma, budget)
        first = min(start[s], most)
        theta = anchors[s] / (seconds[s, 0] + extra_s[s])
        total = 0.0
        k = 0
        while k < most:
            if k + 1 >= width:
                ended[s] = False
                break
            value = -neg[s, k]
            next_total = value if k == 0 else total + value
            next_theta = (next_total + anchors[s]) / (seconds[s, k + 1] + extra_s[s])
            if next_theta <= theta and k >= first:
                break
            total, theta = next_total, next_theta
            k += 1
        out[s] = k
    return out, ended


@njit(cache=True)
def best_budget(neg, row_len, gamma, anchors, seconds, extra_s, budget, count_gain):
    """Per step, the K in [0, limit] with the most expected tokens per second, (anchors + Σ a) / (seconds[K] +
    extra_s); with ``count_gain`` every candidate is worth one token (anchors + K). The first maximum wins."""
    steps = seconds.shape[0]
    out = np.zeros(steps, dtype=np.int64)
    for s in range(steps):
        best = anchors[s] / (seconds[s, 0] + extra_s[s])
        total = 0.0
        for k in range(1, _limit(row_len, s, gamma, budget) + 1):
            value = -neg[s, k - 1]
            total = value if k == 1 else total + value
            gain = anchors[s] + k if count_gain else total + anchors[s]
            objective = gain / (seconds[s, k] + extra_s[s])
            if objective > best:
                best, out[s] = objective, k
    return out


# ----------------------------------------------------------------------------------------- with a TPOT limit
@njit(cache=True)
def reciprocal_deltas(a, row_len):
    """[S, R, G]: how a request's 1 / (1 + expected accepted tokens) changes when (r, j) is admitted."""
    steps, num_rows = row_len.shape
    gamma = a.shape[2]
    out = np.zeros(a.shape)
    for s in range(steps):
        for r in range(num_rows):
            cumulative = 0.0
            for j in range(_length(row_len, s, r, gamma)):
                value = a[s, r, j]
                cumulative = value if j == 0 else cumulative + value
                t = 1.0 + cumulative
                out[s, r, j] = 1.0 / t - 1.0 / (t - value)
    return out


@njit(cache=True)
def early_stop_slo(a, row_len, order, anchors, seconds, extra_s, budget, start, batch, slo_ms):
    """:func:`early_stop` where a candidate that takes the batch's expected TPOT over ``slo_ms`` also stops the
    walk (the TPOT's terms are summed in the path's ``order``)."""
    steps, width = seconds.shape
    gamma = a.shape[2]
    deltas = reciprocal_deltas(a, row_len)
    out = np.zeros(steps, dtype=np.int64)
    ended = np.ones(steps, dtype=np.bool_)
    for s in range(steps):
        most = _limit(row_len, s, gamma, budget)
        first = min(start[s], most)
        requests = float(batch[s])
        per_request = float(max(batch[s], 1))
        theta = anchors[s] / (seconds[s, 0] + extra_s[s])
        total = 0.0
        reciprocal = 0.0
        k = 0
        while k < most:
            if k + 1 >= width:
                ended[s] = False
                break
            r, j = order[s, k] // gamma, order[s, k] % gamma
            value = a[s, r, j]
            step_s = seconds[s, k + 1] + extra_s[s]
            next_total = value if k == 0 else total + value
            next_theta = (next_total + anchors[s]) / step_s
            next_reciprocal = deltas[s, r, j] if k == 0 else reciprocal + deltas[s, r, j]
            falls = next_theta <= theta or step_s * ((requests + next_reciprocal) / per_request) * 1e3 > slo_ms
            if falls and k >= first:
                break
            total, theta, reciprocal = next_total, next_theta, next_reciprocal
            k += 1
        out[s] = k
    return out, ended


@njit(cache=True)
def best_budget_slo(a, row_len, order, anchors, seconds, extra_s, budget, batch, slo_ms):
    """:func:`best_budget` among the K whose expected TPOT is within ``slo_ms``, or the K of the lowest TPOT when
    none is (first maximum, first minimum)."""
    steps = seconds.shape[0]
    gamma = a.shape[2]
    deltas = reciprocal_deltas(a, row_len)
    out = np.zeros(steps, dtype=np.int64)
    for s in range(steps):
        requests = float(batch[s])
        per_request = float(max(batch[s], 1))
        step_s = seconds[s, 0] + extra_s[s]
        tpot = step_s * ((requests + 0.0) / per_request) * 1e3
        best = anchors[s] / step_s if tpot <= slo_ms else -np.inf
        best_k, fastest, fastest_k = 0, tpot, 0
        total = 0.0
        reciprocal = 0.0
        for k in range(1, _limit(row_len, s, gamma, budget) + 1):
            r, j = order[s, k - 1] // gamma, order[s, k - 1] % gamma
            value = a[s, r, j]
            total = value if k == 1 else total + value
            reciprocal = deltas[s, r, j] if k == 1 else reciprocal + deltas[s, r, j]
            step_s = seconds[s, k] + extra_s[s]
            objective = (total + anchors[s]) / step_s
            tpot = step_s * ((requests + reciprocal) / per_request) * 1e3
            if tpot < fastest:
                fastest, fastest_k = tpot, k
            if tpot <= slo_ms and objective > best:
                best, best_k = objective, k
        out[s] = best_k if best > -np.inf else fastest_k
    return out


# ----------------------------------------------------------------------------------------- the adaptive draft plan
SMALL_SORT = 48  # columns of at most this many candidates are sorted by insertion


@njit(cache=True)
def draft_plan(a, row_len, anchors, seconds, draft_all_s, budget):
    """For every draft length d = 1..G (index d - 1): the best verify budget K_d of the path of positions j < d,
    with the cost ``seconds[K] + draft_all_s[s, d]`` (:func:`best_budget`'s rule); the path's gain at K_d; and
    which requests verify anything at K_d (their first candidate is among the first K_d). Path d is path d - 1
    merged with the candidates at position d - 1, so each step sorts only its columns."""
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
                if _length(row_len, s, r, gamma) > i:
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
            most = min(size, max(budget[s], 0))
            extra = draft_all_s[s, d]
            best = anchors[s] / (seconds[s, 0] + extra)
            best_gain = anchors[s]
            total = 0.0
            for k in range(1, most + 1):
                value = path[k - 1]
                total = value if k == 1 else total + value
                objective = (total + anchors[s]) / (seconds[s, k] + extra)
                if objective > best:
                    best, best_k[s, i], best_gain = objective, k, total + anchors[s]
            gain[s, i] = best_gain
            k = best_k[s, i]
            if k == 0:
                continue
            if k >= size:
                for r in range(num_rows):
                    drafting[s, i, r] = _length(row_len, s, r, gamma) > 0
                continue
            # a request verifies something when its first candidate is among the first k of path d
            cut = path[k - 1]
            above = 0
            for x in range(k):
                if path[x] > cut:
                    above += 1
            room = k - above
            for r in range(num_rows):
                length = min(_length(row_len, s, r, gamma), d)
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
    """:func:`draft_plan` with a TPOT limit (:func:`best_budget_slo`'s rule), walking the full path's ``order``
    once for every d (the path of positions j < d is the full path with the others left out). Also returns the
    batch's mean reciprocal tokens at each K_d."""
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
                valid += min(_length(row_len, s, r, gamma), d)
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
            if j >= _length(row_len, s, r, gamma):
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
def finish_plan(a, row_len, anchors, seconds, budget, chosen_k, gained, mean_recip, draft_all, draft_fewer, drafting,
                may_verify, batch, slo_ms, with_slo):
    """The adaptive plan from each draft length's lagged optimum (:func:`draft_plan`): per d, draft only the
    requests that verify something there when that is cheaper (``draft_fewer`` < ``draft_all``, both [G, S]);
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
        num_may = 0
        for r in range(num_rows):
            if may_verify[s, r]:
                num_may += 1
        for d in range(1, gamma + 1):
            i = d - 1
            fewer = 0
            for r in range(num_rows):
                if drafting[s, i, r] and may_verify[s, r]:
                    fewer += 1
            use_fewer[d] = draft_fewer[i, s] < draft_all[i, s]
            cost[d] = draft_fewer[i, s] if use_fewer[d] else draft_all[i, s]
            step_s = seconds[s, chosen_k[s, i]] + cost[d]
            factor = mean_recip[s, i] if with_slo else batch[s] / gained[s, i]
            objective[d] = gained[s, i] / step_s
            tpot[d] = step_s * factor * 1e3
            within[d] = (not with_slo) or tpot[d] <= slo_ms
            eligible[d] = fewer > 0 if use_fewer[d] else num_may > 0
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
            best_set[s, r] = (drafting[s, best - 1, r] and may_verify[s, r]) if use_fewer[best] else may_verify[s, r]
        if with_slo or not best_draft[s] > 0.0:
            continue
        # the budget the draft was paid for: the best K of the lagged path over what is drafted
        count = 0
        for r in range(num_rows):
            if best_set[s, r]:
                for j in range(min(_length(row_len, s, r, gamma), best)):
                    values[count] = a[s, r, j]
                    count += 1
        ordered = np.sort(values[:count])  # ascending: the path reads it from the end
        most = min(count, max(budget[s], 0))
        top = anchors[s] / (seconds[s, 0] + best_draft[s])
        total = 0.0
        for k in range(1, most + 1):
            value = ordered[count - k]
            total = value if k == 1 else total + value
            objective_k = (total + anchors[s]) / (seconds[s, k] + best_draft[s])
            if objective_k > top:
                top, committed[s] = objective_k, k
    return best_len, best_set, best_draft, committed
