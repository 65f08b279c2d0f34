"""Maximum-likelihood fit of the latent acceptance model to draft rounds, with standard errors.

What is estimated depends on what the log holds:

- rounds tied to requests: base logits, request_logit_sd, step_logit_sd and step_correlation (the request and
  step terms are told apart by how outcomes persist within a request);
- confidences as well: token_logit_sd, bias_logit and noise_logit_sd (how well the head predicts each position,
  and how far off it is). Without confidences the token term is not identified from chained outcomes (a curve
  with rescaled logits fits them as well) and stays 0;
- rounds not tied to requests (STS shards): only the total shift sd sqrt(request^2 + step^2) is identified.

The optimiser is L-BFGS-B on the exact log-likelihood (:mod:`.likelihood`) with its analytic gradient. Standard
errors are the sandwich H^-1 J H^-1 (H: observed information, from finite differences of the gradient; J: outer
products of per-request scores, requests being clusters; a request seen under several arms is one cluster).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np
from scipy.optimize import minimize
from scipy.special import logit

from simlab.acceptance.fitting.grid import MAX_CORRELATION
from simlab.acceptance.fitting.likelihood import SHARED, RoundsLikelihood
from simlab.acceptance.logs.parsed import Rounds

LOGIT_BOUND = 12.0
SD_BOUND = 6.0
MIN_NOISE_SD = 0.02
MIN_CLUSTERS_FOR_SANDWICH = 20
FAILED_STEP = 1e6  # the objective at a non-finite trial point (a per-round -log-likelihood is tens at most)

BOUNDS = {
    "request_logit_sd": (0.0, SD_BOUND),
    "step_logit_sd": (0.0, SD_BOUND),
    "step_correlation": (0.0, MAX_CORRELATION),
    "token_logit_sd": (0.0, SD_BOUND),
    "bias_logit": (-SD_BOUND, SD_BOUND),
    "noise_logit_sd": (MIN_NOISE_SD, SD_BOUND),
}


@dataclass
class LatentFit:
    """Fitted base logits per (method, domain) and shared parameters, with standard errors (None where the
    parameter was fixed, or where the information matrix is singular)."""

    logits: dict[tuple[str, str], np.ndarray]
    logit_se: dict[tuple[str, str], Optional[np.ndarray]]
    shared: dict[str, float]
    shared_se: dict[str, Optional[float]]
    free: list[str]
    loglik: float
    num_rounds: int
    num_runs: int
    num_clusters: int
    se_method: str
    converged: bool
    message: str
    evaluations: int
    at_bound: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def fit_latent(
    rounds: Rounds,
    groups: dict[tuple[str, str], int],
    start_rates: dict[tuple[str, str], np.ndarray],
    *,
    progress: Optional[Callable[[int, float], None]] = None,
    standard_errors: bool = True,
) -> LatentFit:
    """Fit every group's base logits and the shared parameters the rounds identify (module docstring)."""
    lik = RoundsLikelihood(rounds, groups)
    sequences, head = rounds.has_sequences, lik.has_head
    free_shared = ["request_logit_sd"]
    if sequences:
        free_shared += ["step_logit_sd", "step_correlation"]
    if head:
        free_shared += ["token_logit_sd", "bias_logit", "noise_logit_sd"]
    theta0 = _start(lik, rounds, groups, start_rates, head)
    free = np.concatenate([np.arange(lik.num_logits), [lik.num_logits + SHARED.index(n) for n in free_shared]])
    bounds = [(-LOGIT_BOUND, LOGIT_BOUND)] * lik.num_logits + [BOUNDS[n] for n in free_shared]
    theta, result, count = maximise(lik, theta0, free, bounds, progress=progress,
                                    options={"maxiter": 1000, "ftol": 1e-12, "gtol": 1e-7, "maxcor": 20})
    final = lik.evaluate(theta, scores=standard_errors)
    se = np.full(len(theta), np.nan)
    se_method = "none"
    if standard_errors:
        se, se_method = sandwich_errors(lik, theta, free, final, bounds, objective_count=count)
    names = [f"L[{i}]" for i in range(lik.num_logits)] + list(SHARED)
    at_bound = [names[i] for i, (lo, hi) in zip(free, bounds) if theta[i] <= lo + 1e-6 or theta[i] >= hi - 1e-6]
    logits, logit_se = group_logits(lik, groups, theta, se)
    shared = {name: float(theta[lik.num_logits + i]) for i, name in enumerate(SHARED)}
    shared_se = {name: (float(se[lik.num_logits + i]) if name in free_shared and np.isfinite(se[lik.num_logits + i])
                        else None) for i, name in enumerate(SHARED)}
    return LatentFit(
        logits=logits, logit_se=logit_se, shared=shared, shared_se=shared_se, free=free_shared,
        loglik=final.loglik, num_rounds=len(rounds), num_runs=lik.layout.num_runs,
        num_clusters=lik.layout.num_clusters, se_method=se_method, converged=bool(result.success),
        message=str(result.message), evaluations=count[0], at_bound=at_bound,
    )


