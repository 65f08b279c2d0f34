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
ACCEPT = 1  # per (request, step, position): accept/reject uniform (high 32 bits), token noise (low 32 bits)
NOISE = 2  # rehash of ACCEPT bits: head noise (high 32 bits); position 0's low bits: step innovation
REQUEST_DIFFICULTY = 4  # per request: difficulty
RECORDING = 5  # per request: which recorded request it replays (acceptance kind trace)
MATCH = 6  # per (request, step): whether a lookup drafter (ngram, suffix) finds the context repeating


def _mix(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> _S30)
    x = x * _M1
    x = x ^ (x >> _S27)
    x = x * _M2
    return x ^ (x >> _S31)


_FIELD_SHIFTS = (np.uint64(32), np.uint64(8), np.uint64(0))
_BASES: dict[tuple[int, int], np.ndarray] = {}


def _base(seed: int, stream: int) -> np.ndarray:
    key = (seed, stream)
    if key not in _BASES:
        with np.errstate(over="ignore"):
            h = _mix(np.array([seed & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64) + _GOLDEN)
            _BASES[key] = _mix(h ^ np.uint64(stream) + _GOLDEN)
    return _BASES[key]


def pack(*keys: np.ndarray | int) -> np.ndarray:
    """Pack one to three non-negative integer keys into one word (first key < 2**32, second < 2**24,
    third < 2**8: request id, step, position), so distinct keys never collide before hashing."""
    if not 1 <= len(keys) <= 3:
        raise ValueError("keyed draws take one to three keys")
    packed = None
    for key, shift in zip(keys, _FIELD_SHIFTS):
        field = np.asarray(key, dtype=np.int64).astype(np.uint64)
        if shift:
            field = field << shift
        packed = field if packed is None else packed | field
    return packed


def base(seed: int, stream: int) -> np.uint64:
    """The word a seed and stream's keys are xored with before hashing (compiled code hashes with it)."""
    return _base(seed, stream)[0]


def hashed(seed: int, stream: int, packed: np.ndarray) -> np.ndarray:
    """64 random bits per packed key (see :func:`pack`) for one seed and stream."""
    with np.errstate(over="ignore"):
        return _mix(_mix(packed ^ _base(seed, stream)) + _GOLDEN)


def rehash(bits: np.ndarray, stream: int) -> np.ndarray:
    """64 more random bits per key, derived from :func:`hashed` bits of the same key (one mix round)."""
    return _mix(bits ^ _base(0, stream))


def keyed_bits(seed: int, stream: int, *keys: np.ndarray | int) -> np.ndarray:
    """64 random bits for each element of the broadcast ``keys`` (see :func:`pack` for their ranges)."""
    return hashed(seed, stream, pack(*keys))


def keyed_uniform(seed: int, stream: int, *keys: np.ndarray | int) -> np.ndarray:
    """Uniform draws in the open interval (0, 1), one per element of the broadcast ``keys``."""
    return unit_uniform(keyed_bits(seed, stream, *keys))


def keyed_normal(seed: int, stream: int, *keys: np.ndarray | int) -> np.ndarray:
    """Standard normal draws (inverse CDF of :func:`keyed_uniform`)."""
    return ndtri(keyed_uniform(seed, stream, *keys))


def unit_uniform(bits: np.ndarray) -> np.ndarray:
    """A uniform in (0, 1) from the top 53 bits of :func:`hashed` bits."""
    return ((bits >> np.uint64(11)).astype(np.float64) + 0.5) * _TO_UNIT


def high_uniform(bits: np.ndarray) -> np.ndarray:
    """A uniform in (0, 1) from the high 32 bits of :func:`keyed_bits` (32-bit resolution)."""
    return ((bits >> np.uint64(32)).astype(np.float64) + 0.5) * 2.0**-32


def low_uniform(bits: np.ndarray) -> np.ndarray:
    """A uniform in (0, 1) from the low 32 bits, independent of :func:`high_uniform` of the same bits."""
    return ((bits & np.uint64(0xFFFFFFFF)).astype(np.float64) + 0.5) * 2.0**-32


def keyed_uniform_pair(seed: int, stream: int, *keys: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
    """Two independent uniforms in (0, 1) per key, from the high and low 32 bits of one hash
    (32-bit resolution: ample for accept/reject draws and for normals via the inverse CDF)."""
    bits = keyed_bits(seed, stream, *keys)
    return high_uniform(bits), low_uniform(bits)
