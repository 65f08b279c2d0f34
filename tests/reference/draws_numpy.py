"""The numpy draws that simlab.acceptance.draw_kernel replaced, kept as the reference its bit equality is checked
against (tests/test_draw_kernel.py)."""

from __future__ import annotations

import numpy as np
from scipy.signal import lfilter
from scipy.special import expit, ndtri

from simlab.common import crn


def generate(draws, request_ids, request_logit, first_step, previous_shift, num_steps):
    """ArmDraws.generate as numpy expressions (see its docstring)."""
    self = draws
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
    shift = _step_shift(self, steps, row_request, step_in, first_step, previous_shift, noise_bits)
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
