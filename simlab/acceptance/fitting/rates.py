"""Measured conditional acceptance per position with 95 % Wilson score intervals."""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

from simlab.acceptance.logs.parsed import PositionCounts

CONFIDENCE = 0.95


def wilson_interval(accepted: np.ndarray, reached: np.ndarray, confidence: float = CONFIDENCE
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of accepted / reached, elementwise (NaN where nothing was reached)."""
    accepted, reached = np.asarray(accepted, dtype=float), np.asarray(reached, dtype=float)
    z = norm.ppf(0.5 + confidence / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = accepted / reached
        denominator = 1.0 + z * z / reached
        center = (p + z * z / (2 * reached)) / denominator
        half = z * np.sqrt(p * (1 - p) / reached + z * z / (4 * reached * reached)) / denominator
    bad = reached <= 0
    return np.where(bad, np.nan, center - half), np.where(bad, np.nan, center + half)


def rate_table(counts: PositionCounts) -> dict:
    """JSON/YAML-able per-position summary: rate, interval and counts (no interval for rates-only logs)."""
    rates = counts.rates
    table = {"rate": _rounded(rates), "counts": counts.kind}
    if counts.kind != "rates":
        low, high = wilson_interval(counts.accepted, counts.reached)
        table.update({"ci95_low": _rounded(low), "ci95_high": _rounded(high),
                      "reached": [int(round(x)) for x in counts.reached],
                      "accepted": [int(round(x)) for x in counts.accepted]})
    return table


def _rounded(values: np.ndarray, digits: int = 5) -> list:
    return [None if not np.isfinite(v) else round(float(v), digits) for v in values]
