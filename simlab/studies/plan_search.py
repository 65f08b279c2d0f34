"""The plan's search: per family (a layout x an arm), the fewest replicas meeting the SLA by bracketing and
bisection (:func:`simlab.studies.search.threshold_search`: more replicas never hurt), families taken cheapest
first a few at a time, every round's deployments simulated in parallel on an executor.

Bounds keep the simulations few. A family the speed bound rules out is never simulated. Once a deployment of an
arm meets the SLA, a replica count whose objective (or its lower bound) is dearer than that arm's best is answered
"as good as it gets" without running, which is the same as searching only the affordable counts (the answer is
exact when it is affordable, and "dearer" otherwise); a family whose fewest replicas are already dearer is skipped
whole.
Each simulated deployment is kept in ``DIR/probes/`` (:mod:`simlab.studies.plan_cache`), so a rerun on the same
folder simulates only what is missing; ``budget_s`` stops the search with the best so far (marked incomplete).
The order of deployments and the bound are :mod:`simlab.studies.plan_ranking`'s.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from simlab.studies.grid import canonical_json
from simlab.studies.plan_cache import ProbeCache, scenario_key
from simlab.studies.plan_config import PlanSpec
from simlab.studies.plan_ranking import Evaluated, PlanRanking
from simlab.studies.plan_space import Family, Load, deployment_scenario
from simlab.studies.progress import StudyProgress
from simlab.studies.search import SearchRange, threshold_search
from simlab.studies.tasks import ScenarioTask, first_arm, outcome, run_task
from simlab.studies.labels import split_label


def deployment_result(result: dict) -> dict:
    """A deployment's task result (:func:`simlab.studies.tasks.run_task`) as the search keeps it: its one arm's
    ``metrics`` (None when it failed), the error, and whether that was an input error."""
    return {"metrics": first_arm(result), "error": result["error"], "input_error": result["input_error"]}


@dataclass
class FamilyOutcome:
    """How a family's search ended: ``answer`` (fewest replicas meeting the SLA) or why not."""

    status: str  # "answer", "dearer", "misses", "infeasible", "not served", "not reached"
    answer: Optional[int] = None
    reason: str = ""
    dearer_from: Optional[int] = None  # the fewest replicas answered "dearer" without running


@dataclass
class SearchResult:
    evaluated: list[Evaluated]
    outcomes: dict[int, FamilyOutcome]
    complete: bool
    num_simulated: int
    num_cached: int
    wall_s: float
    best: Optional[Evaluated] = None


