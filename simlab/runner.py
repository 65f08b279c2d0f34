"""Run a scenario: build its parts once, simulate every arm (in parallel processes), summarise."""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np
import pandas as pd

from simlab.arm_engines import ArmEngines, arm_engines
from simlab.arms import PreparedArm, check_tree_arm, domain_weights, prepare_arm
from simlab.common.errors import InputError
from simlab.common.version import __version__
from simlab.config.loading import LoadedScenario
from simlab.engine import simulate_arm
from simlab.pools import check_fits, pool_sizes
from simlab.hardware.gpus import gpus_per_replica
from simlab.results.folder import requests_frame, steps_frame
from simlab.results.metrics import summarise
from simlab.results.overload import overload_warnings


@dataclass
class Built:
    """A scenario's shared parts: the same for every arm."""

    loaded: LoadedScenario
    workload: object
    cost: object
    spec: object
    kv_capacity: int
    arms: list[PreparedArm] = field(default_factory=list)
    pools: object = None  # simlab.engine.simulate.PoolSizes of a disaggregated engine
    engines: ArmEngines = None  # the engine without speculation, and each arm's (the stack release's defaults)


@dataclass
class ArmOutcome:
    name: str
    metrics: dict
    requests: pd.DataFrame
    steps: pd.DataFrame


def build(loaded: LoadedScenario, cost: object = None) -> Built:
    """Build workload, cost model, acceptance model and every arm's policy; all input errors surface here.
    ``cost``, a cost model built by the caller, replaces the one the scenario's ``hardware`` names (the
    calibration fit replays engine records on the parameters it is fitting)."""
    from simlab.acceptance import build_acceptance, check_coverage
    from simlab.hardware import build_cost_model
    from simlab.workload import build_workload

    sc, file, base_dir = loaded.scenario, loaded.file, loaded.base_dir
    workload = build_workload(sc.workload, base_dir=base_dir, seed=sc.seed, file=file,
                              prefix_ids=sc.engine.prefix_caching)
    if cost is None:
        cost = build_cost_model(sc.hardware, base_dir=base_dir, file=file)
    spec = build_acceptance(sc.acceptance, file=file)
    requests = workload.requests
    check_coverage(spec, [(a.method, a.draft_len) for a in sc.arms if a.draft_len], list(requests.domain_names),
                   file=file)
    engines = arm_engines(sc.engine, sc.arms, cost, file)
    engine = engines.base
    for arm_engine in engines.arms:
        _check_limits(arm_engine.config, file)
    kv_capacity = _kv_capacity(engine.kv_cache_tokens, cost, file)
    if engine.disaggregation is None:  # a request must fit alone (paged: in whole blocks); pools check their own
        check_fits(requests.prompt_tokens + requests.output_tokens, kv_capacity, engine, what="prompt + output",
                   where="the cache", file=file, field="engine.kv_cache_tokens", value=engine.kv_cache_tokens)
    built = Built(loaded, workload, cost, spec, kv_capacity,
                  pools=pool_sizes(engine, cost, kv_capacity, requests, file, [a.method for a in sc.arms]),
                  engines=engines)
    weights = domain_weights(requests.domain, requests.domain_names)
    for index, arm in enumerate(sc.arms):
        resolved = engines.arms[index]
        if arm.tree is not None:
            check_tree_arm(index, arm, resolved.config, resolved.step_cost, file)
        built.arms.append(
            prepare_arm(arm, spec, resolved.scheduler, resolved.scheduler_cost, resolved.step_cost,
                        domain_names=requests.domain_names, weights=weights, output_tokens=requests.output_tokens,
                        max_batch_tokens=resolved.config.max_batch_tokens, seed=sc.seed)
        )
    return built


def _check_limits(engine, file) -> None:
    if engine.max_num_seqs > engine.max_batch_tokens:
        raise InputError(
            "must be >= engine.max_num_seqs (every running request needs a token each step)",
            file=file, field="engine.max_batch_tokens", value=engine.max_batch_tokens,
            valid=f"an integer >= {engine.max_num_seqs}",
        )


def _kv_capacity(setting, cost, file) -> int:
    if setting != "auto":
        return int(setting)
    tokens = cost.kv_cache_tokens()
    if tokens is None:
        raise InputError(
            "'auto' needs a roofline hardware model or a profile with kv_cache_tokens",
            file=file, field="engine.kv_cache_tokens", value="auto", valid="a positive integer",
        )
    return int(tokens)


