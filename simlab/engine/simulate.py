"""Simulate one arm: a SimPy environment with its replicas, the arrival process and the records."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import simpy

from simlab.config.scenario import EngineConfig
from simlab.engine.arrivals import Arrivals
from simlab.engine.decode import ArmPolicy
from simlab.engine.drawstore import DrawStore
from simlab.engine.records import PositionCounts, RequestLog, StepLog
from simlab.engine.replica import Replica


@dataclass
class ArmResult:
    """Everything one arm's simulation recorded."""

    log: RequestLog
    steps: dict[str, np.ndarray]
    positions: PositionCounts
    time_in_system_area: float  # integral of the number of requests in the system over time
    sim_wall_s: float


class ArmRun:
    """The state shared by the replicas of one arm while it runs."""

    def __init__(self, workload, cost, engine: EngineConfig, policy: ArmPolicy, kv_capacity: int,
                 progress: Optional[Callable[[int], None]] = None) -> None:
        requests = workload.requests
        self.env = simpy.Environment()
        self.workload = workload
        self.cost = cost
        self.engine = engine
        self.policy = policy
        self.prompt_tokens = requests.prompt_tokens
        self.output_tokens = requests.output_tokens
        self.domain = requests.domain
        self.kv_need = (requests.prompt_tokens + requests.output_tokens).astype(np.int64)
        self.kv_capacity = kv_capacity
        self.draw_store = None
        if policy.draws is not None:
            shift = policy.draws.request_shift(len(requests))
            base = policy.draws.base_logit
            domain = requests.domain

            def base_logit_of(ids: np.ndarray) -> np.ndarray:
                logits = base[domain[ids]]
                return logits + shift[ids][:, None] if shift is not None else logits

            self.draw_store = DrawStore(policy.draws, base_logit_of, requests.output_tokens, policy.lag_steps)
        self.log = RequestLog.empty(len(requests))
        self.steps = StepLog()
        self.positions = PositionCounts.empty(policy.gamma)
        self.allow_blocks = not (workload.closed_loop is not None and engine.replicas > 1)
        self.num_finished = 0
        self._progress = progress
        self._events: list[tuple[float, int]] = []
        self.routes_by_load = engine.replicas > 1 and engine.router == "least_loaded"
        self.replicas = [Replica(self, i) for i in range(engine.replicas)]
        self.arrivals = Arrivals(self)

    def arrive(self, request_id: int, now: float) -> None:
        self.log.arrival_s[request_id] = now
        self._events.append((now, 1))

    def finish(self, request_id: int, now: float) -> None:
        self.log.finish_s[request_id] = now
        self._events.append((now, -1))
        self.num_finished += 1
        if self._progress is not None and self.num_finished % 256 == 0:
            self._progress(self.num_finished)
        self.arrivals.on_finish(now)

    def time_in_system_area(self) -> float:
        """Integral over time of the number of requests in the system, from the arrival and finish events in
        time order (a replica reports the finishes of a block when the block ends)."""
        events = np.array(self._events, dtype=float).reshape(-1, 2)
        order = np.lexsort((-events[:, 1], events[:, 0]))  # at equal times, arrivals first
        times, deltas = events[order, 0], events[order, 1]
        in_system = np.cumsum(deltas)
        if in_system.min(initial=0) < 0:
            raise RuntimeError("a request finished before it arrived")
        return float(np.sum(in_system[:-1] * np.diff(times)))


def simulate_arm(workload, cost, engine: EngineConfig, policy: ArmPolicy, kv_capacity: int,
                 progress: Optional[Callable[[int], None]] = None) -> ArmResult:
    """Run one arm to completion (every request finished)."""
    started = time.perf_counter()
    run = ArmRun(workload, cost, engine, policy, kv_capacity, progress)
    run.env.run()
    if run.num_finished != len(run.prompt_tokens):
        raise RuntimeError(
            f"simulation ended with {len(run.prompt_tokens) - run.num_finished} requests unfinished"
        )
    if progress is not None:
        progress(run.num_finished)
    return ArmResult(
        log=run.log,
        steps=run.steps.columns(),
        positions=run.positions,
        time_in_system_area=run.time_in_system_area(),
        sim_wall_s=time.perf_counter() - started,
    )
