"""One serving replica as a SimPy process: KV growth (paged), FCFS admission, chunked prefill, continuous
batching of decode steps (docs/engine.md).

Each wake-up of the process runs one block (block.py): one iteration, or several over which nothing outside
the replica can change its batch (horizon.py). Blocks give exactly the result of single iterations.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from simlab.engine import kv_growth
from simlab.engine.block import Roster, commit_block, new_decoders, plan_block
from simlab.engine.context import ReplicaContext
from simlab.engine.decode import DecodeSet
from simlab.engine.horizon import FINISH_ENDS, Horizon, combine
from simlab.engine.intake import Intake
from simlab.engine.prefill import PrefillPart, allocate

MAX_BLOCK_STEPS = 64
MIN_BLOCK_STEPS = 4  # a numpy block re-plans when its inputs drift: shorter ones cost more than single steps


class Replica:
    """A single engine instance with its own queue, running requests and KV cache."""

    def __init__(self, ctx: ReplicaContext, index: int) -> None:
        self.ctx = ctx
        self.env = ctx.env
        self.index = index
        self.waiting: deque[int] = deque()
        self.prefilling: list[list[int]] = []  # [request id, tokens done, tokens to prefill], admission order
        self.decode = DecodeSet(ctx.policy, ctx.draw_store)
        self.kv = ctx.new_pool()
        self.num_running = 0  # admitted and not yet finished (or preempted)
        self.clock_s = 0.0  # this replica's time, summed step by step (SimPy's clock only orders events)
        self._wake = None
        self._last_step_s = 1e-3  # the last decode-only step's time: sizes blocks only
        self.role = ctx.role
        self.intake = Intake(ctx) if ctx.role == "decode" else None  # the prompts' KV it receives
        self.in_flight_end_s = None  # the running iteration's end (a prefill replica's bound on its hand-offs)
        self.process = self.env.process(self._loop())

    @property
    def load(self) -> int:
        """Requests queued or running here (the least-loaded router's measure)."""
        return len(self.waiting) + self.num_running

    def cached_prefix_blocks(self, request_id: int) -> int:
        """How many leading prefix blocks of the request's prompt this replica's cache holds."""
        cache, requests = self.kv.cache, self.ctx.requests
        if cache is None:
            return 0
        return cache.match(requests.prefix_blocks[request_id], int(requests.prompt_tokens[request_id]))

    def completion_bound_s(self) -> float:
        """No prompt completes here before this time: the running iteration's end; none while idle (it starts
        only at an arrival or a landing); now when about to start."""
        if self.in_flight_end_s is not None:
            return self.in_flight_end_s
        if self._wake is not None and not self._wake.triggered:
            return math.inf
        return self.env.now

    def release_sent(self, request_id: int) -> None:
        """A prefill replica: the request's KV landed on its decode replica; a request waiting for KV may start."""
        self.kv.release(request_id)
        if self.waiting:
            self.wake(self.env.now)

    def submit(self, request_id: int, now_s: float) -> None:
        self.waiting.append(request_id)
        self.wake(now_s)

    def wake(self, now_s: float) -> None:
        """An idle replica starts an iteration at ``now_s`` (an arrival, or a landing that concerns it; the
        simulation calls this once everything due at that time has been handled)."""
        if self._wake is not None and not self._wake.triggered:
            self.clock_s = max(self.clock_s, now_s)
            self._wake.succeed()

    # --------------------------------------------------------------------------------- growth and admission
    def _admit(self) -> None:
        ctx, kv = self.ctx, self.kv
        requests = ctx.requests
        while self.waiting and self.num_running < ctx.limits.max_num_seqs:
            request_id = self.waiting[0]
            if self.intake is not None and requests.remote[request_id]:  # its KV is on a prefill replica
                if not self.intake.admit(request_id, kv, self.clock_s):
                    break
                self.waiting.popleft()
                self.num_running += 1
                continue
            emitted = int(requests.emitted[request_id])
            target = int(requests.prompt_tokens[request_id]) + emitted  # the prompt, or a recompute
            hits = []
            if kv.cache is not None:
                blocks = requests.prefix_blocks[request_id]
                hits = blocks[: kv.cache.match(blocks, target)].tolist()
            cached = len(hits) * kv.block_units * kv.unit_tokens
            if kv.paged:
                units = kv.units_for(target - cached)
            elif self.role == "prefill":  # a prefill replica holds the prompt's KV only
                units = target - cached
            else:
                units = int(requests.prompt_tokens[request_id] + requests.output_tokens[request_id]) - cached
            if not kv.admit(request_id, units, hits):
                break
            self.waiting.popleft()
            self.num_running += 1
            self.prefilling.append([request_id, cached, target])
            if not requests.admitted[request_id]:
                requests.admitted[request_id] = True
                ctx.counters.cached_prompt_tokens += cached

    def _grow(self) -> None:
        """Paged KV: give every decoding request the blocks this iteration may write, preempting the newest
        running requests when none are free (docs/engine.md 6.2)."""
        if not self.kv.paged or not len(self.decode):
            return
        kv_growth.grow(self.kv, self.decode, self.prefilling, self.ctx.policy.gamma, self._preempt,
                       self.ctx.policy.lookahead_slots)

    def _preempt(self, request_id: int) -> None:
        """Back to the front of the queue: its KV is released; it keeps what it emitted and recomputes."""
        ctx = self.ctx
        stays = self.decode.request_id != request_id
        if not np.logical_and.reduce(stays):
            row = int(np.flatnonzero(~stays)[0])
            ctx.requests.emitted[request_id] = ctx.requests.output_tokens[request_id] - self.decode.remaining[row]
            self.decode.overwrite({name: getattr(self.decode, name)[stays] for name in DecodeSet.COLUMNS})
        else:
            self.prefilling = [entry for entry in self.prefilling if entry[0] != request_id]
        self.kv.release(request_id)
        if self.intake is not None:
            self.intake.forget(request_id)
        self.num_running -= 1
        self.waiting.appendleft(request_id)
        ctx.counters.num_preemptions += 1

    def _loop(self):
        env = self.env
        while True:
            self._grow()
            self._admit()
            if self.intake is not None:  # requests whose KV has landed prefill the prompt's last token
                self.prefilling += self.intake.landed(self.clock_s)
            if not self.prefilling and not len(self.decode):  # idle until an arrival or a landing wakes it
                self._wake = env.event()
                yield self._wake
                self._wake = None
                continue
            end_s, finish = self._iterate()
            self.in_flight_end_s = end_s
            yield env.timeout(max(end_s - env.now, 0.0))
            self.clock_s = end_s
            self.in_flight_end_s = None
            finish()
            if self.ctx.start_gate is not None:  # every end and arrival at this time is handled first (engine.md 4)
                yield self.ctx.start_gate()

    # --------------------------------------------------------------------------------------------- one block
    def _horizon(self) -> Horizon:
        """The tightest of the arm's sources and this replica's own: a waiting request may take a finished
        request's seat or KV; a router that reads replicas' state reads this one's; paged KV may run out."""
        own = []
        if self.waiting or self.ctx.router_reads_state:
            own.append(FINISH_ENDS)
        if self.kv.paged:
            own.append(Horizon(max_steps=kv_growth.safe_steps(self.kv, self.decode, self.prefilling,
                                                               self.ctx.policy.gamma, MAX_BLOCK_STEPS,
                                                               self.ctx.policy.lookahead_slots)))
        if self.intake is not None and len(self.intake):  # a landing prompt joins at the next iteration's start
            own.append(Horizon(until_s=self.intake.next_land_s()))
        outside = self.ctx.outside_horizon(self)
        return combine([outside, *own]) if own else outside

    def _iterate(self):
        """Plan and commit the next block; returns its end time and what to do when it ends."""
        ctx, decode = self.ctx, self.decode
        limits, policy, cost = ctx.limits, ctx.policy, ctx.cost
        horizon = self._horizon()
        prefill = self._prefill_plan()
        if prefill is None:  # prefills that cannot all complete now: one iteration, prefill chunked
            roster, num_steps = Roster.build(decode, []), 1
        else:
            roster = Roster.build(decode, prefill.joiners)
            num_steps = self._block_len(roster, horizon, prefill)
        block = plan_block(policy, roster, num_steps, ctx.draw_store, stop_at_finish=horizon.finish_ends)
        exact = block.num_exact
        anchors = block.anchors[:exact]
        decode_tokens = block.batch_tokens[:exact]
        context = block.context[:exact].astype(float)
        verify_s, draft_s = block.prices(policy, cost, exact)
        step_s = draft_s + verify_s
        late = prefill is None  # prefill chunks handed out after planning the decode part
        if late:
            prefill = self._allocate(min(limits.prefill_budget, limits.max_batch_tokens - int(decode_tokens[0])))
        if prefill.tokens:
            step_s[0] = draft_s[0] + cost.step_s(
                int(decode_tokens[0]), float(context[0]), int(anchors[0]), prefill.tokens, prefill.attn_pairs
            )
            if self.intake is not None:
                step_s[0] += self.intake.rebuild_s(prefill.completed)
        if exact == 1:
            ends, count, finish_step = np.array([self.clock_s + step_s[0]]), 1, None
        else:
            ends = np.add.accumulate(np.concatenate([[self.clock_s], step_s]))[1:]
            count, finish_step = self._block_end(block, roster, anchors, ends, horizon)
        inserts = prefill.completed if self.kv.cache is not None else []
        if inserts and count > 1:  # their prompts completed at the end of step 0, before the block ends
            self._insert_prompts(inserts)
            inserts = []
        finished = commit_block(decode, roster, block, count)
        any_finished = np.logical_or.reduce(finished)
        kv_tokens = None  # reserved KV that nobody releases during the block: the pool's level at every step
        if self.kv.paged or (count > 1 and (any_finished or prefill.finishing)):
            if finish_step is None and (any_finished or self.kv.paged):
                finish_step = block.finish_step(roster)
            kv_tokens = kv_growth.series(self.kv, roster, block, count, finish_step, prefill.finishing,
                                         policy.gamma, policy.lookahead_slots)
        self._record(block, count, ends[:count], step_s[:count], decode_tokens[:count], prefill, kv_tokens)
        ctx.log.steps[roster.request_id] += np.add.reduce(block.active[:count], axis=0)
        if late and prefill.joiners:  # they decode from the next iteration
            decode.extend(new_decoders(prefill.joiners))
        for request_id in prefill.first:
            ctx.log.first_token_s[request_id] = ends[0]
        done = []
        if any_finished:
            if count == 1:
                done = [(float(ends[0]), int(r)) for r in roster.request_id[finished]]
            else:
                done = [(float(ends[finish_step[i]]), int(roster.request_id[i])) for i in np.flatnonzero(finished)]
        done += [(float(ends[0]), request_id) for request_id in prefill.finishing]
        handoffs = prefill.completed if self.role == "prefill" else []
        if count > 1 or not prefill.tokens:  # a decode-only step: sizes the next block
            self._last_step_s = float(step_s[count - 1])
        return float(ends[count - 1]), lambda: self._end_block(sorted(done), inserts, float(ends[0]), handoffs)

    def _insert_prompts(self, request_ids: list[int]) -> None:
        requests = self.ctx.requests
        for request_id in request_ids:
            self.kv.insert_prompt(request_id, requests.prefix_blocks[request_id].tolist())

    def _end_block(self, done: list[tuple[float, int]], inserts: list[int], first_end_s: float,
                   handoffs: list[int]) -> None:
        if inserts:
            self._insert_prompts(inserts)
        for request_id in handoffs:  # a prefill replica keeps their KV until it lands on a decode replica
            self.num_running -= 1
            self.ctx.requests.remote[request_id] = True
            self.ctx.handed_off(first_end_s, request_id, self.index)
        for finish_s, request_id in done:
            self.kv.release(request_id)
            self.num_running -= 1
            self.ctx.finished(finish_s, request_id, self.index)

    def _block_end(self, block, roster: Roster, anchors: np.ndarray, ends: np.ndarray, horizon: Horizon):
        """How many of the block's exact steps to commit: up to the first where nobody is left, where a finish
        matters beyond the batch, or during which an outside event may happen. Also returns each request's
        finish step when it was needed."""
        last = len(ends) - 1
        idle = np.flatnonzero(anchors[1:] == 0)  # everyone has finished: nothing left to step
        if idle.size:
            last = min(last, int(idle[0]))
        finish_step = None
        if horizon.finish_ends:
            finish_step = block.finish_step(roster)
            last = min(last, int(np.minimum.reduce(finish_step, initial=last)))
        if horizon.until_s < ends[last]:
            last = min(last, int(ends.searchsorted(horizon.until_s, side="left")))
        return last + 1, finish_step

    def _prefill_plan(self):
        """When every prefilling request completes in the next iteration whatever the scheduler decides, their
        chunks (so the block can carry them on as decoders); otherwise None: the iteration is planned alone and
        prefill takes what the decode part leaves of the token budget."""
        if not self.prefilling:
            return PrefillPart()
        limits = self.ctx.limits
        bound = min(limits.prefill_budget,
                    limits.max_batch_tokens - len(self.decode) * self.ctx.policy.max_tokens_per_request)
        needed = sum(target - done for _, done, target in self.prefilling)
        return self._allocate(bound) if needed <= bound else None

    def _allocate(self, budget: int) -> PrefillPart:
        requests = self.ctx.requests
        part, self.prefilling = allocate(self.prefilling, budget, requests, requests.emitted, self.ctx.log.steps,
                                         hand_off=self.role == "prefill")
        return part

    def _block_len(self, roster: Roster, horizon: Horizon, prefill: PrefillPart) -> int:
        if horizon.max_steps <= 1 or len(roster) == 0:
            return 1
        if prefill.completed and self.kv.cache is not None and (self.waiting or self.ctx.router_reads_state):
            return 1  # prompts completing now join the cache at this step's end: a hit may admit, or route
        if prefill.finishing and horizon.finish_ends:
            return 1  # a request whose prefill emitted its only token finishes at this step's end
        gap = horizon.until_s - self.clock_s
        if gap <= 0:
            return 1
        num_steps = math.ceil(gap / max(self._last_step_s, 1e-9)) + 1 if math.isfinite(gap) else MAX_BLOCK_STEPS
        compiled = self.ctx.policy.block_kernel() is not None
        if horizon.finish_ends:
            if compiled:  # some request finishes within this many steps (each emits a token a step); the
                # compiled block stops at the first finish itself
                num_steps = min(num_steps, int(np.minimum.reduce(roster.remaining + roster.join)))
            else:  # no request can finish before this many steps
                num_steps = min(num_steps, math.ceil(int(roster.remaining.min()) / (1 + self.ctx.policy.gamma)))
        num_steps = min(num_steps, horizon.max_steps, MAX_BLOCK_STEPS)
        # a compiled block never re-plans, so a short one costs less than its single steps
        return num_steps if num_steps >= (2 if compiled else MIN_BLOCK_STEPS) else 1

    def _record(self, block, count: int, ends: np.ndarray, step_s: np.ndarray, decode_tokens: np.ndarray,
                prefill: PrefillPart, kv_tokens) -> None:
        ctx = self.ctx
        lengths, accepted = block.lengths[:count], block.accepted[:count]
        ctx.positions.add(lengths, accepted)  # rows sitting a step out verify and accept 0: not counted
        anchors = block.anchors[:count]
        accepted_tokens = block.step_accepted(count)
        row = ctx.steps.append(
            count, t_s=self.clock_s if count == 1 else np.concatenate([[self.clock_s], ends[:-1]]), step_s=step_s,
            replica=self.index, num_requests=anchors, decode_requests=anchors, batch_tokens=decode_tokens,
            # a decoding request verifies, accepts some and emits one more; one sitting the step out does nothing
            verify_tokens=decode_tokens - anchors, accepted_tokens=accepted_tokens,
            emitted_tokens=accepted_tokens + anchors, drafted_tokens=block.drafted_tokens(count),
            draft_len=block.draft_len_column(count),
            kv_tokens=self.kv.kv_tokens() if kv_tokens is None else kv_tokens,
        )
        if prefill.num_requests:  # the prefill part of the block's first step
            ctx.steps.add_to(row, num_requests=prefill.num_requests, batch_tokens=prefill.tokens,
                             prefill_tokens=prefill.tokens)
