"""The policies written with numpy over a fully sorted path: the reference simlab/schedulers/policies.py is tested
against (``fixed`` and ``threshold`` too: they trim a step over its token budget along the path)."""

from __future__ import annotations

import numpy as np

from simlab.schedulers.inputs import ScheduleInputs
from .path import argmax_budget, build_path, cap, clip_to_budget, over_budget, survival


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
    steps, num_requests, gamma = inp.conf.shape
    if num_requests == 0:
        return np.zeros((steps, 0), dtype=np.int64)
    a = survival(inp.conf, inp.max_len)
    # Algorithm 1 stops at the first candidate that does not raise Theta, usually early on a rising cost curve:
    # on a long path walk its first candidates, and the whole path only when some step goes past them
    if num_requests * gamma > LONG_PATH:
        head = build_path(a, inp.num_requests, head=PATH_HEAD, max_len=inp.max_len)
        admitted = _admitted(inp, head, partial=True)
        if admitted is not None:
            return admitted
    return _admitted(inp, build_path(a, inp.num_requests, max_len=inp.max_len), partial=False)


LONG_PATH = 256  # candidates per step above which the head is walked first (shorter paths: sorting is cheap)
PATH_HEAD = 16  # candidates walked before the whole path


def _admitted(inp: ScheduleInputs, path, *, partial: bool) -> np.ndarray | None:
    """Algorithm 1's verify lengths along ``path``; None when ``partial`` (the path holds its head only) and some
    step goes past its end."""
    limit = cap(path.num_valid, inp.token_budget)
    theta = path.gained / path.seconds(inp.verify_s)  # [S, n + 1], Theta after admitting K = 0..n
    n = theta.shape[-1] - 1
    if theta.shape[0] == 1:  # the same, on the one step's curve up to its limit
        most = int(limit[0])
        upto = min(most, n)
        falls = theta[0, 1 : upto + 1] <= theta[0, :upto]
        if np.logical_or.reduce(falls):
            return path.lengths(np.array([int(falls.argmax())]))
        return None if partial and most > n else path.lengths(np.array([most]))
    stop = (theta[:, 1:] <= theta[:, :-1]) | (np.arange(n)[None, :] >= limit[:, None])
    stopped = np.logical_or.reduce(stop, axis=-1)
    if partial and not np.logical_and.reduce(stopped):
        return None
    return path.lengths(np.where(stopped, stop.argmax(axis=-1), n))


def _budget_from(inp: ScheduleInputs, conf: np.ndarray, max_len: np.ndarray, *, with_draft: bool) -> np.ndarray:
    """The total budget K maximising the objective along the path built from ``conf`` (global argmax)."""
    path = build_path(survival(conf, max_len), inp.num_requests)
    seconds = path.seconds(inp.verify_s)
    if with_draft:
        draft_s = np.asarray(inp.draft_s, dtype=float)
        seconds = (draft_s[:, None] if draft_s.ndim else draft_s) + seconds
    return argmax_budget(path.gained / seconds, cap(path.num_valid, inp.token_budget))


def _top_k(inp: ScheduleInputs, budget: np.ndarray) -> np.ndarray:
    path = build_path(survival(inp.conf, inp.max_len), inp.num_requests, max_len=inp.max_len)
    return path.lengths(np.minimum(budget, cap(path.num_valid, inp.token_budget)))


def async_topk(inp: ScheduleInputs, *, lag_steps: int) -> np.ndarray:
    """Production variant (DSpark section 5.2): K = argmax of tau * SPS(B) over lagged confidences,
    then the global top-K of the current survival values. The lag is a causal barrier, so a global argmax
    is allowed and can jump over cliffs in SPS(B)."""
    if inp.conf.shape[1] == 0:
        return np.zeros(inp.conf.shape[:2], dtype=np.int64)
    if inp.lagged_conf is None or inp.lagged_max_len is None:
        raise ValueError("async_topk needs lagged_conf and lagged_max_len")
    budget = _budget_from(inp, inp.lagged_conf, inp.lagged_max_len, with_draft=False)
    return _top_k(inp, budget)


def goodput(inp: ScheduleInputs, *, lag_steps: int) -> np.ndarray:
    """vLLM/SGLang-style adaptive verification: K maximises expected tokens / (draft + verify seconds),
    computed on confidences ``lag_steps`` old (the current ones when 0), then the current top-K."""
    if inp.conf.shape[1] == 0:
        return np.zeros(inp.conf.shape[:2], dtype=np.int64)
    if lag_steps > 0 and (inp.lagged_conf is None or inp.lagged_max_len is None):
        raise ValueError("goodput with lag_steps > 0 needs lagged_conf and lagged_max_len")
    conf = inp.lagged_conf if lag_steps > 0 else inp.conf
    max_len = inp.lagged_max_len if lag_steps > 0 else inp.max_len
    budget = _budget_from(inp, conf, max_len, with_draft=True)
    return _top_k(inp, budget)


def retrospective(inp: ScheduleInputs) -> np.ndarray:
    """Algorithm 1's survival-sorted path with a global argmax of Theta = tau * SPS(B) instead of the early stop.

    NOT lossless: the argmax looks at every position's current survival, so whether x_k is verified can depend
    on confidences computed from x_k itself (c_{k+1} reads the drafted x_k). It exists as the negative control
    of the losslessness audit (``simlab audit``), not as a policy to serve with.
    """
    if inp.conf.shape[1] == 0:
        return np.zeros(inp.conf.shape[:2], dtype=np.int64)
    return _top_k(inp, _budget_from(inp, inp.conf, inp.max_len, with_draft=False))


def oracle(inp: ScheduleInputs) -> np.ndarray:
    """Knows how many positions the target will accept: verifies only those (no wasted verify tokens), and
    keeps the count K of them that maximises (R + K) * SPS(R + K). Not realisable; an upper bound."""
    steps, num_requests, gamma = inp.conf.shape
    if num_requests == 0:
        return np.zeros((steps, 0), dtype=np.int64)
    if inp.true_accepted is None:
        raise ValueError("oracle needs true_accepted")
    will_accept = np.minimum(inp.true_accepted, inp.max_len)
    # every accepted candidate is worth exactly 1; fill position-major so that prefixes stay contiguous
    positions = np.arange(gamma)
    value = np.where(positions < will_accept[..., None], 1.0 - positions / (gamma + 1.0), -1.0)
    path = build_path(value, inp.num_requests)
    anchors = path.anchors[:, None] if isinstance(path.anchors, np.ndarray) else path.anchors
    gained = anchors + np.arange(path.values.shape[-1] + 1)[None, :]
    return path.lengths(argmax_budget(gained / path.seconds(inp.verify_s), cap(path.num_valid, inp.token_budget)))
