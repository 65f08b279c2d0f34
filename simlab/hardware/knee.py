"""The smooth knee of a calibrated roofline: memory time and compute time joined by a hyperbola.

``knee(a, b, w) = (a + b + sqrt((a - b)**2 + w a b)) / 2`` with the knee width ``w`` in [0, 4]:

- ``w = 0`` is the plain roofline's ``max(a, b)`` (a corner), ``w = 4`` the sum ``a + b``; in between, at the
  corner ``a = b`` the time is ``a (1 + sqrt(w) / 2)``;
- never below ``max(a, b)`` (so the physics bounds of a plain roofline hold), non-decreasing in ``a`` and ``b``
  for ``w <= 4``, smooth for positive ``a`` and ``b``, and 1-homogeneous: ``knee(c a, c b) = c knee(a, b)``;
- built from ``+ - * /`` and ``sqrt`` only, which IEEE 754 rounds exactly, so the scalar path (plain Python) and
  the vectorised path (numpy) agree bit for bit, as the engine's blocks of steps require.

A GEMM over ``M`` tokens reading ``weight_bytes`` and doing ``flops`` takes
``knee(weight_bytes / (BW eta_bw), flops / (peak eta_flop), w)``. With ``M*`` the token count where the two terms
are equal (the plain roofline's corner), ``x = M / M*``, its effective FLOP efficiency is the smooth, saturating
``eta_flop x / knee(1, x, w)`` and its effective bandwidth efficiency the falling ``eta_bw / knee(1, x, w)``: below
the corner the step already rises, just after it the efficiency is well below the corner's.
"""

from __future__ import annotations

from math import sqrt
from typing import Any

import numpy as np

MAX_KNEE_WIDTH = 4.0


def knee(a: float, b: float, width: float) -> float:
    """The hyperbolic knee of two non-negative times (one pair of floats)."""
    d = a - b
    return 0.5 * (a + b + sqrt(d * d + width * a * b))


def knee_array(a: Any, b: Any, width: float) -> np.ndarray:
    """:func:`knee` elementwise over broadcast arrays (the same operations in the same order)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    d = a - b
    return 0.5 * (a + b + np.sqrt(d * d + width * a * b))


def gemm_s(weight_s: float, flop_s: float, tokens: float, width: float) -> float:
    """A GEMM's seconds over ``tokens``: ``weight_s`` (its weights read at the fitted bandwidth) and ``flop_s``
    (its FLOPs at the saturated FLOP rate) joined by :func:`knee`; zero tokens cost 0 (no kernel runs)."""
    return knee(weight_s, flop_s, width) if tokens > 0.0 else 0.0


def gemm_array(weight_s: Any, flop_s: Any, tokens: Any, width: float) -> np.ndarray:
    """:func:`gemm_s` elementwise."""
    return np.where(np.asarray(tokens, dtype=float) > 0.0, knee_array(weight_s, flop_s, width), 0.0)