def _simulate_one(built: Built, index: int, progress: Optional[Callable[[int], None]]) -> ArmOutcome:
    prepared = built.arms[index]
    sc = built.loaded.scenario
    resolved = built.engines.arms[index]
    engine = resolved.config
    requests = built.workload.requests
    kv_capacity = built.kv_capacity
    if resolved.kv_cache_tokens is not None and engine.kv_cache_tokens == "auto":  # a draft model's weights and KV
        kv_capacity = resolved.kv_cache_tokens
    result = simulate_arm(built.workload, resolved.step_cost, engine, prepared.policy, kv_capacity,
                          progress, built.pools)
    num_gpus = engine.num_replicas * gpus_per_replica(built.cost.describe())  # both pools when disaggregated
    capacity = kv_capacity if built.pools is None else built.pools.capacity_by_replica(engine)
    metrics = summarise(result, requests.prompt_tokens, requests.output_tokens, prepared.arm.draft_len, sc.slo,
                        kv_capacity=capacity, prefix_caching=engine.prefix_caching, num_gpus=num_gpus)
    metrics["engine"] = resolved.settings.describe()
    scheduler = prepared.policy.scheduler
    metrics["realisable"] = scheduler is None or scheduler.entry.realisable
    metrics["lossless"] = scheduler.lossless if scheduler is not None else True
    if prepared.confidence is not None:
        metrics["confidence"] = prepared.confidence
    log = result.log
    metrics["warnings"] = overload_warnings(log.arrival_s, log.first_token_s, log.finish_s, log.replica,
                                            max_num_seqs=engine.max_num_seqs,
                                            open_loop=built.workload.closed_loop is None)
    name = prepared.arm.label
    ids = np.arange(len(requests))
    return ArmOutcome(name, metrics, requests_frame(name, ids, requests, result.log), steps_frame(name, result.steps))


_WORKER: dict = {}


def _worker_run(index: int) -> ArmOutcome:
    built, channel = _WORKER["built"], _WORKER["channel"]
    return _simulate_one(built, index, lambda done: channel.put((index, done)))


def simulate_all(built: Built, *, jobs: int = 1, on_progress: Optional[Callable[[int, int], None]] = None
                 ) -> list[ArmOutcome]:
    """Simulate every arm; ``on_progress(arm index, finished requests)`` is called as they advance."""
    num_arms = len(built.arms)
    jobs = max(1, min(jobs, num_arms))
    if any(prepared.policy.scheduler is not None for prepared in built.arms):
        from simlab.schedulers.registry import load_compiled

        load_compiled()  # so that no arm's time includes loading them (and forked workers inherit them)
    if any(prepared.policy.block_kernel() is not None for prepared in built.arms):
        from simlab.engine import block_kernel

        block_kernel.load()
    if any(prepared.policy.gamma > 0 for prepared in built.arms):
        from simlab.acceptance import draw_kernel

        draw_kernel.load()  # the compiled draws, likewise
    if jobs == 1 or "fork" not in mp.get_all_start_methods():
        return [
            _simulate_one(built, i, (lambda done, i=i: on_progress(i, done)) if on_progress else None)
            for i in range(num_arms)
        ]
    context = mp.get_context("fork")
    channel = context.Queue()
    _WORKER.update(built=built, channel=channel)
    try:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            futures = [pool.submit(_worker_run, i) for i in range(num_arms)]
            while not all(f.done() for f in futures):
                _drain(channel, on_progress, timeout=0.1)
            _drain(channel, on_progress, timeout=0.0)
            return [f.result() for f in futures]
    finally:
        _WORKER.clear()


def _drain(channel, on_progress, timeout: float) -> None:
    try:
        item = channel.get(timeout=timeout) if timeout else channel.get_nowait()
        while True:
            if on_progress:
                on_progress(*item)
            item = channel.get_nowait()
    except queue.Empty:
        return


def summary_document(built: Built, outcomes: list[ArmOutcome]) -> dict:
    """The summary.json document: the resolved scenario and each arm's metrics."""
    sc = built.loaded.scenario
    return {
        "scenario": sc.model_dump(mode="json"),
        "arms": {o.name: o.metrics for o in outcomes},
        "workload": built.workload.source,
        "hardware": built.cost.describe(),
        "acceptance": acceptance_source(built.spec.source, {arm.method for arm in sc.arms}),
        "engine": {"kv_cache_tokens": built.kv_capacity},
        "simlab_version": __version__,
    }


