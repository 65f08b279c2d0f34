"""Least squares on log residuals with standard errors, and the error summaries the profiles state."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from scipy.optimize import least_squares

SIGNIFICANT_DIGITS = 6


@dataclass(frozen=True)
class FitResult:
    """The solution ``x``, its standard errors (from the Jacobian and the residual variance), the log residuals."""

    x: np.ndarray
    standard_errors: np.ndarray
    residuals: np.ndarray
    jacobian: np.ndarray

    @property
    def rms_log_residual(self) -> float:
        return float(np.sqrt(np.mean(self.residuals ** 2)))

    def standard_errors_for(self, sigma: float) -> np.ndarray:
        """Standard errors if every log residual had standard deviation ``sigma`` (a known noise level)."""
        return sigma * np.sqrt(np.clip(np.diag(unit_covariance(self.jacobian)), 0.0, None))


def unit_covariance(jacobian: np.ndarray) -> np.ndarray:
    """``(J^T J)^-1``, with the columns scaled to unit norm first: parameters differ by many orders of magnitude
    (seconds per context token next to efficiencies), which would otherwise drown the small ones in round-off."""
    norms = np.linalg.norm(jacobian, axis=0)
    norms = np.where(norms > 0.0, norms, 1.0)
    scaled = jacobian / norms
    return np.linalg.pinv(scaled.T @ scaled) / np.outer(norms, norms)


def fit_log(predict: Callable[[np.ndarray], np.ndarray], measured: np.ndarray, x0: Sequence[float],
            lower: Sequence[float], upper: Sequence[float]) -> FitResult:
    """Minimise ``sum(log(predict(x) / measured)**2)`` within the bounds (deterministic: no random start)."""
    log_measured = np.log(np.asarray(measured, dtype=float))

    def residual(x: np.ndarray) -> np.ndarray:
        return np.log(predict(x)) - log_measured

    return fit_result(least_squares(residual, np.asarray(x0, dtype=float), bounds=(lower, upper), x_scale="jac",
                                    ftol=1e-12, xtol=1e-12, gtol=1e-12, max_nfev=5000, method="trf"))


def fit_result(solution) -> FitResult:
    """A :class:`FitResult` of a ``scipy.optimize.least_squares`` solution on log residuals: standard errors from
    its Jacobian and the residual variance."""
    n, k = solution.fun.size, solution.x.size
    variance = float(solution.fun @ solution.fun) / max(n - k, 1)
    covariance = variance * unit_covariance(solution.jac)
    return FitResult(solution.x, np.sqrt(np.clip(np.diag(covariance), 0.0, None)), solution.fun, solution.jac)


def error_summary(predicted: np.ndarray, measured: np.ndarray) -> dict[str, float]:
    """Points, median and largest absolute relative error of ``predicted`` against ``measured``."""
    rel = np.abs(np.asarray(predicted, dtype=float) / np.asarray(measured, dtype=float) - 1.0)
    return {"points": int(rel.size), "median_abs_rel_error": rounded(float(np.median(rel)), 3),
            "max_abs_rel_error": rounded(float(np.max(rel)), 3)}


def rounded(value: float, digits: int = SIGNIFICANT_DIGITS) -> float:
    """``value`` to ``digits`` significant digits (what the fit file stores)."""
    return float(f"{float(value):.{digits}g}")
