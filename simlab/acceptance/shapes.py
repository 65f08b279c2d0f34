"""The parametric curve the presets are built from: a level plus an offset that fades with a length scale.

    L_k = level + offset_logit * exp(-(k - 1) / length_scale_positions),   k = 1..16

``level`` is the asymptote far along the block; ``offset_logit`` > 0 is a curve that starts high and decays
towards it (parallel drafters), < 0 one that starts low and rises. One shape per drafter method is shared by
every domain and target model; the level is solved per (model, method, domain) so that the tokens per round at
gamma = 7, pooled over rounds as a benchmark measures it, equals the paper's figure exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
from scipy.optimize import brentq

from simlab.acceptance.expected import tokens_per_round_from_logits
from simlab.config.acceptance import HeterogeneityConfig

LEVEL_BRACKET = (-20.0, 30.0)


@dataclass(frozen=True)
class CurveShape:
    """Offsets of the base logit from its level: offset_logit * exp(-(k-1) / length_scale_positions)."""

    offset_logit: float
    length_scale_positions: float

    def offsets(self, num_positions: int) -> np.ndarray:
        k = np.arange(num_positions, dtype=float)
        return self.offset_logit * np.exp(-k / self.length_scale_positions)


def solve_level(
    offsets: np.ndarray, target_tau: float, gamma: int, heterogeneity: HeterogeneityConfig, *, pooled: bool = True,
    num_nodes: Optional[int] = None,
) -> float:
    """The level whose curve level + offsets[:gamma] gives tau(gamma) = ``target_tau`` (a monotone root);
    ``pooled`` as in :mod:`simlab.acceptance.expected`."""
    if not 1.0 < target_tau < gamma + 1.0:
        raise ValueError(f"tau {target_tau} is outside (1, {gamma + 1})")
    head = np.asarray(offsets[:gamma], dtype=float)

    def gap(level: float) -> float:
        return (
            tokens_per_round_from_logits(level + head, heterogeneity, pooled=pooled, num_nodes=num_nodes) - target_tau
        )

    return float(brentq(gap, *LEVEL_BRACKET, xtol=1e-12, rtol=1e-12))
