"""Per-step acceptance draws: true conditional acceptance, outcomes and the confidence head's estimates.

Everything is keyed by (scenario seed, request id, decode step, position) through :mod:`simlab.crn`, so every arm
sees the same randomness for the same request and step, and a block of K steps drawn at once equals K steps
drawn one by one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
from scipy.signal import lfilter
from scipy.special import expit, ndtri

from simlab import crn
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

    def request_shift(self, num_requests: int) -> Optional[np.ndarray]:
        """delta_r for requests 0..num_requests-1 (None when requests do not differ)."""
        sd = self.heterogeneity.request_logit_sd
        if sd == 0.0:
            return None
        return sd * crn.keyed_normal(self.seed, crn.REQUEST_DIFFICULTY, np.arange(num_requests))

    def generate(
        self, request_ids: np.ndarray, request_logit: np.ndarray, first_step: np.ndarray,
        previous_shift: np.ndarray, num_steps: int,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Draws of decode steps first_step[r] .. first_step[r] + num_steps - 1 of each request r.

        request_logit [R, G] is L[domain] + delta_r (see :meth:`request_shift`); previous_shift is z at each
        request's step before first_step (ignored where that is 0). Returns the head's calibrated conditional
        acceptance estimates [R, T, G], how many leading positions the target accepts if all G are verified
        [R, T], and the step-difficulty process z [R, T]. Two hashes per (request, step, position) feed
        everything: the accept uniform and the token noise (stream ACCEPT), the head's noise and, at position 0,
        the step innovation (stream NOISE).
        """
        het, confidence = self.heterogeneity, self.confidence
        steps = first_step[:, None] + np.arange(num_steps)[None, :]  # [R, T]
        keys = crn.pack(request_ids[:, None, None], steps[:, :, None], np.arange(self.gamma)[None, None, :])
        bits = crn.hashed(self.seed, crn.ACCEPT, keys)
        noise_bits = None
        if het.step_logit_sd > 0.0 or confidence.noise_logit_sd > 0.0:
            noise_bits = crn.rehash(bits, crn.NOISE)
        logit = request_logit[:, None, :]
        shift = self._step_shift(steps, previous_shift, noise_bits)
        if het.step_logit_sd > 0.0:
            logit = logit + shift[:, :, None]
        if het.token_logit_sd > 0.0:
            logit = logit + het.token_logit_sd * ndtri(crn.low_uniform(bits))
        accepted = crn.high_uniform(bits) < expit(logit)
        true_accepted = np.add.reduce(np.logical_and.accumulate(accepted, axis=-1), axis=-1)
        head = logit + confidence.bias_logit if confidence.bias_logit else logit
        if confidence.noise_logit_sd > 0.0:
            head = head + confidence.noise_logit_sd * ndtri(crn.high_uniform(noise_bits))
        if self.temperatures is not None:
            head = head / self.temperatures
        conf = np.broadcast_to(expit(head), steps.shape + (self.gamma,))
        return conf, true_accepted, shift

    def _step_shift(self, steps: np.ndarray, previous: np.ndarray, noise_bits) -> np.ndarray:
        """z[r, t]: z_0 ~ N(0, sd^2); z_t = rho z_{t-1} + sqrt(1 - rho^2) sd eta_t (stationary AR(1)) along
        each row of ``steps`` [R, T]; eta_t (and z_0 / sd at t = 0) is the normal from the low half of the NOISE
        bits at position 0."""
        het = self.heterogeneity
        sd, rho = het.step_logit_sd, het.step_correlation
        if sd == 0.0:
            return np.zeros(steps.shape)
        normal = ndtri(crn.low_uniform(noise_bits[:, :, 0]))
        innovation = np.where(steps == 0, sd, np.sqrt(1.0 - rho * rho) * sd) * normal
        carried = np.where(steps[:, 0] == 0, 0.0, previous)
        shift, _ = lfilter([1.0], [1.0, -rho], innovation, axis=1, zi=(rho * carried)[:, None])
        return shift
