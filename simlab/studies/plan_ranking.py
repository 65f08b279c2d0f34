"""How a plan ranks its deployments: the plan's objective (GPUs, dollars per hour, or dollars per million output
tokens), the order of the candidates, and the bound that lets the search answer a dearer count without running it.

The order (docs/planning.md, "How the answer is chosen"): those meeting the SLA first, then the cheapest by the
objective. At equal cost, ``prefer: simplest`` (the default) puts no speculation before speculation and fewer
moving parts before more (a drafter, a draft tree, a load-aware scheduler, disaggregated pools), then the most
headroom against the SLA (the smallest relative slack over its conditions); ``prefer: fastest`` puts the faster
median user first. Then fewer GPUs, and the family's place, so that the order never depends on timing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

from simlab.studies.grid import canonical_json
from simlab.studies.plan_config import PlanSpec
from simlab.studies.plan_space import Family, Load

RELATIVE_TIE = 1e-9
PREFERENCES = ("simplest", "fastest")


def headroom(sla, metrics: Optional[dict]) -> dict[str, float]:
    """Per SLA condition, the relative slack of ``metrics`` against it: (limit - value) / limit for an upper
    bound, (value - limit) / limit for a lower one (negative: missed)."""
    out = {}
    for c in sla.conditions:
        value = (metrics or {}).get(c.metric)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value) or c.value == 0:
            out[str(c)] = -math.inf
            continue
        slack = (c.value - value) if c.op == "<=" else (value - c.value)
        out[str(c)] = slack / abs(c.value)
    return out


def headroom_fields(sla, metrics: Optional[dict]) -> dict[str, float]:
    """:func:`headroom` as plan.json keeps it: rounded, the conditions whose metric is missing left out."""
    return {name: round(value, 4) for name, value in headroom(sla, metrics).items() if math.isfinite(value)}


def least_headroom(sla, metrics: Optional[dict]) -> float:
    """The binding condition's relative slack (:func:`headroom`)."""
    return min(headroom(sla, metrics).values(), default=math.inf)


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
        self.prefer = spec.block.prefer
        self.arm_parts = [arm.moving_parts for arm in spec.arms]  # each arm's, built once (it validates the arm)
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

    def moving_parts(self, family: Family) -> list[str]:
        """What a deployment of ``family`` runs beyond plain decoding on one pool of replicas."""
        parts = list(self.arm_parts[family.arm])
        if family.disaggregated:
            parts.append("prefill and decode pools with a KV link")
        return parts

    def rank_key(self, e: Evaluated) -> tuple:
        """Best first (the module docstring): meets the SLA, objective, then the preference's tie-break, GPUs and
        the family's place."""
        family = self.families[e.family]
        user = (e.metrics or {}).get("median_user_tok_s") or 0.0
        cost = self.objective(family, e.units, e.metrics) if e.metrics else math.inf
        if self.prefer == "fastest":
            tie_break: tuple = (-user,)
        else:
            tie_break = (len(self.moving_parts(family)), -least_headroom(self.spec.sla, e.metrics), -user)
        return (not e.meets, cost, *tie_break, family.num_gpus(e.units), e.family, canonical_json(e.value))

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
