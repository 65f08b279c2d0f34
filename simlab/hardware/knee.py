"""The smooth knee of a calibrated roofline: memory time and compute time joined by a p-norm.

``knee(a, b, p) = (a**p + b**p) ** (1/p)`` is never below ``max(a, b)`` (so the physics bounds of a plain
roofline hold), tends to ``max(a, b)`` as ``p`` grows, is smooth for positive ``a`` and ``b`` and is 1-homogeneous:
``knee(c a, c b) = c knee(a, b)``. Computed as ``m (1 + (n / m)**p)**(1/p)`` with ``m = max(a, b)``,
``n = min(a, b)``, which neither overflows nor underflows.

A GEMM over ``M`` tokens that reads ``weight_bytes`` and does ``flops`` takes
``knee(weight_bytes / (BW eta_bw), flops / (peak eta_flop), p)``. With ``M*`` the token count where the two
terms are equal (the plain roofline's corner), its FLOP efficiency is the smooth, saturating
``eta_flop (1 + (M* / M)**p)**(-1/p)`` and its bandwidth efficiency the falling ``eta_bw (1 + (M / M*)**p)**(-1/p)``:
below the corner it already rises, just after it it is well below the corner's value.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def knee(a: float, b: float, p: float) -> float:
    """The p-norm of two non-negative times (one pair of floats)."""
    if a >= b:
        return a * (1.0 + (b / a) ** p) ** (1.0 / p) if a > 0.0 else 0.0
    return b * (1.0 + (a / b) ** p) ** (1.0 / p)


def knee_array(a: Any, b: Any, p: float) -> np.ndarray:
    """:func:`knee` elementwise over broadcast arrays."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    high = np.maximum(a, b)
    low = np.minimum(a, b)
    safe = np.where(high > 0.0, high, 1.0)
    return np.where(high > 0.0, high * (1.0 + (low / safe) ** p) ** (1.0 / p), 0.0)


def gemm_s(weight_s: float, flop_s: float, tokens: float, p: float) -> float:
    """A GEMM's seconds over ``tokens``: ``weight_s`` (its weights read at the fitted bandwidth) and ``flop_s``
    (its FLOPs at the saturated FLOP rate) joined by :func:`knee`; zero tokens cost 0 (no kernel runs)."""
    return knee(weight_s, flop_s, p) if tokens > 0.0 else 0.0


def gemm_array(weight_s: Any, flop_s: Any, tokens: Any, p: float) -> np.ndarray:
    """:func:`gemm_s` elementwise."""
    return np.where(np.asarray(tokens, dtype=float) > 0.0, knee_array(weight_s, flop_s, p), 0.0)