class PlanSearch:
    """Runs a plan's search (``exhaustive``: every deployment of every family, no bounds: the reference the
    bounded search is tested against)."""

    def __init__(self, spec: PlanSpec, families: list[Family], load: Load, pool, progress: StudyProgress,
                 cache_dir: Optional[Path] = None, budget_s: Optional[float] = None, exhaustive: bool = False):
        self.spec, self.families, self.load, self.pool = spec, families, load, pool
        self.progress, self.cache_dir, self.budget_s, self.exhaustive = progress, cache_dir, budget_s, exhaustive
        self.file = str(Path(spec.file).resolve())
        self.cache = ProbeCache(cache_dir)
        self.ranking = PlanRanking(spec, families, load)
        self.evaluated: dict[tuple[int, str], Evaluated] = {}
        self.started = time.perf_counter()
        self.num_simulated = 0
        self.out_of_time = False

    def _dearer(self, family: Family, units: int) -> bool:
        return not self.exhaustive and self.ranking.dearer(family, units)

    # ------------------------------------------------------------------------------------------- the loop
    def run(self) -> SearchResult:
        outcomes: dict[int, FamilyOutcome] = {}
        order = []
        for f in self.families:
            if f.unserved:  # the release the plan simulates does not run this drafter: never a deployment
                outcomes[f.index] = FamilyOutcome("not served", reason=f.unserved)
            elif f.infeasible and not self.exhaustive:
                outcomes[f.index] = FamilyOutcome("infeasible", reason=f.infeasible)
            else:
                order.append(f)
        order.sort(key=lambda f: (self.ranking.objective(f, f.start), f.index))
        estimate = {f.index: self._estimate(f) for f in order}
        self.progress.start(sum(estimate.values()), label="deployments")
        used = {f.index: 0 for f in order}
        queue = deque(order)
        width = max(4, 2 * getattr(self.pool, "num_workers", 1))
        active: dict[int, dict] = {}
        while (queue or active) and not self.out_of_time:
            while queue and len(active) < width:
                f = queue.popleft()
                if self._dearer(f, f.min_units):
                    outcomes[f.index] = FamilyOutcome("dearer", dearer_from=f.min_units,
                                                      reason="its fewest replicas are dearer than the best found "
                                                             "for its arm")
                    self.progress.add(-estimate[f.index])
                    continue
                active[f.index] = self._open(f)
            needed: list[tuple[Family, int, Any]] = []
            for index in list(active):
                state = active[index]
                f = self.families[index]
                while True:  # answer what needs no simulation: dearer counts, deployments already known
                    units = state["units"]
                    if self._dearer(f, units):
                        state["dearer"].append(units)
                        answer: Optional[bool] = True
                    else:
                        missing = [v for v in f.values(units) if (index, canonical_json(v)) not in self.evaluated]
                        if missing:
                            needed.extend((f, units, v) for v in missing)
                            break
                        answer = any(self.evaluated[(index, canonical_json(v))].meets for v in f.values(units))
                    if not self._send(state, answer):
                        outcomes[index] = self._close(f, state)
                        extra = estimate[index] - used[index]
                        if extra > 0:
                            self.progress.add(-extra)
                        del active[index]
                        break
            if not needed:
                continue
            if self.budget_s is not None and time.perf_counter() - self.started > self.budget_s:
                self.out_of_time = True
                break
            for f, units, _ in needed:
                used[f.index] += 1
                if used[f.index] > estimate[f.index]:
                    self.progress.add(1)
            self._evaluate(needed)
        for f in order:
            outcomes.setdefault(f.index, FamilyOutcome("not reached", reason="the budget ran out first"))
        evaluated = sorted(self.evaluated.values(), key=self.ranking.rank_key)
        num_cached = sum(e.cached for e in evaluated)
        self.progress.close()
        return SearchResult(evaluated, outcomes, not self.out_of_time, self.num_simulated, num_cached,
                            time.perf_counter() - self.started, self.ranking.best)

    def _estimate(self, f: Family) -> int:
        if self.exhaustive:
            return sum(len(f.values(u)) for u in range(f.min_units, f.max_units + 1))
        probes = math.ceil(math.log2(max(2, f.max_units - f.min_units + 1))) + 1
        return probes * (max(1, f.start - 1) if f.disaggregated else 1)

    def _open(self, f: Family) -> dict:
        if self.exhaustive:
            values = iter(range(f.min_units, f.max_units + 1))
            return {"exhaustive": values, "units": next(values), "dearer": [], "meeting": []}
        rng = SearchRange(f.min_units, f.max_units, True, "smallest")
        search = threshold_search(min(max(f.start, f.min_units), f.max_units), rng)
        return {"search": search, "units": next(search), "dearer": [], "answer": None}

    def _send(self, state: dict, meets: bool) -> bool:
        """Give the family's search its answer; False when the search has ended."""
        if "exhaustive" in state:
            if meets:
                state["meeting"].append(state["units"])
            nxt = next(state["exhaustive"], None)
            if nxt is None:
                state["answer"] = min(state["meeting"]) if state["meeting"] else None
                return False
            state["units"] = nxt
            return True
        try:
            state["units"] = state["search"].send(meets)
            return True
        except StopIteration as stop:
            state["answer"] = stop.value.value
            return False

    def _close(self, f: Family, state: dict) -> FamilyOutcome:
        answer = state["answer"]
        if answer is not None and answer not in state["dearer"]:
            return FamilyOutcome("answer", answer=answer)
        if answer is not None:
            return FamilyOutcome("dearer", dearer_from=min(state["dearer"]),
                                 reason=f"{min(state['dearer'])} or more replicas are dearer than the best found "
                                        "for its arm, fewer miss the SLA")
        return FamilyOutcome("misses", reason=f"misses the SLA with every count up to {f.max_units} replicas")

    # ------------------------------------------------------------------------------------------- running
    def _evaluate(self, needed: list[tuple[Family, int, Any]]) -> None:
        tasks, where = [], []
        for f, units, value in needed:
            data = deployment_scenario(self.spec, f, value)
            key = scenario_key(data)
            known = self.cache.get(key)
            if known is not None:
                self._record(f, units, value, data, known, cached=True)
                continue
            tasks.append(ScenarioTask(data, self.file, shared_cost=True))
            where.append((f, units, value, data, key))
        failures = []
        for index, result in self.pool.run(run_task, tasks) if tasks else []:
            f, units, value, data, key = where[index]
            result = deployment_result(outcome(result))
            if result["metrics"] is None and not result["input_error"]:
                failures.append(result["error"])
            else:
                self.cache.store(key, data, result)
            self.num_simulated += 1
            e = self._record(f, units, value, data, result)
            self.progress.done(self._describe(f, value), failed=result["metrics"] is None,
                               note="meets the SLA" if e.meets else "misses " + ", ".join(e.failing))
            if self.budget_s is not None and time.perf_counter() - self.started > self.budget_s:
                self.out_of_time = True
                break
        if failures:
            raise RuntimeError(f"a deployment's simulation failed: {failures[0]}")

    def _record(self, f: Family, units: int, value: Any, data: dict, result: dict, cached: bool = False) -> Evaluated:
        metrics = result["metrics"]
        failing = self.spec.sla.failing(metrics) if metrics else [f"error: {result['error']}"]
        e = Evaluated(f.index, units, value, data, metrics, result["error"], metrics is not None and not failing,
                      failing, cached)
        self.evaluated[(f.index, canonical_json(value))] = e
        self.ranking.consider(e)
        return e

    def _describe(self, f: Family, value: Any) -> str:
        count = f"{split_label(value)} P:D" if f.disaggregated else f"x{value}"
        return f"{f.layout.label} {count} {self.spec.arms[f.arm].label}"
