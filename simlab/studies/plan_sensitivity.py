"""How sure a plan's answer is: the chosen deployment simulated again at 20 % less and 20 % more load, and, where it
misses the SLA at 20 % more, the cheapest deployment that meets it there (the chosen family with more replicas,
then the plan's other candidates meeting the SLA, cheapest first)."""

from __future__ import annotations

import json
from typing import Any, Optional

from simlab.studies.plan_config import PlanSpec
from simlab.studies.plan_ranking import Evaluated, PlanRanking, headroom_fields
from simlab.studies.plan_space import Family, deployment_scenario
from simlab.studies.tasks import ScenarioTask, first_arm, run_task

LOAD_FACTORS = (0.8, 1.2)
MAX_ALTERNATIVES = 6  # deployments tried at the higher load before giving up


def scaled_workload(workload: dict, factor: float) -> dict:
    """``workload`` with ``factor`` times its load: an open loop's rate (or a trace's gaps divided by ``factor``),
    a closed loop's users."""
    scaled = json.loads(json.dumps(workload))
    kind = scaled.get("kind")
    if kind in ("poisson", "gamma"):
        scaled["rate"] = float(scaled["rate"]) * factor
    elif kind == "trace":
        scaled["time_scale"] = float(scaled.get("time_scale", 1.0)) / factor
    elif kind == "closed_loop":
        scaled["concurrency"] = max(1, round(int(scaled["concurrency"]) * factor))
    return scaled


def _at(data: dict, factor: float, file: str) -> Optional[dict]:
    scenario = {**data, "workload": scaled_workload(data["workload"], factor)}
    return first_arm(run_task(ScenarioTask(scenario, file, shared_cost=True)))


def _entry(spec: PlanSpec, metrics: Optional[dict]) -> dict:
    sla_metrics = {c.metric: (metrics or {}).get(c.metric) for c in spec.sla.conditions}
    return {"meets_sla": bool(metrics) and spec.sla.meets(metrics), "metrics": sla_metrics,
            "headroom": headroom_fields(spec.sla, metrics)}


def sensitivity(spec: PlanSpec, families: list[Family], ranking: PlanRanking, evaluated: list[Evaluated],
                describe) -> Optional[dict[str, Any]]:
    """plan.json's ``sensitivity`` (None without an answer): per load factor, whether the chosen deployment still
    meets the SLA and its SLA metrics; and ``at_higher_load``, the cheapest deployment meeting the SLA at the higher
    load where the chosen one does not (``describe`` turns an :class:`Evaluated`-like deployment into plan.json's
    DEPLOYMENT fields)."""
    best = ranking.best
    if best is None:
        return None
    file = str(spec.file.resolve())
    out: dict[str, Any] = {"load_factors": {}}
    for factor in LOAD_FACTORS:
        out["load_factors"][f"{factor:g}"] = _entry(spec, _at(best.data, factor, file))
    higher = f"{max(LOAD_FACTORS):g}"
    if out["load_factors"][higher]["meets_sla"]:
        out["at_higher_load"] = None
        return out
    family = families[best.family]
    tried: list[tuple[Family, int, Any]] = []
    if not family.disaggregated and best.units < family.max_units:
        tried.append((family, best.units + 1, best.units + 1))
    for e in evaluated:
        if e.meets and e is not best:
            tried.append((families[e.family], e.units, e.value))
    tried.sort(key=lambda t: ranking.objective(t[0], t[1]))
    for f, units, value in tried[:MAX_ALTERNATIVES]:
        metrics = _at(deployment_scenario(spec, f, value), max(LOAD_FACTORS), file)
        if metrics and spec.sla.meets(metrics):
            out["at_higher_load"] = {**describe(f, units, value), **_entry(spec, metrics)}
            return out
    out["at_higher_load"] = None
    out["at_higher_load_note"] = f"none of the {min(len(tried), MAX_ALTERNATIVES)} cheapest alternatives meets it"
    return out
