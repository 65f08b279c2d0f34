"""Exact expectations of the acceptance model by Gauss–Hermite quadrature.

Under the model (docs/acceptance.md) the conditional acceptance of position k in one decode step is
``c_k = sigmoid(L_k + s + eps_k)`` with a shift ``s = delta_r + z_{r,t}`` common to the step's positions,
``s ~ N(0, request_logit_sd^2 + step_logit_sd^2)`` (the AR(1) process is stationary, so every step has the same
marginal), and ``eps_k ~ N(0, token_logit_sd^2)`` independent per position. Given ``s`` the positions are
independent, so

    a_j = E[prod_{i<=j} c_i] = E_s[ prod_{i<=j} g_i(s) ],   g_i(s) = E_eps[sigmoid(L_i + s + eps)],

two one-dimensional integrals, each done with probabilists' Gauss–Hermite nodes. With no heterogeneity every
node collapses onto the mean and the results are exact: for iid acceptance ``tau = (1 - alpha^(gamma+1)) /
(1 - alpha)``.

Two averages are on offer (``pooled``):

- ``pooled=False``: the expectation for one round whose shift is drawn from the model (every request weighs
  the same). This is the formula above.
- ``pooled=True``: what a benchmark or the simulator *reports* when it pools the rounds of many requests
  (``spec_decode_acceptance_length``, the paper's Table 1, per-position rates): a request at difficulty delta
  produces a given number of output tokens in ``1 / tau(delta)`` rounds per token, so hard requests contribute
  more rounds. Rounds are then weighted by ``1 / tau(delta)``, where tau(delta) = 1 + sum_j a_j(delta) is that
  request's long-run mean over its steps (for the ``gamma = len(logits)`` drafts being verified). Pooled tau is
  the harmonic mean ``1 / E_delta[1 / tau(delta)]``. The step term needs no weighting: steps are rounds.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Mapping, Union

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy.special import expit

from simlab.acceptance.spec import AcceptanceSpec
from simlab.config.acceptance import HeterogeneityConfig

DEFAULT_NODES = 64
POOLED_NODES = 32  # per dimension of the nested (request, step, token) quadrature
DomainMix = Union[str, Mapping[str, float]]


@lru_cache(maxsize=8)
def _standard_normal_nodes(num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes x and weights w (summing to 1) with sum w f(x) ~= E[f(X)], X ~ N(0, 1)."""
    x, w = hermegauss(num_nodes)
    return x, w / w.sum()


