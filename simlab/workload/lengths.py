"""Token-length distributions: draw N integer lengths, rounded and clipped to [min, max] (always >= 1)."""

from __future__ import annotations

from typing import Optional

import numpy as np

from simlab.config.workload import (
    ConstantLength,
    EmpiricalLength,
    ExponentialLength,
    LognormalLength,
    UniformLength,
)

LengthConfig = ConstantLength | UniformLength | LognormalLength | ExponentialLength | EmpiricalLength

_LARGEST_LENGTH = float(2**53)  # beyond this a float no longer holds every integer


def draw_lengths(
    cfg: LengthConfig,
    num_requests: int,
    rng: np.random.Generator,
    pool: Optional[np.ndarray] = None,
) -> np.ndarray:
    """Draw ``num_requests`` lengths (int64, >= 1) from ``cfg`` using ``rng``.

    ``pool`` holds the lengths an ``empirical`` distribution resamples (uniformly, with replacement).
    """
    if isinstance(cfg, ConstantLength):
        return np.full(num_requests, cfg.value, dtype=np.int64)
    if isinstance(cfg, UniformLength):
        return rng.integers(cfg.low, cfg.high, size=num_requests, endpoint=True, dtype=np.int64)
    if isinstance(cfg, LognormalLength):
        mu = np.log(cfg.mean) - cfg.sigma**2 / 2.0
        return _round_and_clip(rng.lognormal(mu, cfg.sigma, size=num_requests), cfg.min, cfg.max)
    if isinstance(cfg, ExponentialLength):
        return _round_and_clip(rng.exponential(cfg.mean, size=num_requests), cfg.min, cfg.max)
    if isinstance(cfg, EmpiricalLength):
        if pool is None or len(pool) == 0:
            raise ValueError("an empirical length distribution needs the pool of lengths to resample")
        picks = pool[rng.integers(0, len(pool), size=num_requests)]
        return np.clip(picks, cfg.min, cfg.max if cfg.max is not None else None).astype(np.int64)
    raise TypeError(f"unknown length distribution {type(cfg).__name__}")


def _round_and_clip(values: np.ndarray, low: int, high: Optional[int]) -> np.ndarray:
    upper = float(high) if high is not None else _LARGEST_LENGTH
    return np.clip(np.rint(values), float(low), upper).astype(np.int64)


def describe_length(cfg: LengthConfig) -> dict:
    """A JSON-able description of a length distribution (its config fields)."""
    return cfg.model_dump(mode="json", exclude_none=True)
