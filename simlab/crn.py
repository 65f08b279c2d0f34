"""Common random numbers: draws keyed by (seed, stream, request, step, position), not by call order.

Every arm of a scenario asks for the draw of request r at its t-th step and k-th position and gets the same
number, however the arms interleave their work. This is a counter-based generator: the key is hashed with the
splitmix64 finaliser, so the draws are reproducible, independent across keys and cheap to vectorise.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtri

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)
_TO_UNIT = 2.0**-53

# Stream ids: one per kind of randomness, so that changing one model never shifts another's draws.
ACCEPT = 1  # uniform deciding accept/reject of a drafted position
TOKEN_NOISE = 2  # per-position deviation of true acceptance
STEP_NOISE = 3  # innovation of the step-to-step difficulty process
REQUEST_DIFFICULTY = 4  # per-request difficulty
CONFIDENCE_NOISE = 5  # error of the confidence head
STEP_INIT = 6  # initial value of the step difficulty process


def _mix(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> _S30)
    x = x * _M1
    x = x ^ (x >> _S27)
    x = x * _M2
    return x ^ (x >> _S31)


def keyed_bits(seed: int, stream: int, *keys: np.ndarray | int) -> np.ndarray:
    """64 random bits for each element of the broadcast ``keys`` (non-negative integers)."""
    with np.errstate(over="ignore"):
        h = _mix(np.asarray([(seed * 0x100000001B3 + stream) & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64) + _GOLDEN)
        for key in keys:
            h = _mix(h ^ (np.asarray(key, dtype=np.int64).astype(np.uint64) + _GOLDEN))
    return h


def keyed_uniform(seed: int, stream: int, *keys: np.ndarray | int) -> np.ndarray:
    """Uniform draws in the open interval (0, 1), one per element of the broadcast ``keys``."""
    return ((keyed_bits(seed, stream, *keys) >> np.uint64(11)).astype(np.float64) + 0.5) * _TO_UNIT


def keyed_normal(seed: int, stream: int, *keys: np.ndarray | int) -> np.ndarray:
    """Standard normal draws (inverse CDF of :func:`keyed_uniform`)."""
    return ndtri(keyed_uniform(seed, stream, *keys))