def acceptance_source(source: dict, methods: set[str]) -> dict:
    """The acceptance's source, naming simlab's shipped curves for the other drafters only where an arm drafts with
    one."""
    shipped = {m: text for m, text in source.get("other_drafters", {}).items() if m in methods}
    out = {k: v for k, v in source.items() if k != "other_drafters"}
    return {**out, "other_drafters": shipped} if shipped else out


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


# ------------------------------------------------------------------------------------------------ library API
class RunProgress:
    """What :func:`run_scenario` reports while it runs (subclass it; every method may be left as is)."""

    def start(self, arm_labels: list[str], num_requests: int) -> None:
        """Before simulating: the arms, in order, and the requests each will serve."""

    def update(self, arm_index: int, num_finished: int) -> None:
        """Arm ``arm_index`` has finished ``num_finished`` requests."""


@dataclass
class Results:
    """What a run produced: ``summary`` is the document of ``summary.json``; ``requests`` and ``steps`` the
    frames of ``requests.csv`` and ``steps.csv.gz``; ``out`` the folder they were written to, if any."""

    summary: dict
    requests: pd.DataFrame
    steps: pd.DataFrame
    out: Optional["os.PathLike"] = None

    @property
    def arms(self) -> dict[str, dict]:
        """Each arm's METRICS, by arm name, in the scenario's order."""
        return self.summary["arms"]

    def table(self) -> pd.DataFrame:
        """One row per arm, one column per scalar metric."""
        rows = {name: {k: v for k, v in m.items() if v is None or isinstance(v, (int, float, str, bool))}
                for name, m in self.arms.items()}
        return pd.DataFrame.from_dict(rows, orient="index")

    def write(self, out, *, plot: bool = True, command: Optional[str] = None) -> "os.PathLike":
        """Write the results folder to ``out`` atomically (see :mod:`simlab.common.outputs` for what it may replace)."""
        from pathlib import Path

        from simlab.common.outputs import check_out_dir
        from simlab.results.folder import write_results

        out_dir = check_out_dir(Path(out), kind="run")
        extra = {}
        if plot:
            from simlab.results.figure import render_png

            extra["report.png"] = render_png(self.summary, self.requests, self.steps)
        write_results(out_dir, self.summary, self.requests, self.steps, extra_files=extra, command=command)
        self.out = Path(out)
        return self.out


def as_loaded(scenario, *, seed: Optional[int] = None) -> LoadedScenario:
    """A path, a :class:`LoadedScenario`, a :class:`~simlab.config.Scenario` or a mapping, as a
    :class:`LoadedScenario` (a mapping or a Scenario resolves relative paths against the current folder)."""
    from pathlib import Path

    from simlab.config import Scenario
    from simlab.config.loading import load_scenario, scenario_from_data

    if isinstance(scenario, LoadedScenario):
        if seed is None:
            return scenario
        return scenario_from_data(scenario.scenario.model_dump(mode="json"), file=scenario.file, seed=seed)
    if isinstance(scenario, Scenario):
        scenario = scenario.model_dump(mode="json")
    if isinstance(scenario, dict):
        return scenario_from_data(scenario, file=Path.cwd() / "<scenario>", seed=seed)
    return load_scenario(scenario, seed=seed)


def run_scenario(scenario, out=None, *, seed: Optional[int] = None, jobs: int = 1, plot: bool = True,
                 progress: Optional[RunProgress] = None, command: Optional[str] = None, cost: object = None
                 ) -> Results:
    """Simulate every arm of ``scenario`` (a path, a loaded scenario or a mapping) and return its
    :class:`Results`; with ``out``, also write the results folder there, as ``simlab run`` does.

    ``out`` is checked before anything runs: it may be a new path, an empty folder or an earlier results
    folder, never a folder holding other files or the scenario itself (:class:`~simlab.common.errors.InputError`).
    ``cost``, a cost model object, replaces the scenario's ``hardware`` (:func:`build`)."""
    from pathlib import Path

    from simlab.common.outputs import check_out_dir

    loaded = as_loaded(scenario, seed=seed)
    if out is not None:
        check_out_dir(Path(out), kind="run", inputs=[loaded.file])
    built = build(loaded, cost)
    if progress is not None:
        progress.start([arm.arm.label for arm in built.arms], len(built.workload.requests))
    outcomes = simulate_all(built, jobs=jobs, on_progress=progress.update if progress is not None else None)
    results = Results(
        summary_document(built, outcomes),
        pd.concat([o.requests for o in outcomes], ignore_index=True),
        pd.concat([o.steps for o in outcomes], ignore_index=True),
    )
    if out is not None:
        results.write(out, plot=plot, command=command)
    return results
