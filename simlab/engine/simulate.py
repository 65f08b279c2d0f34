"""Simulate one arm: a SimPy environment with its replicas, the source of requests, the router and the records."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Optional

import numpy as np
import simpy

from simlab.config.scenario import EngineConfig
from simlab.engine.context import EngineCounters, ReplicaContext, RequestTable
from simlab.engine.decode import ArmPolicy
from simlab.engine.drawstore import DrawStore
from simlab.engine.horizon import Horizon
from simlab.engine.kv import KVPool
from simlab.engine.intake import KVLink
from simlab.engine.logs import PositionCounts, RequestLog, StepLog
from simlab.engine.prefix_cache import PrefixCache, cacheable_blocks
from simlab.engine.replica import Replica
from simlab.engine.routing import ROUTERS
from simlab.engine.sources import ClosedLoop, OpenLoop


@dataclass
class ArmResult:
    """Everything one arm's simulation recorded."""

    log: RequestLog
    steps: dict[str, np.ndarray]
    positions: PositionCounts
    time_in_system_area: float  # integral of the number of requests in the system over time
    sim_wall_s: float
    counters: EngineCounters


class ArmSimulation:
    """One arm's SimPy environment: its replicas, the source of requests, the router and the records."""

    def __init__(self, workload, cost, engine: EngineConfig, policy: ArmPolicy, kv_capacity: int,
                 progress: Optional[Callable[[int], None]] = None, pools: Optional["PoolSizes"] = None) -> None:
        requests = workload.requests
        self.env = simpy.Environment()
        self.num_requests = len(requests)
        self.log = RequestLog.empty(len(requests))
        self.steps = StepLog()
        self.positions = PositionCounts.empty(policy.gamma)
        self.counters = EngineCounters()
        self.num_finished = 0
        self._progress = progress
        self._router = ROUTERS[engine.router]
        self._routed = 0
        # with several replicas, what happens at one time is handled in docs/engine.md section 4's order: the
        # iterations' ends (finishes by replica, then request id), then arrivals by request id, then starts
        self._batched = engine.num_replicas > 1
        self._pending_finishes: list[tuple[int, int, float]] = []
        self._pending_arrivals: list[tuple[int, float]] = []
        self._dispatch_due = False
        self._pending_handoffs: list[tuple[int, int]] = []  # disaggregated: (request id, prefill replica)
        self._pending_landings: list[int] = []
        self._gate = None
        prefix_blocks = None
        if engine.prefix_caching:
            prefix_blocks = cacheable_blocks(requests)
        table = RequestTable(requests.prompt_tokens, requests.output_tokens, requests.domain, prefix_blocks)
        block_size = engine.block_size if engine.kv_policy == "paged" else None
        ctx = ReplicaContext(
            env=self.env, cost=cost, policy=policy, limits=engine, requests=table,
            draw_store=_draw_store(policy, requests), log=self.log, steps=self.steps, positions=self.positions,
            counters=self.counters, outside_horizon=self._arrivals_horizon, finished=self._finished,
            new_pool=lambda: KVPool(kv_capacity, len(requests), block_size=block_size,
                                    cache=PrefixCache() if engine.prefix_caching else None),
            router_reads_state=self._router.reads_state and self._batched,
            start_gate=self._start_gate if self._batched else None,
        )
        if engine.disaggregation is None:
            self.replicas = [Replica(ctx, i) for i in range(engine.replicas)]
            self.decode_replicas: list[Replica] = []
        else:
            self._build_pools(ctx, engine, pools, len(requests), policy.method)
        closed = workload.closed_loop
        if closed is None:
            self.source = OpenLoop(self.env, requests.arrival_s, self._arrive)
        else:
            # a finish sends a request that may reach any other replica of its pool (disaggregated: the decode
            # pool, through a prefill replica, which bounds the decode replicas' blocks by its own iterations)
            self.source = ClosedLoop(self.env, len(requests), closed.concurrency, closed.think_time_s,
                                     self._arrive, num_replicas=len(self.decode_replicas or self.replicas))

    def _build_pools(self, ctx: ReplicaContext, engine: EngineConfig, pools: "PoolSizes", num_requests: int,
                     method: str) -> None:
        """Prefill replicas 0..P-1 (``self.replicas``, where arrivals go) and decode replicas P..P+D-1."""
        split = engine.disaggregation
        block_size = engine.block_size if engine.kv_policy == "paged" else None
        prefill_limits = engine.model_copy(update={
            "max_batch_tokens": split.prefill_max_batch_tokens or engine.max_batch_tokens,
            "prefill_chunk_tokens": split.prefill_chunk_tokens or engine.prefill_chunk_tokens})
        self._router = ROUTERS[split.prefill_router or engine.router]
        self._decode_router = ROUTERS[split.decode_router or engine.router]
        self._decode_routed = 0
        self._holder = np.full(num_requests, -1, dtype=np.int64)  # the prefill replica holding a request's KV
        prefill_ctx = replace(
            ctx, role="prefill", limits=prefill_limits, handed_off=self._handed_off,
            new_pool=lambda: KVPool(pools.prefill_kv_tokens, num_requests, block_size=block_size,
                                    cache=PrefixCache() if engine.prefix_caching else None),
            router_reads_state=self._router.reads_state and split.prefill_replicas > 1)
        decode_ctx = replace(
            ctx, role="decode", outside_horizon=self._decode_horizon, transfer_started=self._transfer_started,
            new_pool=lambda: KVPool(pools.decode_kv_tokens, num_requests, block_size=block_size),
            new_link=lambda: KVLink(pools.link_bytes_per_token(method), split.link_bytes_per_s, split.link_latency_s),
            draft_recompute=pools.recomputes_draft(method),
            router_reads_state=self._decode_router.reads_state and split.decode_replicas > 1)
        self.replicas = [Replica(prefill_ctx, i) for i in range(split.prefill_replicas)]
        self.decode_replicas = [Replica(decode_ctx, split.prefill_replicas + i) for i in range(split.decode_replicas)]

    def _handed_off(self, end_s: float, request_id: int, replica: int) -> None:
        """A prefill replica completed the request's prompt: it goes to a decode replica once everything at this
        time has been handled (routed with the arrivals)."""
        self._holder[request_id] = replica
        self._pending_handoffs.append((request_id, replica))
        self._dispatch_soon()

    def _transfer_started(self, request_id: int, land_s: float) -> None:
        def landed(_event) -> None:
            self._pending_landings.append(request_id)
            self._dispatch_soon()

        self.env.timeout(max(land_s - self.env.now, 0.0)).callbacks.append(landed)

    def _arrivals_horizon(self, replica: Replica) -> Horizon:
        """The source's horizon, past the next arrivals of an open loop that the router cannot send to
        ``replica`` (``Router.skipped``; co-located replicas, once every arrival so far has been routed)."""
        source = self.source.horizon()
        skipped = self._router.skipped
        if (skipped is None or not self._batched or self.decode_replicas or not isinstance(self.source, OpenLoop)
                or self._routed != self.source.num_sent):
            return source
        num_skipped = skipped(self.replicas, replica, self._routed)
        return replace(source, until_s=self.source.arrival_after_s(num_skipped)) if num_skipped else source

    def _decode_horizon(self, replica: Replica) -> Horizon:
        """Nothing reaches a decode replica before a prefill replica's iteration ends. While every prefill
        replica runs one (or is about to start), arrivals and landings elsewhere only queue behind them; an idle
        one starts at an arrival, or when a landing frees its KV, so then those bound the decode replicas too."""
        bounds = [r.completion_bound_s() for r in self.replicas]
        if math.inf not in bounds:
            return Horizon(until_s=min(bounds))
        source = self.source.horizon()
        until_s = min(source.until_s, min(bounds), min(r.intake.next_land_s() for r in self.decode_replicas))
        return Horizon(until_s=until_s, max_steps=source.max_steps, finish_ends=source.finish_ends)

    def _arrive(self, request_id: int, now_s: float) -> None:
        if self._batched:
            self._pending_arrivals.append((request_id, now_s))
            self._dispatch_soon()
        else:
            self._route(request_id, now_s)

    def _route(self, request_id: int, now_s: float) -> None:
        self.log.arrival_s[request_id] = now_s
        replicas = self.replicas
        index = self._router.choose(replicas, request_id, self._routed) if len(replicas) > 1 else 0
        self._routed += 1
        self.log.replica[request_id] = index
        replicas[index].submit(request_id, now_s)

    def _finished(self, finish_s: float, request_id: int, replica: int) -> None:
        self.log.finish_s[request_id] = finish_s
        self.num_finished += 1
        if self._progress is not None and self.num_finished % 256 == 0:
            self._progress(self.num_finished)
        if self._batched:
            self._pending_finishes.append((replica, request_id, finish_s))
            self._dispatch_soon()
        else:
            self.source.on_finish(finish_s)

    def _dispatch_soon(self) -> None:
        """Handle what is pending once every event already due at this time has run: a zero-delay event made now
        runs after those (SimPy runs events of one time in the order they were made)."""
        if not self._dispatch_due:
            self._dispatch_due = True
            self.env.timeout(0.0).callbacks.append(self._dispatch)

    def _start_gate(self):
        """The event a replica waits for before starting its next iteration at the current time."""
        if self._gate is None:
            self._gate = self.env.event()
        self._dispatch_soon()
        return self._gate

    def _dispatch(self, _event) -> None:
        self._dispatch_due = False
        if self._pending_landings:  # their prefill replicas free the KV; an idle decode replica starts
            landings, self._pending_landings = sorted(self._pending_landings), []
            first_decode = self.decode_replicas[0].index
            for request_id in landings:
                self.replicas[int(self._holder[request_id])].release_sent(request_id)
                self.decode_replicas[int(self.log.replica[request_id]) - first_decode].wake(self.env.now)
        if self._pending_handoffs:  # to the decode pool, by request id
            handoffs, self._pending_handoffs = sorted(self._pending_handoffs), []
            decode = self.decode_replicas
            for request_id, _ in handoffs:
                index = (self._decode_router.choose(decode, request_id, self._decode_routed)
                         if len(decode) > 1 else 0)
                self._decode_routed += 1
                self.log.replica[request_id] = decode[index].index
                decode[index].submit(request_id, self.env.now)
        finishes, self._pending_finishes = sorted(self._pending_finishes), []
        for _, _, finish_s in finishes:
            self.source.on_finish(finish_s)  # a closed loop's next requests join the pending arrivals
        arrivals, self._pending_arrivals = sorted(self._pending_arrivals), []
        for request_id, now_s in arrivals:
            self._route(request_id, now_s)
        gate, self._gate = self._gate, None
        if gate is not None:
            gate.succeed()

    def time_in_system_area(self) -> float:
        """Integral over time of the number of requests in the system, from the arrival and finish times the
        request log holds (NaN for events that did not happen), in time order."""
        arrived = self.log.arrival_s[~np.isnan(self.log.arrival_s)]
        finished = self.log.finish_s[~np.isnan(self.log.finish_s)]
        times = np.concatenate([arrived, finished])
        deltas = np.concatenate([np.ones(len(arrived)), np.full(len(finished), -1.0)])
        order = np.lexsort((-deltas, times))  # at equal times, arrivals first
        times, deltas = times[order], deltas[order]
        in_system = np.cumsum(deltas)
        if in_system.min(initial=0) < 0:
            raise RuntimeError("a request finished before it arrived")
        return float(np.sum(in_system[:-1] * np.diff(times)))