def maximise(lik: RoundsLikelihood, theta0: np.ndarray, free: np.ndarray, bounds: list, *, options: dict,
             progress: Optional[Callable[[int, float], None]] = None) -> tuple[np.ndarray, Any, list[int]]:
    """L-BFGS-B on the log-likelihood per round over the ``free`` entries of ``theta0`` (the rest stay fixed).
    Returns the parameters, scipy's result and the number of evaluations (a one-item list, counted on)."""
    scale = 1.0 / max(1, lik.num_rounds)
    count = [0]

    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        theta = theta0.copy()
        theta[free] = x
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # handled just below
            ev = lik.evaluate(theta)
        count[0] += 1
        if not (np.isfinite(ev.loglik) and np.isfinite(ev.grad[free]).all()):
            # a trial point where the forward pass underflows (an extreme first step of the optimiser): a failed
            # step, so that the line search backs off instead of stopping the fit at its start
            return FAILED_STEP, np.zeros(len(free))
        if progress is not None:
            progress(count[0], -ev.loglik * scale)
        return -ev.loglik * scale, -ev.grad[free] * scale

    result = minimize(objective, theta0[free], jac=True, method="L-BFGS-B", bounds=bounds, options=options)
    theta = theta0.copy()
    theta[free] = result.x
    return theta, result, count


def group_logits(lik: RoundsLikelihood, groups, theta: np.ndarray, se: np.ndarray):
    """Each group's base logits and their standard errors (None where none is finite) from ``theta`` and ``se``."""
    logits, logit_se = {}, {}
    for g, key in enumerate(groups):
        lo, hi = lik.offsets[g], lik.offsets[g + 1]
        logits[key] = theta[lo:hi].copy()
        logit_se[key] = None if not np.isfinite(se[lo:hi]).any() else se[lo:hi].copy()
    return logits, logit_se


def _start(lik: RoundsLikelihood, rounds: Rounds, groups, start_rates, head: bool) -> np.ndarray:
    theta = np.zeros(lik.num_params)
    for g, key in enumerate(groups):
        rates = np.clip(np.nan_to_num(np.asarray(start_rates[key], dtype=float), nan=0.5), 0.02, 0.98)
        theta[lik.offsets[g]:lik.offsets[g + 1]] = logit(rates[: groups[key]])
    values = {"request_logit_sd": 0.5, "step_logit_sd": 0.5 if rounds.has_sequences else 0.0,
              "step_correlation": 0.5 if rounds.has_sequences else 0.0, "token_logit_sd": 0.0, "bias_logit": 0.0,
              "noise_logit_sd": 1.0}
    if head:
        residual = lik.conf_value - theta[lik.conf_param]
        values["bias_logit"] = float(np.clip(np.median(residual), -3, 3))
        spread = float(np.var(residual))
        values["token_logit_sd"] = float(np.sqrt(max(spread, 0.5) / 2))
        values["noise_logit_sd"] = float(np.sqrt(max(spread, 0.5) / 2))
    for i, name in enumerate(SHARED):
        theta[lik.num_logits + i] = values[name]
    return theta


def sandwich_errors(lik, theta, free, final, bounds, objective_count) -> tuple[np.ndarray, str]:
    """Sandwich (or, with few clusters, model-based) standard errors of the free parameters."""
    n = len(free)
    hessian = np.zeros((n, n))
    for j, index in enumerate(free):
        lo, hi = bounds[j]
        step = 1e-4 * max(1.0, abs(theta[index]))
        sign = -1.0 if theta[index] + step > hi else 1.0
        shifted = theta.copy()
        shifted[index] += sign * step
        grad = lik.evaluate(shifted).grad[free]
        objective_count[0] += 1
        hessian[:, j] = -(grad - final.grad[free]) / (sign * step)
    hessian = 0.5 * (hessian + hessian.T)
    se = np.full(len(theta), np.nan)
    try:
        eigenvalues = np.linalg.eigvalsh(hessian)
        if eigenvalues.min() <= 1e-10 * max(1.0, eigenvalues.max()):
            return se, "singular information matrix: some parameters are not identified by this log"
        inverse = np.linalg.inv(hessian)
    except np.linalg.LinAlgError:
        return se, "singular information matrix"
    scores = final.cluster_scores[:, free]
    if scores.shape[0] >= MIN_CLUSTERS_FOR_SANDWICH:
        meat = scores.T @ scores
        covariance = inverse @ meat @ inverse
        method = f"sandwich, clustered by request ({scores.shape[0]} clusters)"
    else:
        covariance = inverse
        method = "observed information"
    se[free] = np.sqrt(np.clip(np.diag(covariance), 0.0, None))
    return se, method
