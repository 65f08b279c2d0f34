"""Per-step acceptance draws: true conditional acceptance, outcomes and the confidence head's estimates.

Everything is keyed by (scenario seed, request id, decode step, position) through :mod:`simlab.common.crn`, so every arm
sees the same randomness for the same request and step, and a block of K steps drawn at once equals K steps
drawn one by one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
from scipy.signal import lfilter
from scipy.special import expit, ndtri

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

    def request_shift(self, num_requests: int) -> Optional[np.ndarray]:
        """delta_r for requests 0..num_requests-1 (None when requests do not differ)."""
        sd = self.heterogeneity.request_logit_sd
        if sd == 0.0:
            return None
        return sd * crn.keyed_normal(self.seed, crn.REQUEST_DIFFICULTY, np.arange(num_requests))

    def generate(
        self, request_ids: np.ndarray, request_logit: np.ndarray, first_step: np.ndarray,
        previous_shift: np.ndarray, num_steps: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Draws of decode steps first_step[r] .. first_step[r] + num_steps[r] - 1 of each request r.

        request_logit [R, G] is L[domain] + delta_r (see :meth:`request_shift`); previous_shift is z at each
        request's step before first_step (ignored where that is 0). Rows are ragged: request r's steps come
        after request r-1's, M = sum(num_steps) rows in all. Returns the head's calibrated conditional acceptance
        estimates [M, G], how many leading positions the target accepts if all G are verified [M], and the
        step-difficulty process z [M]. Two hashes per (request, step, position) feed everything: the accept
        uniform and the token noise (stream ACCEPT), the head's noise and, at position 0, the step innovation
        (stream NOISE). Each value depends on its key only, not on what else is drawn with it.
        """
        het, confidence = self.heterogeneity, self.confidence
        num_steps = np.asarray(num_steps, dtype=np.int64)
        row_request = np.repeat(np.arange(len(request_ids)), num_steps)  # [M]
        offset = np.add.accumulate(num_steps) - num_steps
        step_in = np.arange(len(row_request)) - offset[row_request]  # each row's step within its request's run
        steps = first_step[row_request] + step_in
        keys = crn.pack(request_ids[row_request][:, None], steps[:, None], np.arange(self.gamma)[None, :])
        bits = crn.hashed(self.seed, crn.ACCEPT, keys)
        noise_bits = None
        if het.step_logit_sd > 0.0 or confidence.noise_logit_sd > 0.0:
            noise_bits = crn.rehash(bits, crn.NOISE)
        logit = request_logit[row_request]
        shift = self._step_shift(steps, row_request, step_in, first_step, previous_shift, noise_bits)
        if het.step_logit_sd > 0.0:
            logit = logit + shift[:, None]
        if het.token_logit_sd > 0.0:
            logit = logit + het.token_logit_sd * ndtri(crn.low_uniform(bits))
        uniforms, accept_prob = crn.high_uniform(bits), expit(logit)
        if self.tree is None:
            accepted = uniforms < accept_prob
            true_accepted = np.add.reduce(np.logical_and.accumulate(accepted, axis=-1), axis=-1)
        else:  # rank 1 at each depth is the chain's acceptance; the misses' ranks from the same uniforms
            true_accepted = self.tree.accepted(uniforms, accept_prob)
        head = logit + confidence.bias_at(self.gamma) if confidence.has_bias else logit
        if confidence.noise_logit_sd > 0.0:
            head = head + confidence.noise_logit_sd * ndtri(crn.high_uniform(noise_bits))
        if self.temperatures is not None:
            head = head / self.temperatures
        conf = expit(head)  # [M, G], as every row has its own logits
        return conf, true_accepted, shift

    def _step_shift(self, steps, row_request, step_in, first_step, previous, noise_bits) -> np.ndarray:
        """z at each row: z_0 ~ N(0, sd^2); z_t = rho z_{t-1} + sqrt(1 - rho^2) sd eta_t (stationary AR(1)) along
        each request's run of steps; eta_t (and z_0 / sd at t = 0) is the normal from the low half of the NOISE
        bits at position 0. The filter runs over a [R, longest run] grid, one row per request."""
        het = self.heterogeneity
        sd, rho = het.step_logit_sd, het.step_correlation
        if sd == 0.0:
            return np.zeros(steps.shape)
        normal = ndtri(crn.low_uniform(noise_bits[:, 0]))
        innovation = np.where(steps == 0, sd, np.sqrt(1.0 - rho * rho) * sd) * normal
        grid = np.zeros((len(first_step), int(step_in.max(initial=-1)) + 1))
        grid[row_request, step_in] = innovation
        carried = np.where(first_step == 0, 0.0, previous)
        shift, _ = lfilter([1.0], [1.0, -rho], grid, axis=1, zi=(rho * carried)[:, None])
        return shift[row_request, step_in]
