"""Sequential Temperature Scaling (STS): one temperature per draft position, fitted left to right.

The schedulers need absolute survival probabilities a_j = prod_{i<=j} c_i, so calibration targets the
cumulative product: position j's temperature T_j minimises the ECE of

    a_hat_j = prod_{i<j} c_cal_i * sigmoid(logit(c_hat_j) / T_j)

against the survival indicator S_j = prod_{i<=j} accepted_i, with T_1..T_{j-1} already fixed. Temperature
scaling is monotone, so the order of the estimates at each position is kept.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import expit, logit

from simlab.acceptance.metrics import ece

LOG_T_RANGE = (np.log(0.05), np.log(20.0))
COARSE_POINTS = 71
FINE_POINTS = 41
NUM_BINS = 15


def apply_sts(conf: np.ndarray, temperatures: np.ndarray) -> np.ndarray:
    """sigmoid(logit(conf) / T_k) over the last axis ``[..., gamma]``; exact at conf 0 and 1 (they stay 0 and 1)."""
    conf = np.asarray(conf, dtype=float)
    temperatures = np.asarray(temperatures, dtype=float)
    gamma = conf.shape[-1]
    if temperatures.shape[-1] < gamma:
        raise ValueError(f"{temperatures.shape[-1]} temperatures for {gamma} positions")
    if np.any(temperatures[..., :gamma] <= 0):
        raise ValueError("temperatures must be positive")
    return expit(logit(conf) / temperatures[..., :gamma])


def fit_sts(
    conf_raw: np.ndarray, accepted: np.ndarray, *, num_bins: int = NUM_BINS, usable: np.ndarray | None = None
) -> np.ndarray:
    """Temperatures [gamma] from raw confidences and chained outcomes, both [N, gamma].

    ``usable`` [N, gamma] (default: all) says which rows count at each position: a logged round whose verify
    length stopped before position j, or that has no confidence at or before j, tells nothing about S_j. It must
    be a prefix along each row. A position no row can be used at keeps T = 1."""
    conf_raw = np.asarray(conf_raw, dtype=float)
    accepted = np.asarray(accepted, dtype=bool)
    if conf_raw.ndim != 2 or conf_raw.shape != accepted.shape or conf_raw.shape[0] == 0:
        raise ValueError(f"need matching non-empty [N, gamma] arrays, got {conf_raw.shape} and {accepted.shape}")
    usable = np.ones(conf_raw.shape, dtype=bool) if usable is None else np.asarray(usable, dtype=bool)
    survival = np.logical_and.accumulate(accepted, axis=1)
    logits = logit(np.where(usable, conf_raw, 0.5))
    prefix = np.ones(conf_raw.shape[0])
    temperatures = np.ones(conf_raw.shape[1])
    for j in range(conf_raw.shape[1]):
        rows = usable[:, j]
        if rows.any():
            temperatures[j] = _best_temperature(logits[rows, j], prefix[rows], survival[rows, j], num_bins)
        prefix = prefix * expit(logits[:, j] / temperatures[j])
    return temperatures


def _best_temperature(logits: np.ndarray, prefix: np.ndarray, outcome: np.ndarray, num_bins: int) -> float:
    """Grid in log T, then a finer grid between the best point's neighbours; ties go to T nearest 1."""
    coarse = np.linspace(*LOG_T_RANGE, COARSE_POINTS)
    best = _argmin_ece(coarse, logits, prefix, outcome, num_bins)
    step = coarse[1] - coarse[0]
    fine = np.linspace(coarse[best] - step, coarse[best] + step, FINE_POINTS)
    fine = np.clip(fine, *LOG_T_RANGE)
    # math.exp, not np.exp: numpy's SIMD exp differs in the last bit between CPUs (docs/architecture.md)
    return math.exp(float(fine[_argmin_ece(fine, logits, prefix, outcome, num_bins)]))


def _argmin_ece(log_t: np.ndarray, logits: np.ndarray, prefix: np.ndarray, outcome: np.ndarray, num_bins: int) -> int:
    probs = prefix[None, :] * expit(logits[None, :] / np.exp(log_t)[:, None])
    errors = ece(probs, outcome, num_bins)
    tied = np.flatnonzero(errors <= errors.min() + 1e-12)
    return int(tied[np.argmin(np.abs(log_t[tied]))])
