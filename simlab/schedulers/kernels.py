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

The adaptive scheduler's draft plan has its own compiled walks, built on these: :mod:`simlab.schedulers.plan_kernels`.

numba compiles these on first use and caches the machine code in the user's cache folder (``NUMBA_CACHE_DIR``,
by default ``$XDG_CACHE_HOME/simlab/numba`` or ``~/.cache/simlab/numba``), so only the first run after an
install pays the compilation. This module is imported only when a scheduler first runs: the command line's
start-up never loads numba.
"""

from __future__ import annotations

import numpy as np

from simlab.common.jit import njit


@njit(cache=True, inline="always")
def valid_length(row_len, s, r, gamma) -> int:
    """Row r's valid candidates: its limit clipped to 0..G (callers pass the raw ``max_len``)."""
    return min(max(row_len[s, r], 0), gamma)


@njit(cache=True)
def num_valid(row_len, s, gamma) -> int:
    """Step s's valid candidates."""
    valid = 0
    for r in range(row_len.shape[1]):
        valid += valid_length(row_len, s, r, gamma)
    return valid


@njit(cache=True)
def walk_limit(row_len, s, gamma, budget) -> int:
    """How far along step s's path a walk may go: its valid candidates, within the token budget."""
    return min(num_valid(row_len, s, gamma), max(budget[s], 0))


@njit(cache=True, inline="always")
def best_prefix(values, sign, most, anchors, seconds, extra_s, count_gain):
    """(K, the gain at K): the K in [0, most] with the most expected tokens per second along a path whose k-th
    value is ``sign * values[k - 1]``, (anchors + Σ a) / (seconds[K] + extra_s), or with ``count_gain``
    (anchors + K) / (...). The first maximum wins."""
    best = anchors / (seconds[0] + extra_s)
    best_k, best_gain = 0, anchors
    total = 0.0
    for k in range(1, most + 1):
        value = sign * values[k - 1]
        total = value if k == 1 else total + value
        gain = anchors + k if count_gain else total + anchors
        objective = gain / (seconds[k] + extra_s)
        if objective > best:
            best, best_k, best_gain = objective, k, gain
    return best_k, best_gain


# ----------------------------------------------------------------------------------------- which candidates
@njit(cache=True)
def cut_lengths(a, row_len, neg, num_admitted):
    """Verify lengths [S, R] when the first ``num_admitted[s]`` candidates of each step's path are admitted."""
    steps, num_rows = row_len.shape
    gamma = a.shape[2]
    lengths = np.zeros((steps, num_rows), dtype=np.int64)
    for s in range(steps):
        valid = num_valid(row_len, s, gamma)
        k = num_admitted[s]
        if k <= 0:
            continue
        if k >= valid:
            for r in range(num_rows):
                lengths[s, r] = valid_length(row_len, s, r, gamma)
            continue
        cut = -neg[s, k - 1]
        above = 0
        for r in range(num_rows):
            for j in range(valid_length(row_len, s, r, gamma)):
                if a[s, r, j] > cut:
                    above += 1
        room = k - above  # of the candidates equal to the cut, the first `room` in (request, position) order
        for r in range(num_rows):
            count = 0
            for j in range(valid_length(row_len, s, r, gamma)):
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
        most = walk_limit(row_len, s, gamma, budget)
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
        out[s], _ = best_prefix(neg[s], -1.0, walk_limit(row_len, s, gamma, budget), anchors[s], seconds[s],
                                 extra_s[s], count_gain)
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
            for j in range(valid_length(row_len, s, r, gamma)):
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
        most = walk_limit(row_len, s, gamma, budget)
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
        for k in range(1, walk_limit(row_len, s, gamma, budget) + 1):
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
