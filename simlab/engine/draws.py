"""Per-step acceptance draws: true conditional acceptance, outcomes and the confidence head's estimates.

Everything is keyed by (scenario seed, request id, decode step, position) through :mod:`simlab.crn`, so every arm
sees the same randomness for the same request and step, and a block of K steps drawn at once equals K steps
drawn one by one.
"""

from __future__ import annotations

from dataclasses import dataclass

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

    def request_shift(self, request_ids: np.ndarray) -> np.ndarray:
        """delta_r: each request's difficulty in logit space."""
        sd = self.heterogeneity.request_logit_sd
        if sd == 0.0:
            return np.zeros(len(request_ids))
        return sd * crn.keyed_normal(self.seed, crn.REQUEST_DIFFICULTY, request_ids)

    def draw(
        self,
        request_ids: np.ndarray,
        domains: np.ndarray,
        first_step: np.ndarray,
        request_shift: np.ndarray,
        previous_shift: np.ndarray,
        num_steps: int,
    ) -> BlockDraws:
        """Draw steps first_step[r] .. first_step[r] + num_steps - 1 of each request r.

        previous_shift is z at the step before the block (ignored where first_step is 0).
        """
        gamma = self.gamma
        het = self.heterogeneity
        rid = request_ids[None, :, None]
        steps = first_step[None, :] + np.arange(num_steps)[:, None]  # [K, R]
        step_key = steps[:, :, None]
        position = np.arange(gamma)[None, None, :]
        uniform, token_u = crn.keyed_uniform_pair(self.seed, crn.ACCEPT, rid, step_key, position)
        logit = self.base_logit[domains][None, :, :] + request_shift[None, :, None]
        shift = self._step_shift(request_ids, steps, previous_shift)
        if het.step_logit_sd > 0.0:
            logit = logit + shift[:, :, None]
        if het.token_logit_sd > 0.0:
            logit = logit + het.token_logit_sd * ndtri(token_u)
        accepted = uniform < expit(logit)
        true_accepted = np.cumprod(accepted, axis=-1).sum(axis=-1)
        head = logit + self.confidence.bias_logit
        if self.confidence.noise_logit_sd > 0.0:
            head = head + self.confidence.noise_logit_sd * crn.keyed_normal(
                self.seed, crn.CONFIDENCE_NOISE, rid, step_key, position
            )
        if self.temperatures is not None:
            head = head / self.temperatures
        conf = expit(np.broadcast_to(head, (num_steps, len(request_ids), gamma)))
        return BlockDraws(conf=conf, true_accepted=true_accepted, step_shift=shift)

    def _step_shift(self, request_ids: np.ndarray, steps: np.ndarray, previous: np.ndarray) -> np.ndarray:
        """z[r, t]: z_0 ~ N(0, sd^2); z_t = rho z_{t-1} + sqrt(1 - rho^2) sd eta_t (stationary AR(1))."""
        het = self.heterogeneity
        sd, rho = het.step_logit_sd, het.step_correlation
        if sd == 0.0:
            return np.zeros(steps.shape)
        eta = crn.keyed_normal(self.seed, crn.STEP_NOISE, request_ids[None, :], steps)
        start = sd * crn.keyed_normal(self.seed, crn.STEP_INIT, request_ids)
        innovation = np.where(steps == 0, start[None, :], np.sqrt(1.0 - rho * rho) * sd * eta)
        carried = np.where(steps[0] == 0, 0.0, previous)
        if steps.shape[0] == 1:
            return innovation + rho * carried[None, :]
        shift, _ = lfilter([1.0], [1.0, -rho], innovation, axis=0, zi=(rho * carried)[None, :])
        return shift
