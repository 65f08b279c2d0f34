"""Per-request domains: drawn from a weighted mix, or encoded from a trace's label column."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from simlab.workload.streams import DOMAINS, generator


def draw_domains(mix: Mapping[str, float], num_requests: int, seed: int) -> tuple[np.ndarray, tuple[str, ...]]:
    """Draw a domain per request from ``mix`` (weights, normalised). Returns (int16 indices, names).

    Names keep the mix's order. Request ``i``'s draw depends only on (seed, i), not on how many are drawn.
    """
    names = tuple(mix)
    weights = np.asarray([mix[name] for name in names], dtype=np.float64)
    cumulative = np.cumsum(weights / weights.sum())
    cumulative[-1] = 1.0
    uniforms = generator(seed, DOMAINS).random(num_requests)
    index = np.searchsorted(cumulative, uniforms, side="right")
    return np.minimum(index, len(names) - 1).astype(np.int16), names


def encode_labels(labels: np.ndarray) -> tuple[np.ndarray, tuple[str, ...]]:
    """Turn an array of domain labels into (int16 indices, sorted unique names)."""
    names, index = np.unique(labels.astype(str), return_inverse=True)
    return index.astype(np.int16).reshape(-1), tuple(str(name) for name in names)
