"""Compiled passes of :meth:`simlab.acceptance.draws.ArmDraws.generate` (numba): the keyed hashes and their
uniforms, then the step-difficulty process, the logits, the accepted counts and the head's confidences, each row's
positions in one loop. The inverse normal CDF between the two passes stays SciPy's ``ndtri`` (its values define the
draws); the logistic function is ``1 / (1 + exp(-x))``, as SciPy's ``expit`` computes it.

Every value is computed with the same floating-point operations in the same order as the numpy expressions it
replaced (tests/reference/draws_numpy.py keeps them; tests/test_draw_kernel.py checks bit equality).
"""

from __future__ import annotations

import math

import numpy as np

from simlab.common.jit import njit

_TO_UNIT_32 = 2.0**-32


@njit(cache=True, inline="always")
def _mix(x):
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@njit(cache=True, inline="always")
def _high(bits):
    return (float(bits >> np.uint64(32)) + 0.5) * _TO_UNIT_32


@njit(cache=True, inline="always")
def _low(bits):
    return (float(bits & np.uint64(0xFFFFFFFF)) + 0.5) * _TO_UNIT_32


@njit(cache=True)
def uniforms(base_accept, base_noise, request_ids, first_step, num_steps, gamma, want_token, want_head, want_shift):
    """Per row (request r's steps first_step[r] .. + num_steps[r] - 1, requests in order) and position: the accept
    uniform (ACCEPT bits, high half), the token-noise uniform (low half), the head-noise uniform (the NOISE rehash,
    high half) and, at position 0, the step innovation's uniform (the rehash's low half). Arrays not wanted are
    empty. Also each row's request index, step and step within its run."""
    num_rows = 0
    for r in range(num_steps.size):
        num_rows += num_steps[r]
    accept_u = np.empty((num_rows, gamma))
    token_u = np.empty((num_rows if want_token else 0, gamma))
    head_u = np.empty((num_rows if want_head else 0, gamma))
    shift_u = np.empty(num_rows if want_shift else 0)
    row_request = np.empty(num_rows, np.int64)
    steps = np.empty(num_rows, np.int64)
    step_in = np.empty(num_rows, np.int64)
    golden = np.uint64(0x9E3779B97F4A7C15)
    m = 0
    for r in range(num_steps.size):
        request_key = np.uint64(request_ids[r]) << np.uint64(32)
        for k in range(num_steps[r]):
            step = first_step[r] + k
            row_request[m], steps[m], step_in[m] = r, step, k
            key = request_key | (np.uint64(step) << np.uint64(8))
            for g in range(gamma):
                bits = _mix(_mix((key | np.uint64(g)) ^ base_accept) + golden)
                accept_u[m, g] = _high(bits)
                if want_token:
                    token_u[m, g] = _low(bits)
                if want_head or (want_shift and g == 0):
                    noise = _mix(bits ^ base_noise)
                    if want_head:
                        head_u[m, g] = _high(noise)
                    if want_shift and g == 0:
                        shift_u[m] = _low(noise)
            m += 1
    return row_request, steps, step_in, accept_u, token_u, head_u, shift_u


@njit(cache=True, inline="always")
def _expit(x):
    return 1.0 / (1.0 + math.exp(-x))


@njit(cache=True)
def outcomes(request_logit, row_request, steps, step_in, first_step, previous_shift, accept_u, shift_normal,
             step_sd, innovation_sd, rho, token_normal, token_sd, bias, head_normal, noise_sd, temperatures,
             want_conf, want_prob):
    """The step-difficulty process z [M] (a stationary AR(1) along each request's run, continuing
    ``previous_shift`` after a first step above 0), each row's logits (the request's, plus z, plus the token noise),
    the accepted count (leading positions whose accept uniform is below expit(logit)) [M], the head's calibrated
    confidences [M, G] (logit + bias, plus the head noise, over the temperatures; empty unless ``want_conf``) and
    the acceptance probabilities [M, G] (empty unless ``want_prob``). A zero ``step_sd``, ``token_sd`` or
    ``noise_sd`` leaves its term out; an empty ``bias`` or ``temperatures`` too."""
    num_rows, gamma = accept_u.shape
    shift = np.zeros(num_rows)
    accepted = np.zeros(num_rows, np.int64)
    conf = np.empty((num_rows if want_conf else 0, gamma))
    prob = np.empty((num_rows if want_prob else 0, gamma))
    has_bias, has_temperature = bias.size > 0, temperatures.size > 0
    z = 0.0
    for m in range(num_rows):
        r = row_request[m]
        if step_sd > 0.0:
            scale = step_sd if steps[m] == 0 else innovation_sd
            x = scale * shift_normal[m]
            if step_in[m] == 0:
                carried = 0.0 if first_step[r] == 0 else previous_shift[r]
                z = rho * carried + x
            else:
                z = rho * z + x
            shift[m] = z
        run = True
        for g in range(gamma):
            logit = request_logit[r, g]
            if step_sd > 0.0:
                logit = logit + z
            if token_sd > 0.0:
                logit = logit + token_sd * token_normal[m, g]
            p = _expit(logit)
            if want_prob:
                prob[m, g] = p
            if run and accept_u[m, g] < p:
                accepted[m] += 1
            else:
                run = False
            if want_conf:
                head = logit + bias[g] if has_bias else logit
                if noise_sd > 0.0:
                    head = head + noise_sd * head_normal[m, g]
                if has_temperature:
                    head = head / temperatures[g]
                conf[m, g] = _expit(head)
    return shift, accepted, conf, prob


def load() -> None:
    """Load both passes (from numba's cache; compiled there on their first use) by drawing two tiny rows."""
    ids, counts = np.array([0, 1], dtype=np.int64), np.array([1, 1], dtype=np.int64)
    rows, steps, within, accept_u, token_u, head_u, shift_u = uniforms(np.uint64(1), np.uint64(2), ids, ids, counts,
                                                                       2, True, True, True)
    outcomes(np.zeros((2, 2)), rows, steps, within, ids, np.zeros(2), accept_u, shift_u, 0.5, 0.4, 0.6, token_u,
             0.5, np.zeros(2), head_u, 0.5, np.ones(2), True, True)
