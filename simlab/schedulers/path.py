"""The survival-sorted candidate path shared by the load-aware schedulers.

Every (request r, position j) pair is a candidate worth a_{r,j} = prod_{i<=j} c_hat_{r,i} expected tokens.
Taking candidates in descending a (ties in (request, position) order) keeps each request's admitted positions a
prefix, because a is non-increasing in j. Admitting the first K candidates of the path gives K verify tokens.

The walks along the path are compiled (:mod:`simlab.schedulers.kernels`, imported on first use); this module
turns a step's :class:`~simlab.schedulers.inputs.ScheduleInputs` into their arrays.
"""

from __future__ import annotations

import numpy as np

from simlab.schedulers.inputs import ScheduleInputs

_INVALID = -1.0
SHORT_PATH = 257  # paths of at most this many K are priced whole at once
HEAD_CANDIDATES = 32  # on longer ones, the verify seconds priced first for an early-stopping walk
NO_BUDGET = np.iinfo(np.int64).max // 4


def kernels():
    """The compiled walks (numba is imported here, on a scheduler's first call)."""
    from simlab.schedulers import kernels as compiled

    return compiled


def survival(conf: np.ndarray, max_len: np.ndarray) -> np.ndarray:
    """a[s, r, j] = prod_{i<=j} conf[s, r, i] (conf in [0, 1]), positions beyond max_len marked invalid (-1)."""
    a = np.multiply.accumulate(conf, axis=-1)
    gamma = conf.shape[-1]
    if np.minimum.reduce(max_len, axis=None, initial=gamma) >= gamma:
        return a
    return np.where(np.arange(gamma) < max_len[..., None], a, _INVALID)


def products(conf: np.ndarray) -> np.ndarray:
    """[S, R, G] the running products of ``conf`` along positions, as the compiled walks read them."""
    return np.ascontiguousarray(np.multiply.accumulate(conf, axis=-1), dtype=np.float64)


def row_lengths(max_len: np.ndarray, shape: tuple[int, int, int]) -> np.ndarray:
    """[S, R] int64 how many leading candidates of each row may be verified (the walks clip it to 0..G)."""
    lengths = np.asarray(max_len, dtype=np.int64)
    if lengths.shape != shape[:2]:
        lengths = np.broadcast_to(lengths, shape[:2])
    return np.ascontiguousarray(lengths)


def per_step(value, steps: int, dtype) -> np.ndarray:
    """A scalar or [S] value as a contiguous [S] array."""
    if isinstance(value, np.ndarray):
        if value.shape == (steps,):
            return np.ascontiguousarray(value, dtype=dtype)
        if value.ndim:
            return np.ascontiguousarray(np.broadcast_to(value.astype(dtype, copy=False), (steps,)))
    return np.full(steps, value, dtype=dtype)


def budgets(token_budget, steps: int) -> np.ndarray:
    """[S] the most candidates each step may admit (None: no limit beyond the valid candidates)."""
    return per_step(NO_BUDGET if token_budget is None else token_budget, steps, np.int64)


def batch_sizes(inp: ScheduleInputs) -> np.ndarray:
    """[S] requests in each step's batch (all R rows unless ``num_requests`` says otherwise)."""
    steps, num_requests, _ = inp.conf.shape
    if inp.num_requests is None:
        return np.full(steps, num_requests, dtype=np.int64)
    return per_step(inp.num_requests, steps, np.int64)


def verify_seconds(inp: ScheduleInputs, batch: np.ndarray, width: int) -> np.ndarray:
    """[S, width] verify seconds after admitting K = 0..width-1 candidates (batch tokens R + K)."""
    seconds = np.asarray(inp.verify_s(batch[:, None] + np.arange(width)[None, :]), dtype=np.float64)
    if seconds.shape != (len(batch), width):
        seconds = np.broadcast_to(seconds, (len(batch), width))
    return np.ascontiguousarray(seconds)


def _negated(a: np.ndarray, row_len: np.ndarray) -> np.ndarray:
    """[S, R*G] each candidate's -a, invalid candidates +1 (so that they sort last)."""
    steps, num_requests, gamma = a.shape
    return np.where(np.arange(gamma) < row_len[..., None], -a, 1.0).reshape(steps, num_requests * gamma)


def sorted_path(a: np.ndarray, row_len: np.ndarray) -> np.ndarray:
    """[S, R*G] each step's path values, negated and sorted ascending (invalid candidates +1, last): the
    ``neg`` the compiled walks read."""
    return np.sort(_negated(a, row_len), axis=-1)


def path_order(a: np.ndarray, row_len: np.ndarray) -> np.ndarray:
    """[S, R*G] the flat indices r * G + j of each step's candidates in path order (a stable sort)."""
    return np.ascontiguousarray(np.argsort(_negated(a, row_len), axis=-1, kind="stable"))


