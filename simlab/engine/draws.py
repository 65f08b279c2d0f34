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
class BlockDraws:
    """Draws for K consecutive steps of R requests with G drafted positions."""

    conf: np.ndarray  # [K, R, G] the head's (calibrated) conditional acceptance estimates
    true_accepted: np.ndarray  # [K, R] leading positions the target accepts if all G are verified
    step_shift: np.ndarray  # [K, R] the step-difficulty process z (carried to the next block)


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

    def draw(
        self,
        request_ids: np.ndarray,
        request_logit: np.ndarray,
        steps: np.ndarray,
        valid: np.ndarray,
        previous_shift: np.ndarray,
    ) -> BlockDraws:
        """Draw decode step ``steps[k, r]`` of request r for each block step k ([K, R]; where ``valid`` is False
        the request is not decoding yet and its draws are placeholders).

        request_logit [R, G] is L[domain] + delta_r (see :meth:`request_shift`); previous_shift is z at each
        request's last step before the block. Two hashes per (request, step, position) feed everything: the
        accept uniform and the token noise (stream ACCEPT), the head's noise and, at position 0, the step
        innovation (stream NOISE).
        """
        het, confidence = self.heterogeneity, self.confidence
        num_requests, gamma = request_logit.shape
        num_steps = steps.shape[0]
        keys = crn.pack(request_ids[None, :, None], steps[:, :, None], self._positions)
        bits = crn.hashed(self.seed, crn.ACCEPT, keys)
        noise_bits = None
        if het.step_logit_sd > 0.0 or confidence.noise_logit_sd > 0.0:
            noise_bits = crn.hashed(self.seed, crn.NOISE, keys)
        logit = request_logit[None, :, :]
        shift = self._step_shift(steps, valid, previous_shift, noise_bits)
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
        conf = expit(head)
        if conf.shape[0] != num_steps:
            conf = np.broadcast_to(conf, (num_steps, num_requests, gamma))
        return BlockDraws(conf=conf, true_accepted=true_accepted, step_shift=shift)

    @property
    def _positions(self) -> np.ndarray:
        return np.arange(self.gamma)[None, None, :]

    def _step_shift(self, steps: np.ndarray, valid: np.ndarray, previous: np.ndarray, noise_bits) -> np.ndarray:
        """z[r, t]: z_0 ~ N(0, sd^2); z_t = rho z_{t-1} + sqrt(1 - rho^2) sd eta_t (stationary AR(1)).

        eta_t (and z_0 / sd at t = 0) is the normal from the low half of the NOISE bits at position 0. Rows not
        decoding yet hold z = 0, so a request joining inside a block starts from z_0."""
        het = self.heterogeneity
        sd, rho = het.step_logit_sd, het.step_correlation
        if sd == 0.0:
            return np.zeros(steps.shape)
        normal = ndtri(crn.low_uniform(noise_bits[:, :, 0]))
        innovation = np.where(valid, np.where(steps == 0, sd, np.sqrt(1.0 - rho * rho) * sd) * normal, 0.0)
        carried = np.where((steps[0] == 0) | ~valid[0], 0.0, previous)
        if steps.shape[0] == 1:
            return innovation + rho * carried[None, :]
        shift, _ = lfilter([1.0], [1.0, -rho], innovation, axis=0, zi=(rho * carried)[None, :])
        return shift
