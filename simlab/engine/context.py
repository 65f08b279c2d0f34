"""What a replica may read and do: the small context one arm's simulation gives each of its replicas."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from simlab.engine.decode import ArmPolicy
from simlab.engine.horizon import Horizon
from simlab.engine.logs import PositionCounts, RequestLog, StepLog


@dataclass
class RequestTable:
    """The arm's requests as arrays indexed by request id, plus what the engine tracks per request."""

    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    domain: np.ndarray
    prefix_blocks: Optional[list[np.ndarray]]  # each request's cacheable prefix block ids (prefix caching only)
    emitted: np.ndarray = field(init=False)  # tokens emitted so far (kept across a preemption)
    admitted: np.ndarray = field(init=False)  # admitted at least once
    # disaggregated: the prompt's KV is on a prefill replica (from its prefill's end until it lands on a decode one)
    remote: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.emitted = np.zeros(len(self.prompt_tokens), dtype=np.int64)
        self.admitted = np.zeros(len(self.prompt_tokens), dtype=bool)
        self.remote = np.zeros(len(self.prompt_tokens), dtype=bool)


@dataclass
class EngineCounters:
    """Arm-wide counts that summaries report."""

    num_preemptions: int = 0
    cached_prompt_tokens: int = 0  # prompt tokens served from the prefix cache at first admissions


@dataclass
class ReplicaContext:
    """Everything a replica needs from its arm: the clock, costs, policy, limits, requests, records, the
    arm's horizon (when outside events may next act) and where to report finishes."""

    env: object  # simpy.Environment
    cost: object  # simlab.hardware CostModel
    policy: ArmPolicy
    limits: object  # simlab.config.scenario.EngineConfig
    requests: RequestTable
    draw_store: object  # DrawStore, or None without drafting
    log: RequestLog
    steps: StepLog
    positions: PositionCounts
    counters: EngineCounters
    outside_horizon: Callable[[object], Horizon]  # the horizon of events from outside, for one replica
    finished: Callable[[float, int, int], None]  # (finish time, request id, replica), in time then id order
    new_pool: Callable[[], object]  # a fresh KVPool for a replica
    router_reads_state: bool
    # several replicas: an event that fires once everything due at the current time (ends, finishes, arrivals)
    # has been handled, in the order docs/engine.md section 4 gives; a replica waits for it before its next start
    start_gate: Optional[Callable[[], object]] = None
    # disaggregation (docs/engine.md section 9): a prefill replica hands each completed prompt on with
    # ``handed_off(end time, request id, replica)``; a decode replica receives the prompts' KV over ``new_link()``
    # and reports each transfer with ``transfer_started(request id, landing time)``
    role: str = "colocated"  # colocated | prefill | decode
    handed_off: Optional[Callable[[float, int, int], None]] = None
    new_link: Optional[Callable[[], object]] = None
    transfer_started: Optional[Callable[[int, float], None]] = None
    draft_recompute: bool = False  # a decode replica builds the drafter's KV over each landed prompt
