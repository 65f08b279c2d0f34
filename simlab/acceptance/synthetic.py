"""Draft rounds drawn with the engine's own acceptance draws (:class:`~simlab.acceptance.draws.ArmDraws`), as a log.

Each request runs until it has emitted its output tokens, as in the engine: a round verifies
``verify_len(conf)`` of the gamma drafted positions (all of them by default; never more than the tokens the
request still needs minus one), accepts the drafts the draws accept among those, and emits them plus one. The
raw confidence head (before STS) is recorded. Used to check that fitting recovers the model it came from
(tests/test_acceptance_fit.py) and for the runnable examples in docs/acceptance-logs.md.
"""

from __future__ import annotations

from typing import Callable, Mapping, Optional

import numpy as np

from simlab.acceptance.logs.parsed import Rounds
from simlab.acceptance.spec import AcceptanceSpec
from simlab.acceptance.warmup import normalised_weights


def simulate_rounds(
    spec: AcceptanceSpec,
    method: str,
    domain_weights: Mapping[str, float],
    gamma: int,
    num_requests: int,
    output_tokens: int | np.ndarray,
    *,
    seed: int,
    verify_len: Optional[Callable[[np.ndarray], np.ndarray]] = None,
) -> Rounds:
    """Rounds of ``num_requests`` requests (ids 0..num_requests-1) under ``spec``'s model for ``method``.

    Requests get domains in proportion to ``domain_weights`` (deterministically from ``seed``). Requests with the
    same id get the same request term for every method drawn with the same seed, as arms of one run do.
    """
    from simlab.acceptance.draws import ArmDraws

    weights = normalised_weights(domain_weights)
    names = tuple(weights)
    rng = np.random.default_rng([seed, 7])
    domain = rng.choice(len(names), size=num_requests, p=[weights[d] for d in names])
    outputs = np.broadcast_to(np.asarray(output_tokens, dtype=np.int64), (num_requests,)).copy()
    draws = ArmDraws(seed=seed, gamma=gamma, base_logit=spec.logits(method, names, gamma),
                     heterogeneity=spec.heterogeneity, confidence=spec.confidence, temperatures=None)
    shift = draws.request_shift(num_requests)
    request_logit = draws.base_logit[domain] + (0.0 if shift is None else shift[:, None])
    max_steps = outputs  # a round emits at least one token
    conf, true_accepted, _ = draws.generate(
        np.arange(num_requests), request_logit, np.zeros(num_requests, dtype=np.int64), np.zeros(num_requests),
        max_steps,
    )
    row_request = np.repeat(np.arange(num_requests), max_steps)
    step = np.arange(len(row_request)) - np.repeat(np.cumsum(max_steps) - max_steps, max_steps)
    wanted = np.full(len(row_request), gamma, dtype=np.int64) if verify_len is None else \
        np.asarray(verify_len(conf), dtype=np.int64)
    # walk each request's rounds in order: the tokens still needed cap the verify length
    emitted_before = np.zeros(len(row_request), dtype=np.int64)
    verified = np.zeros(len(row_request), dtype=np.int64)
    accepted = np.zeros(len(row_request), dtype=np.int64)
    keep = np.zeros(len(row_request), dtype=bool)
    for r in range(num_requests):
        done = 0
        for i in _rows(row_request, r):
            if done >= outputs[r]:
                break
            ell = int(min(wanted[i], gamma, outputs[r] - done - 1))
            a = int(min(true_accepted[i], ell))
            verified[i], accepted[i], emitted_before[i], keep[i] = ell, a, done, True
            done += a + 1
    names_arr = np.asarray(names, dtype=object)
    rows = np.flatnonzero(keep)
    return Rounds(
        method=np.full(len(rows), method, dtype=object), domain=names_arr[domain[row_request[rows]]],
        sequence=row_request[rows].astype(np.int64), cluster=row_request[rows].astype(object),
        step=step[rows].astype(np.int64), drafted=np.full(len(rows), gamma, dtype=np.int64),
        verified=verified[rows], accepted=accepted[rows], conf=conf[rows],
    )


def _rows(row_request: np.ndarray, r: int) -> np.ndarray:
    lo, hi = np.searchsorted(row_request, [r, r + 1])
    return np.arange(lo, hi)
