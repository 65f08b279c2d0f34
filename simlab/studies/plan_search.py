"""The plan's search: per family (a layout x an arm), the fewest replicas meeting the SLA by bracketing and
bisection (:func:`simlab.studies.search.threshold_search`: more replicas never hurt), families taken cheapest
first a few at a time, every round's deployments simulated in parallel on an executor.

Bounds keep the simulations few. A family the speed bound rules out is never simulated. Once a deployment of an
arm meets the SLA, a replica count whose objective (or its lower bound) is dearer than that arm's best is answered
"as good as it gets" without running, which is the same as searching only the affordable counts (the answer is
exact when it is affordable, and "dearer" otherwise); a family whose fewest replicas are already dearer is skipped
whole.
Each simulated deployment is kept in ``DIR/probes/`` under the hash of its scenario, so a rerun on the same
folder simulates only what is missing; ``budget_s`` stops the search with the best so far (marked incomplete).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from simlab.common.errors import InputError
from simlab.studies.executors import TaskLost
from simlab.studies.grid import canonical_json
from simlab.studies.plan_config import PlanSpec
from simlab.studies.plan_space import Family, Load, cost_model, deployment_scenario
from simlab.studies.progress import StudyProgress
from simlab.studies.search import SearchRange, threshold_search

RELATIVE_TIE = 1e-9


@dataclass(frozen=True)
class DeploymentTask:
    """One deployment's scenario, run as a one-arm simulation."""

    data: dict
    file: str


def run_deployment(task: DeploymentTask) -> dict:
    """Simulate one deployment (its roofline built once per worker); errors come back as data."""
    from simlab.common.json_text import dumps
    from simlab.config.loading import scenario_from_data
    from simlab.runner import run_scenario

    try:
        loaded = scenario_from_data(task.data, file=task.file)
        results = run_scenario(loaded, jobs=1, plot=False, cost=cost_model(task.data["hardware"]))
        return {"metrics": json.loads(dumps(next(iter(results.arms.values())))), "error": None}
    except InputError as err:
        return {"metrics": None, "error": err.message, "input_error": True}
    except Exception as exc:
        return {"metrics": None, "error": f"{type(exc).__name__}: {exc}", "input_error": False}


def scenario_key(data: dict) -> str:
    return hashlib.sha256(canonical_json(data).encode("utf-8")).hexdigest()[:20]


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


@dataclass
class FamilyOutcome:
    """How a family's search ended: ``answer`` (fewest replicas meeting the SLA) or why not."""

    status: str  # "answer", "dearer", "misses", "infeasible", "not reached"
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
        self.cache: dict[str, dict] = self._read_cache()
        self.evaluated: dict[tuple[int, str], Evaluated] = {}
        self.best: Optional[Evaluated] = None
        self.best_by_arm: dict[int, Evaluated] = {}
        self.started = time.perf_counter()
        self.num_simulated = 0
        self.out_of_time = False

    # ------------------------------------------------------------------------------------------- objective
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

    def _dearer(self, family: Family, units: int) -> bool:
        """Whether ``units`` replicas of ``family`` cannot beat the best found for the family's arm (each arm's
        own best is kept: the report compares the arms' cheapest deployments)."""
        mine = self.best_by_arm.get(family.arm)
        if self.exhaustive or mine is None:
            return False
        best = self.objective(self.families[mine.family], mine.units, mine.metrics)
        return self.objective(family, units) > best * (1 + RELATIVE_TIE) + 1e-12

    # ------------------------------------------------------------------------------------------- the loop
    def run(self) -> SearchResult:
        outcomes: dict[int, FamilyOutcome] = {}
        order = []
        for f in self.families:
            if f.infeasible and not self.exhaustive:
                outcomes[f.index] = FamilyOutcome("infeasible", reason=f.infeasible)
            else:
                order.append(f)
        order.sort(key=lambda f: (self.objective(f, f.start), f.index))
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
        evaluated = sorted(self.evaluated.values(), key=self.rank_key)
        num_cached = sum(e.cached for e in evaluated)
        self.progress.close()
        return SearchResult(evaluated, outcomes, not self.out_of_time, self.num_simulated, num_cached,
                            time.perf_counter() - self.started, self.best)

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
            if key in self.cache:
                self._record(f, units, value, data, self.cache[key], cached=True)
                continue
            tasks.append(DeploymentTask(data, self.file))
            where.append((f, units, value, data, key))
        failures = []
        for index, result in self.pool.run(run_deployment, tasks) if tasks else []:
            f, units, value, data, key = where[index]
            if isinstance(result, TaskLost):
                result = {"metrics": None, "error": result.error, "input_error": False}
            if result["metrics"] is None and not result.get("input_error"):
                failures.append(result["error"])
            else:
                self._store(key, data, result)
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
        if e.meets and (self.best is None or self.rank_key(e) < self.rank_key(self.best)):
            self.best = e
        mine = self.best_by_arm.get(f.arm)
        if e.meets and (mine is None or self.rank_key(e) < self.rank_key(mine)):
            self.best_by_arm[f.arm] = e
        return e

    def _describe(self, f: Family, value: Any) -> str:
        count = f"{value['prefill_replicas']}:{value['decode_replicas']} P:D" if f.disaggregated else f"x{value}"
        return f"{f.layout.label} {count} {self.spec.arms[f.arm].label}"

    def _read_cache(self) -> dict[str, dict]:
        cache: dict[str, dict] = {}
        if self.cache_dir is None or not self.cache_dir.is_dir():
            return cache
        for path in self.cache_dir.glob("*.json"):
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
                cache[path.stem] = {"metrics": doc["metrics"], "error": doc.get("error")}
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return cache

    def _store(self, key: str, data: dict, result: dict) -> None:
        if self.cache_dir is None:
            return
        from simlab.common.outputs import write_file_atomic
        from simlab.common.version import __version__

        doc = {"generator": f"simlab {__version__}", "scenario": data, "metrics": result["metrics"],
               "error": result["error"]}
        write_file_atomic(self.cache_dir / f"{key}.json", json.dumps(doc) + "\n")