def _normal_nodes(sd: float, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    if sd == 0.0:
        return np.zeros(1), np.ones(1)
    x, w = _standard_normal_nodes(num_nodes)
    return sd * x, w


def shift_sd(heterogeneity: HeterogeneityConfig) -> float:
    """Standard deviation of the logit shift shared by all positions of one step (request + step terms)."""
    return float(np.hypot(heterogeneity.request_logit_sd, heterogeneity.step_logit_sd))


def _survival_given_shifts(logits: np.ndarray, shifts: np.ndarray, token_sd: float, num_nodes: int) -> np.ndarray:
    """[..., gamma]: prod_{i<=j} E_eps sigmoid(L_i + shift + eps) for each shift (any shape)."""
    base = logits + shifts[..., None]
    if token_sd == 0.0:
        g = expit(base)
    else:
        x, w = _standard_normal_nodes(num_nodes)
        g = expit(base[..., None] + token_sd * x) @ w
    return np.cumprod(g, axis=-1)


def _by_request(logits: np.ndarray, het: HeterogeneityConfig, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Request nodes' probabilities p [n] and a_j(delta_n) = E_{z,eps}[prod c | delta_n] as [n, gamma]."""
    deltas, p = _normal_nodes(het.request_logit_sd, num_nodes)
    steps, q = _normal_nodes(het.step_logit_sd, num_nodes)
    a = _survival_given_shifts(logits, deltas[:, None] + steps[None, :], het.token_logit_sd, num_nodes)
    return p, np.einsum("m,nmj->nj", q, a)


def request_tokens_per_round(
    logits: np.ndarray, heterogeneity: HeterogeneityConfig, request_shifts: np.ndarray, *, num_nodes: int = POOLED_NODES
) -> np.ndarray:
    """tau(delta): a request's long-run tokens per round (mean over its steps) at each request shift delta."""
    steps, q = _normal_nodes(heterogeneity.step_logit_sd, num_nodes)
    shifts = np.asarray(request_shifts, dtype=float)[..., None] + steps
    a = _survival_given_shifts(np.asarray(logits, dtype=float), shifts, heterogeneity.token_logit_sd, num_nodes)
    return 1.0 + np.einsum("m,...mj->...", q, a)


def _pooled_parts(logits: np.ndarray, het: HeterogeneityConfig, num_nodes: int) -> tuple[np.ndarray, float]:
    """Round-weighted sums: (sum_n p_n w_n a_n, sum_n p_n w_n) with w = 1 / tau(delta)."""
    p, a = _by_request(np.asarray(logits, dtype=float), het, num_nodes)
    weight = p / (1.0 + a.sum(axis=1))
    return weight @ a, float(weight.sum())


def survival_curve(
    logits: np.ndarray, heterogeneity: HeterogeneityConfig, *, pooled: bool = False, num_nodes: Union[int, None] = None
) -> np.ndarray:
    """Expected survival a_j = E[prod_{i<=j} c_i], j = 1..len(logits), given base logits L_1..L_gamma.

    ``pooled``: weight rounds as a benchmark pooling many requests does (module docstring); the weights use
    tau over all the given positions, so pass exactly the gamma drafts that are verified.
    """
    logits = np.asarray(logits, dtype=float)
    if pooled and heterogeneity.request_logit_sd > 0.0:
        numerator, denominator = _pooled_parts(logits, heterogeneity, num_nodes or POOLED_NODES)
        return numerator / denominator
    shifts, weights = _normal_nodes(shift_sd(heterogeneity), num_nodes or DEFAULT_NODES)
    return weights @ _survival_given_shifts(logits, shifts, heterogeneity.token_logit_sd, num_nodes or DEFAULT_NODES)


def tokens_per_round_from_logits(
    logits: np.ndarray, heterogeneity: HeterogeneityConfig, *, pooled: bool = False, num_nodes: Union[int, None] = None
) -> float:
    """Expected tokens per round tau = 1 + sum_j a_j when all len(logits) drafts are verified (bonus included)."""
    return 1.0 + float(survival_curve(logits, heterogeneity, pooled=pooled, num_nodes=num_nodes).sum())


def measured_conditional_from_logits(
    logits: np.ndarray, heterogeneity: HeterogeneityConfig, *, pooled: bool = False, num_nodes: Union[int, None] = None
) -> np.ndarray:
    """Per-position acceptance as a benchmark measures it: accepted at k / reached k = a_k / a_{k-1}.

    Heterogeneity makes it differ from sigmoid(L_k): the rows that reach late positions are the easy ones.
    """
    return _ratio_to_previous(survival_curve(logits, heterogeneity, pooled=pooled, num_nodes=num_nodes))


def iid_tokens_per_round(alpha: float, gamma: int) -> float:
    """Closed form (1 - alpha^(gamma+1)) / (1 - alpha); gamma + 1 at alpha = 1."""
    if alpha == 1.0:
        return float(gamma + 1)
    return (1.0 - alpha ** (gamma + 1)) / (1.0 - alpha)


def _mix(domain: DomainMix) -> dict[str, float]:
    if isinstance(domain, str):
        return {domain: 1.0}
    total = float(sum(domain.values()))
    if total <= 0 or any(v < 0 for v in domain.values()):
        raise ValueError(f"domain weights must be non-negative with a positive sum, got {dict(domain)}")
    return {d: float(v) / total for d, v in domain.items() if v > 0}


def expected_survival(
    spec: AcceptanceSpec, method: str, domain: DomainMix, gamma: int, *, pooled: bool = False,
    num_nodes: Union[int, None] = None,
) -> np.ndarray:
    """a_j, j = 1..gamma, for one method; ``domain`` is a name or a {name: weight} mix of requests.

    ``pooled=False``: the mean over rounds drawn from the model; ``pooled=True``: over the rounds a run or a
    benchmark with all gamma drafts verified pools (hard requests take more rounds; module docstring).
    """
    mix = _mix(domain)
    spec = spec.for_method(method)
    het = spec.heterogeneity
    match = {d: spec.match(method, d) for d in mix}  # a lookup drafter's rounds without a match propose nothing
    if not pooled or het.request_logit_sd == 0.0:
        if pooled:  # no request term: pooling reweights domains only
            taus = {d: _matched_tau(tokens_per_round_from_logits(spec.curve(method, d, gamma), het), match[d])
                    for d in mix}
            mix = {d: w / taus[d] for d, w in mix.items()}
            total = sum(mix.values())
            mix = {d: w / total for d, w in mix.items()}
        return sum(w * _matched(survival_curve(spec.curve(method, d, gamma), het, num_nodes=num_nodes), match[d])
                   for d, w in mix.items())
    if any(m != 1.0 for m in match.values()):  # match chances come with simlab's plain curves, drawn without spread
        raise ValueError(f"{method}: a match chance with request heterogeneity is not modelled")
    numerator, denominator = np.zeros(gamma), 0.0
    for d, w in mix.items():
        num, den = _pooled_parts(spec.curve(method, d, gamma), het, num_nodes or POOLED_NODES)
        numerator, denominator = numerator + w * num, denominator + w * den
    return numerator / denominator


def _matched(survival: np.ndarray, match: float) -> np.ndarray:
    return survival if match == 1.0 else match * survival


def _matched_tau(tau: float, match: float) -> float:
    return tau if match == 1.0 else 1.0 + match * (tau - 1.0)


def expected_tokens_per_round(
    spec: AcceptanceSpec, method: str, domain: DomainMix, gamma: int, *, pooled: bool = False,
    num_nodes: Union[int, None] = None,
) -> float:
    """tau = 1 + sum_{j<=gamma} a_j with every round verifying all gamma drafts (fixed gamma, bonus included).

    ``pooled=True`` is what Table 1 and the simulator's ``spec_decode_acceptance_length`` measure.
    """
    return 1.0 + float(expected_survival(spec, method, domain, gamma, pooled=pooled, num_nodes=num_nodes).sum())


def expected_conditional_acceptance(
    spec: AcceptanceSpec, method: str, domain: DomainMix, gamma: int, *, pooled: bool = False,
    num_nodes: Union[int, None] = None,
) -> np.ndarray:
    """Measured per-position acceptance a_k / a_{k-1} (k = 1..gamma) over the domain mix."""
    return _ratio_to_previous(expected_survival(spec, method, domain, gamma, pooled=pooled, num_nodes=num_nodes))


def _ratio_to_previous(a: np.ndarray) -> np.ndarray:
    previous = np.concatenate([[1.0], a[:-1]])
    return np.divide(a, previous, out=np.zeros_like(a), where=previous > 0)
