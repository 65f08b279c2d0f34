"""Simulate one arm: a SimPy environment with its replicas, the arrival process and the records."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np
import simpy

from simlab.config.scenario import EngineConfig
from simlab.engine.arrivals import Arrivals
from simlab.engine.decode import ArmPolicy
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
    extra: dict = field(default_factory=dict)


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
        self.log = RequestLog.empty(len(requests))
        self.steps = StepLog()
        self.positions = PositionCounts.empty(policy.gamma)
        self.allow_blocks = not (workload.closed_loop is not None and engine.replicas > 1)
        self.num_finished = 0
        self._progress = progress
        self._in_system = 0
        self._area = 0.0
        self._last_change_s = 0.0
        self.replicas = [Replica(self, i) for i in range(engine.replicas)]
        self.arrivals = Arrivals(self)

    def _account(self, now: float) -> None:
        self._area += self._in_system * (now - self._last_change_s)
        self._last_change_s = now

    def arrive(self, request_id: int, now: float) -> None:
        self._account(now)
        self._in_system += 1
        self.log.arrival_s[request_id] = now

    def finish(self, request_id: int, now: float) -> None:
        self._account(now)
        self._in_system -= 1
        self.log.finish_s[request_id] = now
        self.num_finished += 1
        if self._progress is not None and self.num_finished % 256 == 0:
            self._progress(self.num_finished)
        self.arrivals.on_finish(now)


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
        time_in_system_area=run._area,
        sim_wall_s=time.perf_counter() - started,
    )