def _draw_store(policy: ArmPolicy, requests) -> Optional[DrawStore]:
    if policy.draws is None:
        return None
    shift = policy.draws.request_shift(len(requests))
    base = policy.draws.base_logit
    domain = requests.domain

    def base_logit_of(ids: np.ndarray) -> np.ndarray:
        logits = base[domain[ids]]
        return logits + shift[ids][:, None] if shift is not None else logits

    match = policy.draws.match_prob
    overlap = requests.overlap
    if match is None:
        match_of = None
    elif overlap is None:
        match_of = lambda ids: match[domain[ids]]  # noqa: E731
    else:  # a request's own share of output repeating its context, where the trace gives one
        match_of = lambda ids: overlap[ids]  # noqa: E731
    return DrawStore(policy.draws, base_logit_of, requests.output_tokens, policy.lag_steps, match_of)


@dataclass(frozen=True)
class PoolSizes:
    """A disaggregated engine's KV per replica of each pool, the target's KV bytes per token, and the drafter's
    KV: moved with it (``transfer``, its bytes per token by method) or rebuilt on the decode replica."""

    prefill_kv_tokens: int
    decode_kv_tokens: int
    kv_bytes_per_token: float
    draft_kv: str = "transfer"
    draft_kv_bytes_per_token: dict = field(default_factory=dict)  # method -> bytes per token

    def link_bytes_per_token(self, method: str) -> float:
        """What the link moves per prompt token for an arm drafting with ``method``."""
        if self.draft_kv != "transfer":
            return self.kv_bytes_per_token
        return self.kv_bytes_per_token + self.draft_kv_bytes_per_token.get(method, 0.0)

    def recomputes_draft(self, method: str) -> bool:
        return self.draft_kv == "recompute" and method != "none"

    def capacity_by_replica(self, engine: EngineConfig) -> np.ndarray:
        """KV tokens of each replica: the prefill pool's, then the decode pool's."""
        split = engine.disaggregation
        return np.array([self.prefill_kv_tokens] * split.prefill_replicas
                        + [self.decode_kv_tokens] * split.decode_replicas, dtype=np.int64)


def simulate_arm(workload, cost, engine: EngineConfig, policy: ArmPolicy, kv_capacity: int,
                 progress: Optional[Callable[[int], None]] = None, pools: Optional[PoolSizes] = None) -> ArmResult:
    """Run one arm to completion (every request finished); ``pools`` is needed with ``engine.disaggregation``."""
    started = time.perf_counter()
    sim = ArmSimulation(workload, cost, engine, policy, kv_capacity, progress, pools)
    sim.env.run()
    if sim.num_finished != sim.num_requests:
        raise RuntimeError(f"simulation ended with {sim.num_requests - sim.num_finished} requests unfinished")
    if progress is not None:
        progress(sim.num_finished)
    return ArmResult(
        log=sim.log,
        steps=sim.steps.columns(),
        positions=sim.positions,
        time_in_system_area=sim.time_in_system_area(),
        sim_wall_s=time.perf_counter() - started,
        counters=sim.counters,
    )
