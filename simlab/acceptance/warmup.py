"""Warm-up samples: draft rounds drawn from the acceptance model, to fit and evaluate confidence calibration.

Each row is one (request, step) round with ``gamma`` drafted positions; rows are independent. The step process
is stationary, so a round's step term has the marginal N(0, step_logit_sd^2) whatever the step correlation.

``pooled`` (default): rows are distributed like the rounds of a run (or of a benchmark) with all gamma drafts
verified. A request at difficulty delta in domain d needs 1 / tau(d, delta) rounds per output token, so hard
requests and hard domains contribute more rounds: candidates (d, delta) are drawn with the given request shares
and resampled with weights 1 / tau(d, delta). ``pooled=False`` draws every row's request afresh (each request
weighs the same).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np
from scipy.special import expit

from simlab.acceptance.expected import request_tokens_per_round
from simlab.acceptance.spec import AcceptanceSpec

GRID_SDS = 8.0
GRID_POINTS = 161


@dataclass(frozen=True)
class WarmupSample:
    """``num_samples`` draft rounds of ``gamma`` positions.

    c_true:   [N, gamma] true conditional acceptance probability of each position.
    conf_raw: [N, gamma] the confidence head's raw estimate c_hat (before calibration).
    accepted: [N, gamma] bool, the chained outcome: position k is accepted only if 1..k-1 were.
    domain:   [N] index into ``domains`` of each row's domain.
    domains:  the domain names, in the order of ``domain``'s indices.
    """

    c_true: np.ndarray
    conf_raw: np.ndarray
    accepted: np.ndarray
    domain: np.ndarray
    domains: tuple[str, ...]

    def __len__(self) -> int:
        return self.c_true.shape[0]

    def rows(self, index: slice | np.ndarray) -> "WarmupSample":
        """The sub-sample of the selected rows."""
        return WarmupSample(
            self.c_true[index], self.conf_raw[index], self.accepted[index], self.domain[index], self.domains
        )

    @property
    def survival(self) -> np.ndarray:
        """[N, gamma] indicator S_j that positions 1..j were all accepted (equal to ``accepted``: it is chained)."""
        return self.accepted


def normalised_weights(domain_weights: Mapping[str, float]) -> dict[str, float]:
    """Weights divided by their sum, dropping zero weights (ValueError when none is positive or one is negative)."""
    values = [float(w) for w in domain_weights.values()]
    if any(w < 0 for w in values) or sum(values) <= 0:
        raise ValueError(f"domain weights must be non-negative with a positive sum, got {dict(domain_weights)}")
    total = sum(values)
    return {d: float(w) / total for d, w in domain_weights.items() if float(w) > 0}


def warmup_sample(
    spec: AcceptanceSpec,
    method: str,
    domain_weights: Mapping[str, float],
    gamma: int,
    num_samples: int,
    seed: int,
    *,
    pooled: bool = True,
) -> WarmupSample:
    """Draw ``num_samples`` rounds: domain and request shift, step shift, token terms, the head and outcomes.

    ``domain_weights`` are shares of requests (normalised here).
    """
    rng = np.random.default_rng(seed)
    weights = normalised_weights(domain_weights)
    domains = tuple(weights)
    base = spec.logits(method, domains, gamma)  # [D, gamma]
    het, head = spec.heterogeneity, spec.confidence
    domain = rng.choice(len(domains), size=num_samples, p=np.array([weights[d] for d in domains]))
    request = het.request_logit_sd * rng.standard_normal(num_samples)
    if pooled:
        rounds_per_token = 1.0 / _tau_at(spec, base, domain, request)
        pick = rng.choice(num_samples, size=num_samples, p=rounds_per_token / rounds_per_token.sum())
        domain, request = domain[pick], request[pick]
    step = het.step_logit_sd * rng.standard_normal(num_samples)
    token = het.token_logit_sd * rng.standard_normal((num_samples, gamma))
    logit_true = base[domain] + (request + step)[:, None] + token
    head_noise = head.noise_logit_sd * rng.standard_normal((num_samples, gamma))
    uniform = rng.random((num_samples, gamma))
    c_true = expit(logit_true)
    conf_raw = expit(logit_true + head.bias_at(gamma) + head_noise)
    accepted = np.logical_and.accumulate(uniform < c_true, axis=1)
    return WarmupSample(c_true=c_true, conf_raw=conf_raw, accepted=accepted, domain=domain, domains=domains)


def _tau_at(spec: AcceptanceSpec, base: np.ndarray, domain: np.ndarray, request: np.ndarray) -> np.ndarray:
    """tau(d, delta) of each row, interpolated on a grid of request shifts (exact when there is no request term)."""
    het = spec.heterogeneity
    sd = het.request_logit_sd
    grid = np.linspace(-GRID_SDS * sd, GRID_SDS * sd, GRID_POINTS) if sd > 0 else np.zeros(1)
    out = np.empty(len(request))
    for d in range(base.shape[0]):
        rows = domain == d
        taus = request_tokens_per_round(base[d], het, grid)
        out[rows] = np.interp(request[rows], grid, taus) if sd > 0 else taus[0]
    return out
