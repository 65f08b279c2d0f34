"""Per-step acceptance draws: true conditional acceptance, outcomes and the confidence head's estimates.

Everything is keyed by (scenario seed, request id, decode step, position) through :mod:`simlab.common.crn`, so every arm
sees the same randomness for the same request and step, and a block of K steps drawn at once equals K steps
drawn one by one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
from scipy.special import ndtri

from simlab.common import crn
from simlab.config.acceptance import ConfidenceConfig, HeterogeneityConfig


@dataclass(frozen=True)
class ArmDraws:
    """The acceptance model of one arm, ready to draw blocks of steps."""

    seed: int
    gamma: int
    base_logit: np.ndarray  # [num_domains, G]
    heterogeneity: HeterogeneityConfig
    confidence: ConfidenceConfig
    temperatures: np.ndarray | None  # [G] STS temperatures, None when uncalibrated
    tree: object = None  # simlab.acceptance.tree.TreeDraws of a tree arm: its rounds accept along the tree
    # a lookup drafter's (ngram, suffix) chance per domain [num_domains] that a round finds a match; None: every
    # round proposes gamma tokens
    match_prob: Optional[np.ndarray] = None
    pads: bool = False  # the release verifies a full draft even without a match (its acceptance stays 0)

    def request_shift(self, num_requests: int) -> Optional[np.ndarray]:
        """delta_r for requests 0..num_requests-1 (None when requests do not differ)."""
        sd = self.heterogeneity.request_logit_sd
        if sd == 0.0:
            return None
        return sd * crn.keyed_normal(self.seed, crn.REQUEST_DIFFICULTY, np.arange(num_requests))

    def generate(
        self, request_ids: np.ndarray, request_logit: np.ndarray, first_step: np.ndarray,
        previous_shift: np.ndarray, num_steps: np.ndarray, request_match: Optional[np.ndarray] = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Draws of decode steps first_step[r] .. first_step[r] + num_steps[r] - 1 of each request r.

        request_logit [R, G] is L[domain] + delta_r (see :meth:`request_shift`); previous_shift is z at each
        request's step before first_step (ignored where that is 0). Rows are ragged: request r's steps come
        after request r-1's, M = sum(num_steps) rows in all. Returns the head's calibrated conditional acceptance
        estimates [M, G], how many leading positions the target accepts if all G are verified [M], and the
        step-difficulty process z [M]. Two hashes per (request, step, position) feed everything: the accept
        uniform and the token noise (stream ACCEPT), the head's noise and, at position 0, the step innovation
        (stream NOISE). Each value depends on its key only, not on what else is drawn with it.

        ``request_match`` [R] (a lookup drafter's): each request's chance that a round finds a match; a round
        that finds none (a uniform keyed by request and step, stream MATCH, at or above it) proposes nothing: its
        confidences and accepted count are 0 (:meth:`proposed` says how many positions each row proposes).
        """
        from simlab.acceptance import draw_kernel

        het, confidence = self.heterogeneity, self.confidence
        sd, rho = het.step_logit_sd, het.step_correlation
        want_token, want_head, want_shift = het.token_logit_sd > 0.0, confidence.noise_logit_sd > 0.0, sd > 0.0
        first = np.asarray(first_step, dtype=np.int64)
        row_request, steps, step_in, accept_u, token_u, head_u, shift_u = draw_kernel.uniforms(
            crn.base(self.seed, crn.ACCEPT), crn.base(0, crn.NOISE), np.asarray(request_ids, dtype=np.int64), first,
            np.asarray(num_steps, dtype=np.int64), self.gamma, want_token, want_head, want_shift)
        for wanted, u in ((want_token, token_u), (want_head, head_u), (want_shift, shift_u)):
            if wanted:
                ndtri(u, out=u)  # the uniforms become their standard normals
        bias = _EMPTY
        if confidence.has_bias:
            bias = np.ascontiguousarray(np.broadcast_to(np.asarray(confidence.bias_at(self.gamma), dtype=float),
                                                        (self.gamma,)))
        temperatures = _EMPTY if self.temperatures is None else np.ascontiguousarray(self.temperatures, dtype=float)
        shift, true_accepted, conf, accept_prob = draw_kernel.outcomes(
            np.ascontiguousarray(request_logit, dtype=float), row_request, steps, step_in, first,
            np.asarray(previous_shift, dtype=float), accept_u, shift_u, sd, float(np.sqrt(1.0 - rho * rho) * sd), rho,
            token_u, het.token_logit_sd, bias, head_u, confidence.noise_logit_sd, temperatures, True,
            self.tree is not None)
        if self.tree is not None:
            # rank 1 at each depth is the chain's acceptance; the misses' ranks from the same uniforms
            true_accepted = self.tree.accepted(accept_u, accept_prob)
        if request_match is not None:
            ids = np.asarray(request_ids, dtype=np.int64)[row_request]
            missed = crn.keyed_uniform(self.seed, crn.MATCH, ids, steps) >= np.asarray(request_match)[row_request]
            conf[missed] = 0.0
            true_accepted[missed] = 0
        return conf, true_accepted, shift

    def proposed(self, conf: np.ndarray) -> np.ndarray:
        """Positions each row of :meth:`generate`'s confidences [M, G] proposes: gamma, or 0 where a lookup
        drafter found no match (every confidence 0: a drafted position's confidence is a sigmoid, never 0)."""
        if self.match_prob is None or self.pads:
            return np.full(conf.shape[0], self.gamma, dtype=np.int64)
        return np.where(np.logical_or.reduce(conf > 0.0, axis=1), self.gamma, 0).astype(np.int64)


_EMPTY = np.zeros(0)
