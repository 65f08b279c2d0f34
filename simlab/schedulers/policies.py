"""Verify-length policies. Each is a pure function of :class:`ScheduleInputs` returning lengths [S, R].

They are shared by the simulator, the real engine and the losslessness audit.
"""

from __future__ import annotations

import numpy as np

from simlab.schedulers.inputs import ScheduleInputs
from simlab.schedulers.path import (
    admitted_lengths, best_budget, clip_to_budget, early_stop, over_budget, products, row_lengths, sorted_path,
    survival, top_k,
)


def fixed(inp: ScheduleInputs) -> np.ndarray:
    """Verify every drafted position (up to the request's limit)."""
    lengths = inp.max_len.astype(np.int64)
    if over_budget(lengths, inp.token_budget) is None:  # the usual case: no survival values needed
        return lengths
    return clip_to_budget(lengths, survival(inp.conf, inp.max_len), inp.token_budget)


def threshold(inp: ScheduleInputs, *, threshold: float, cumulative: bool) -> np.ndarray:
    """Cut each request at its first position whose confidence is below ``threshold``.

    Per position by default (the DeepSpec evaluator); with ``cumulative`` the survival a_j is compared.
    """
    a = survival(inp.conf, inp.max_len)
    score = a if cumulative else np.where(a >= 0.0, inp.conf, -1.0)
    lengths = np.add.reduce(np.multiply.accumulate(score >= threshold, axis=-1), axis=-1)
    return clip_to_budget(lengths, a, inp.token_budget)


def hardware_aware(inp: ScheduleInputs) -> np.ndarray:
    """DSpark Algorithm 1.

    Start from no drafted position (B = R, tau = R, Theta = R * SPS(R)) and admit candidates in descending
    survival order while Theta = tau * SPS(B) strictly rises; stop at the first candidate that does not raise it.
    """
    steps, num_requests, _ = inp.conf.shape
    if num_requests == 0:
        return np.zeros((steps, 0), dtype=np.int64)
    return early_stop(inp, products(inp.conf), row_lengths(inp.max_len, inp.conf.shape))


def _budget_from(inp: ScheduleInputs, conf: np.ndarray, max_len: np.ndarray, *, with_draft: bool) -> np.ndarray:
    """The total budget K maximising the objective along the path built from ``conf`` (global argmax)."""
    extra_s = inp.draft_s if with_draft else 0.0
    return best_budget(inp, products(conf), row_lengths(max_len, conf.shape), extra_s=extra_s)


def async_topk(inp: ScheduleInputs, *, lag_steps: int) -> np.ndarray:
    """Production variant (DSpark section 5.2): K = argmax of tau * SPS(B) over lagged confidences,
    then the global top-K of the current survival values. The lag is a causal barrier, so a global argmax
    is allowed and can jump over cliffs in SPS(B)."""
    if inp.conf.shape[1] == 0:
        return np.zeros(inp.conf.shape[:2], dtype=np.int64)
    if inp.lagged_conf is None or inp.lagged_max_len is None:
        raise ValueError("async_topk needs lagged_conf and lagged_max_len")
    return top_k(inp, _budget_from(inp, inp.lagged_conf, inp.lagged_max_len, with_draft=False))


def goodput(inp: ScheduleInputs, *, lag_steps: int) -> np.ndarray:
    """vLLM/SGLang-style adaptive verification: K maximises expected tokens / (draft + verify seconds),
    computed on confidences ``lag_steps`` old (the current ones when 0), then the current top-K."""
    if inp.conf.shape[1] == 0:
        return np.zeros(inp.conf.shape[:2], dtype=np.int64)
    if lag_steps > 0 and (inp.lagged_conf is None or inp.lagged_max_len is None):
        raise ValueError("goodput with lag_steps > 0 needs lagged_conf and lagged_max_len")
    conf = inp.lagged_conf if lag_steps > 0 else inp.conf
    max_len = inp.lagged_max_len if lag_steps > 0 else inp.max_len
    return top_k(inp, _budget_from(inp, conf, max_len, with_draft=True))


def retrospective(inp: ScheduleInputs) -> np.ndarray:
    """Algorithm 1's survival-sorted path with a global argmax of Theta = tau * SPS(B) instead of the early stop.

    NOT lossless: the argmax looks at every position's current survival, so whether x_k is verified can depend
    on confidences computed from x_k itself (c_{k+1} reads the drafted x_k). It exists as the negative control
    of the losslessness audit (``simlab audit``), not as a policy to serve with.
    """
    if inp.conf.shape[1] == 0:
        return np.zeros(inp.conf.shape[:2], dtype=np.int64)
    return top_k(inp, _budget_from(inp, inp.conf, inp.max_len, with_draft=False))


def oracle(inp: ScheduleInputs) -> np.ndarray:
    """Knows how many positions the target will accept: verifies only those (no wasted verify tokens), and
    keeps the count K of them that maximises (R + K) * SPS(R + K). Not realisable; an upper bound."""
    steps, num_requests, gamma = inp.conf.shape
    if num_requests == 0:
        return np.zeros((steps, 0), dtype=np.int64)
    if inp.true_accepted is None:
        raise ValueError("oracle needs true_accepted")
    will_accept = row_lengths(np.minimum(inp.true_accepted, inp.max_len), inp.conf.shape)
    # every accepted candidate is worth exactly 1; valued position-major so that prefixes stay contiguous
    value = np.ascontiguousarray(np.broadcast_to(1.0 - np.arange(gamma) / (gamma + 1.0), inp.conf.shape))
    neg = sorted_path(value, will_accept)
    return admitted_lengths(value, will_accept, best_budget(inp, value, will_accept, count_gain=True, neg=neg), neg)