def admitted_lengths(a: np.ndarray, row_len: np.ndarray, num_admitted, neg: np.ndarray | None = None) -> np.ndarray:
    """[S, R] verify lengths when the first ``num_admitted`` [S] candidates of each step's path are admitted."""
    if neg is None:
        neg = sorted_path(a, row_len)
    return kernels().cut_lengths(a, row_len, neg, per_step(num_admitted, row_len.shape[0], np.int64))


def early_stop(inp: ScheduleInputs, a: np.ndarray, row_len: np.ndarray, *, extra_s=0.0, start=0,
               slo_ms: float | None = None) -> np.ndarray:
    """Algorithm 1's lengths [S, R]: admit candidates while Θ = τ / (verify_s(B) + ``extra_s``) strictly rises
    (the first ``start`` whatever it does; with ``slo_ms`` also while the expected TPOT stays within it). The
    verify seconds of the path's head are priced first, all of them only when a step walks past it."""
    compiled = kernels()
    steps, num_requests, gamma = a.shape
    batch = batch_sizes(inp)
    anchors = batch.astype(np.float64)
    extra = per_step(extra_s, steps, np.float64)
    budget = budgets(inp.token_budget, steps)
    first = per_step(start, steps, np.int64)
    neg = sorted_path(a, row_len)
    order = None if slo_ms is None else path_order(a, row_len)

    def walk(seconds):
        if order is None:
            return compiled.early_stop(neg, row_len, gamma, anchors, seconds, extra, budget, first)
        return compiled.early_stop_slo(a, row_len, order, anchors, seconds, extra, budget, first, batch,
                                       float(slo_ms))

    full = num_requests * gamma + 1
    width = full if full <= SHORT_PATH else HEAD_CANDIDATES + 1
    num_admitted, ended = walk(verify_seconds(inp, batch, width))
    if width < full and not np.logical_and.reduce(ended):
        num_admitted, _ = walk(verify_seconds(inp, batch, full))
    return compiled.cut_lengths(a, row_len, neg, num_admitted)


def best_budget(inp: ScheduleInputs, a: np.ndarray, row_len: np.ndarray, *, extra_s=0.0,
                slo_ms: float | None = None, count_gain: bool = False, seconds: np.ndarray | None = None,
                neg: np.ndarray | None = None) -> np.ndarray:
    """[S] the verify budget K maximising expected tokens / (verify_s(B) + ``extra_s``) along the path (global
    argmax, first maximum; ``count_gain``: every candidate is worth one token; ``slo_ms``: among the K whose
    expected TPOT is within it, or the K of the lowest TPOT when none is)."""
    steps, num_requests, gamma = a.shape
    batch = batch_sizes(inp)
    if seconds is None:
        seconds = verify_seconds(inp, batch, num_requests * gamma + 1)
    extra, budget = per_step(extra_s, steps, np.float64), budgets(inp.token_budget, steps)
    if slo_ms is not None:
        return kernels().best_budget_slo(a, row_len, path_order(a, row_len), batch.astype(np.float64), seconds,
                                         extra, budget, batch, float(slo_ms))
    if neg is None:
        neg = sorted_path(a, row_len)
    return kernels().best_budget(neg, row_len, gamma, batch.astype(np.float64), seconds, extra, budget, count_gain)


def top_k(inp: ScheduleInputs, budget: np.ndarray) -> np.ndarray:
    """The global top-``budget`` candidates of the current confidences (within the token budget)."""
    steps = inp.conf.shape[0]
    admitted = np.minimum(per_step(budget, steps, np.int64), budgets(inp.token_budget, steps))
    return admitted_lengths(products(inp.conf), row_lengths(inp.max_len, inp.conf.shape), np.maximum(admitted, 0))


def over_budget(lengths: np.ndarray, token_budget) -> np.ndarray | None:
    """Which steps' lengths total more than their token budget; None when none does (or there is no budget)."""
    if token_budget is None:
        return None
    over = np.add.reduce(lengths, axis=-1) > token_budget
    return over if np.logical_or.reduce(over, axis=None) else None


def clip_to_budget(lengths: np.ndarray, a: np.ndarray, token_budget) -> np.ndarray:
    """Trim lengths whose total exceeds the budget, keeping the highest-survival positions (``a``: the
    survival values, or their running products)."""
    over = over_budget(lengths, token_budget)
    if over is None:
        return lengths
    budget = np.broadcast_to(np.asarray(token_budget, dtype=np.int64), over.shape)[over]
    trimmed = admitted_lengths(np.ascontiguousarray(a[over], dtype=np.float64),
                               np.ascontiguousarray(lengths[over], dtype=np.int64), np.maximum(budget, 0))
    out = lengths.copy()
    out[over] = trimmed
    return out
