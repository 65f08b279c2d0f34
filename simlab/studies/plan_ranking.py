"""How a plan ranks its deployments: the plan's objective (GPUs, dollars per hour, or dollars per million output
tokens), the order of the candidates, and the bound that lets the search answer a dearer count without running it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

from simlab.studies.grid import canonical_json
from simlab.studies.plan_config import PlanSpec
from simlab.studies.plan_space import Family, Load

RELATIVE_TIE = 1e-9


@dataclass
class Evaluated:
    """A simulated deployment of a family: ``value`` is its replicas or its prefill:decode split."""

    family: int
    units: int
    value: Any
    data: dict
    metrics: Optional[dict]
    error: Optional[str]
    meets: bool
    failing: list[str]
    cached: bool = False


class PlanRanking:
    """The plan's objective and order over ``families``, and the best deployment meeting the SLA found so far,
    overall and per arm (each arm's own best is kept: the report compares the arms' cheapest deployments)."""

    def __init__(self, spec: PlanSpec, families: list[Family], load: Load):
        self.spec, self.families, self.load = spec, families, load
        self.best: Optional[Evaluated] = None
        self.best_by_arm: dict[int, Evaluated] = {}

    def objective(self, family: Family, units: int, metrics: Optional[dict] = None) -> float:
        """The plan's objective of a deployment; without metrics, a lower bound of it."""
        name = self.spec.block.objective
        if name == "num_gpus":
            return float(family.num_gpus(units))
        usd = family.usd_per_hour(units)
        if name == "usd_per_hour":
            return usd
        rate = (metrics or {}).get("output_throughput") if metrics else self.load.max_output_tok_s
        return usd / (rate * 3600.0 / 1e6) if rate else (math.inf if metrics else 0.0)

    def rank_key(self, e: Evaluated) -> tuple:
        """Best first: meets the SLA, objective, GPUs, faster median user, then the family's place."""
        family = self.families[e.family]
        user = (e.metrics or {}).get("median_user_tok_s") or 0.0
        return (not e.meets, self.objective(family, e.units, e.metrics) if e.metrics else math.inf,
                family.num_gpus(e.units), -user, e.family, canonical_json(e.value))

    def consider(self, e: Evaluated) -> None:
        """Keep ``e`` as the best overall or of its arm where it meets the SLA and ranks first."""
        if not e.meets:
            return
        if self.best is None or self.rank_key(e) < self.rank_key(self.best):
            self.best = e
        arm = self.families[e.family].arm
        mine = self.best_by_arm.get(arm)
        if mine is None or self.rank_key(e) < self.rank_key(mine):
            self.best_by_arm[arm] = e

    def dearer(self, family: Family, units: int) -> bool:
        """Whether ``units`` replicas of ``family`` cannot beat the best found for the family's arm."""
        mine = self.best_by_arm.get(family.arm)
        if mine is None:
            return False
        best = self.objective(self.families[mine.family], mine.units, mine.metrics)
        return self.objective(family, units) > best * (1 + RELATIVE_TIE) + 1e-12
