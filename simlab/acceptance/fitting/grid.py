"""Numerical pieces of the latent acceptance model's likelihood: the latent grid and the logistic-normal integral.

**Latent grid.** A round's shift is s = delta_r + z_t (request term plus a stationary AR(1) step term). Both are
put on equally spaced grids in standard-deviation units: delta = sigma_req * u_p, z = sigma_step * v_q, with
weights proportional to the normal density (the trapezoid rule, which converges geometrically for these smooth
integrands). The step term moves from v_q to v_q' with probability proportional to
exp(-(v_q' - rho v_q)^2 / (2 (1 - rho^2))) (a discretised AR(1) whose rows are normalised). The grids are fixed
in standard units, so sigma_req, sigma_step and rho enter the likelihood smoothly and exact gradients follow
from the posterior over grid points (Fisher's identity).

**Logistic-normal integral.** Given the shift, position k is accepted with probability
Lambda(m, v) = E[sigmoid(m + sqrt(v) Z)], Z ~ N(0, 1) (token noise, or the part of it the head does not see).
log Lambda and its derivatives in m and v are tabulated on a fine grid of m for the current v and interpolated;
at v = 0 they are exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy.special import expit, log_expit, logsumexp

REQUEST_POINTS = 25
REQUEST_SPAN_SDS = 4.5
STEP_POINTS = 15
STEP_SPAN_SDS = 4.0
MAX_CORRELATION = 0.95

TABLE_HALF_WIDTH = 50.0
TABLE_STEP = 0.1
NOISE_POINTS = 241
NOISE_SPAN_SDS = 9.0


@dataclass(frozen=True)
class LatentGrid:
    """u [P] (request term, standard units) with log weights, v [Q] (step term) with stationary log weights."""

    num_request: int = REQUEST_POINTS
    num_step: int = STEP_POINTS

    @cached_property
    def u(self) -> np.ndarray:
        return np.linspace(-REQUEST_SPAN_SDS, REQUEST_SPAN_SDS, self.num_request)

    @cached_property
    def v(self) -> np.ndarray:
        return np.linspace(-STEP_SPAN_SDS, STEP_SPAN_SDS, self.num_step)

    @cached_property
    def request_weights(self) -> np.ndarray:
        w = np.exp(-0.5 * self.u ** 2)
        return w / w.sum()

    @cached_property
    def step_weights(self) -> np.ndarray:
        w = np.exp(-0.5 * self.v ** 2)
        return w / w.sum()

    @property
    def num_states(self) -> int:
        return self.num_request * self.num_step

    def shifts(self, sigma_request: float, sigma_step: float) -> np.ndarray:
        """s at every state, [P * Q] with the request index major."""
        return (sigma_request * self.u[:, None] + sigma_step * self.v[None, :]).ravel()

    def transition(self, rho: float) -> tuple[np.ndarray, np.ndarray]:
        """T [Q, Q] (rows sum to 1) and dT/drho."""
        v = self.v
        diff = v[None, :] - rho * v[:, None]
        one_minus = 1.0 - rho * rho
        k = -diff ** 2 / (2.0 * one_minus)
        dk = diff * v[:, None] / one_minus - diff ** 2 * rho / one_minus ** 2
        k = k - k.max(axis=1, keepdims=True)
        t = np.exp(k)
        t /= t.sum(axis=1, keepdims=True)
        dt = t * (dk - (t * dk).sum(axis=1, keepdims=True))
        return t, dt


class LogisticNormal:
    """log Lambda(m, v) = log E[sigmoid(m + sqrt(v) Z)] for a fixed v, with d/dm and d/dv, at any m."""

    def __init__(self, variance: float) -> None:
        self.variance = float(variance)
        if self.variance > 0.0:
            self._build()

    def _build(self) -> None:
        m = np.arange(-TABLE_HALF_WIDTH, TABLE_HALF_WIDTH + TABLE_STEP / 2, TABLE_STEP)
        z = np.linspace(-NOISE_SPAN_SDS, NOISE_SPAN_SDS, NOISE_POINTS)
        log_w = -0.5 * z ** 2
        log_w -= logsumexp(log_w)
        x = m[:, None] + np.sqrt(self.variance) * z[None, :]
        log_terms = log_w[None, :] + log_expit(x)
        f = logsumexp(log_terms, axis=1)
        post = np.exp(log_terms - f[:, None])  # weights of the noise points given acceptance
        sig = expit(x)
        fv = 0.5 * (post * (1.0 - sig) * (1.0 - 2.0 * sig)).sum(axis=1)  # (1/2) E[s''] / Lambda
        f1 = (post * (1.0 - sig)).sum(axis=1)  # E[s'] / Lambda with s' = s (1 - s)
        fv1 = np.gradient(fv, TABLE_STEP, edge_order=2)
        self._m0 = m[0]
        # per interval, cubic Hermite coefficients (in t = fraction of the interval) of f and of fv
        coef = np.hstack([_hermite_coefficients(f, f1 * TABLE_STEP), _hermite_coefficients(fv, fv1 * TABLE_STEP)])
        self._c = [np.ascontiguousarray(coef[:, i]) for i in range(8)]

    def __call__(self, m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(log Lambda, d/dm, d/dv) at ``m`` (any shape)."""
        if self.variance == 0.0:
            sig = expit(m)
            return log_expit(m), 1.0 - sig, 0.5 * (1.0 - sig) * (1.0 - 2.0 * sig)
        clipped = np.clip(m, -TABLE_HALF_WIDTH, TABLE_HALF_WIDTH)
        position = (clipped - self._m0) * (1.0 / TABLE_STEP)
        low = np.minimum(position.astype(np.intp), len(self._c[0]) - 1)
        t = position - low
        c = [np.take(col, low) for col in self._c]
        f = ((c[3] * t + c[2]) * t + c[1]) * t + c[0]
        slope = ((3.0 * c[3] * t + 2.0 * c[2]) * t + c[1]) * (1.0 / TABLE_STEP)
        fv = ((c[7] * t + c[6]) * t + c[5]) * t + c[4]
        clipped -= m
        f -= slope * clipped  # linear beyond the table (log Lambda is asymptotically linear in m)
        return f, slope, fv


def _hermite_coefficients(y: np.ndarray, d: np.ndarray) -> np.ndarray:
    """[n - 1, 4]: c0..c3 of the cubic on each interval with values y and slopes d (in interval units) at its ends."""
    y0, y1, d0, d1 = y[:-1], y[1:], d[:-1], d[1:]
    return np.stack([y0, d0, 3 * (y1 - y0) - 2 * d0 - d1, 2 * (y0 - y1) + d0 + d1], axis=1)
