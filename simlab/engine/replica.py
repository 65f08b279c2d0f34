"""One serving replica as a SimPy process: FCFS admission, chunked prefill, continuous batching of decode steps.

Each wake-up of the process runs one block (block.py): one iteration, or several over which nothing outside
the replica can change its batch. Blocks give exactly the same result as single iterations.
"""

from __future__ import annotations

import math
from collections import deque
from typing import TYPE_CHECKING

import numpy as np

from simlab.engine.block import Roster, commit_block, new_decoders, plan_block
from simlab.engine.decode import DecodeSet

if TYPE_CHECKING:  # pragma: no cover
    from simlab.engine.simulate import ArmRun

MAX_BLOCK_STEPS = 64
MIN_BLOCK_STEPS = 4  # a block re-plans when its inputs drift: shorter ones cost more than single steps


class Replica:
    """A single engine instance with its own batch, KV cache and queue."""

    def __init__(self, run: "ArmRun", index: int) -> None:
        self.run = run
        self.env = run.env
        self.index = index
        self.waiting: deque[int] = deque()
        self.prefilling: list[list[int]] = []  # [request id, prompt tokens done], in admission order
        self.decode = DecodeSet(run.policy, run.draw_store)
        self.kv_used = 0
        self.clock_s = 0.0  # this replica's time, summed step by step (SimPy's clock only orders events)
        self._wake = None
        self._last_step_s = 1e-3  # the last decode-only step's time: sizes blocks only
        self.process = self.env.process(self._loop())

    @property
    def load(self) -> int:
        """Requests queued or running here (the least-loaded router's measure)."""
        return len(self.waiting) + len(self.prefilling) + len(self.decode)

    def submit(self, request_id: int, now_s: float) -> None:
        self.waiting.append(request_id)
        if self._wake is not None and not self._wake.triggered:
            self.clock_s = max(self.clock_s, now_s)
            self._wake.succeed()

    def _admit(self) -> None:
        run = self.run
        while self.waiting and len(self.prefilling) + len(self.decode) < run.engine.max_num_seqs:
            request_id = self.waiting[0]
            need = run.kv_need[request_id]
            if self.kv_used + need > run.kv_capacity:
                break
            self.waiting.popleft()
            self.kv_used += need
            self.prefilling.append([request_id, 0])

    def _loop(self):
        env = self.env
        while True:
            self._admit()
            if not self.prefilling and not len(self.decode):
                self._wake = env.event()
                yield self._wake
                self._wake = None
                continue
            end_s, finish = self._iterate()
            yield env.timeout(max(end_s - env.now, 0.0))
            self.clock_s = end_s
            finish()

    # --------------------------------------------------------------------------------------------- one block
    def _iterate(self):
        """Plan and commit the next block; returns its end time and what to do when it ends."""
        run, decode = self.run, self.decode
        engine, policy = run.engine, run.policy
        prefill = self._prefill_plan()
        if prefill is None:  # prefills that cannot all complete now: one iteration, prefill chunked
            roster, num_steps = Roster.build(decode, []), 1
        else:
            roster = Roster.build(decode, prefill.joiners)
            num_steps = self._block_len(roster)
        block = plan_block(policy, roster, num_steps, run.draw_store)
        exact = block.num_exact
        anchors = block.anchors[:exact]
        decode_tokens = block.batch_tokens[:exact]
        context = block.context[:exact].astype(float)
        requests = np.maximum(anchors, 1)
        verify_s = np.where(anchors > 0, run.cost.verify_s(decode_tokens, context, requests), 0.0)
        draft_s = policy.draft_s(anchors, context)
        step_s = draft_s + verify_s
        late = prefill is None  # prefill chunks handed out after planning the decode part
        if late:
            prefill = _Prefill.allocate(self, min(engine.prefill_budget, engine.max_batch_tokens - int(decode_tokens[0])))
        if prefill.tokens:
            step_s[0] = draft_s[0] + run.cost.step_s(
                int(decode_tokens[0]), float(context[0]), int(anchors[0]), prefill.tokens, prefill.attn_pairs
            )
        if exact == 1:
            ends, count, finish_step = np.array([self.clock_s + step_s[0]]), 1, None
        else:
            ends = np.add.accumulate(np.concatenate([[self.clock_s], step_s]))[1:]
            count, finish_step = self._block_end(block, roster, anchors, ends)
        self._record(block, count, ends[:count], step_s[:count], decode_tokens[:count], prefill)
        finished = commit_block(decode, roster, block, count)
        run.log.steps[roster.request_id] += np.add.reduce(block.active[:count], axis=0)
        if late and prefill.joiners:  # they decode from the next iteration
            decode.extend(new_decoders(prefill.joiners))
        for request_id in [j[0] for j in prefill.joiners] + prefill.single_token:
            run.log.first_token_s[request_id] = ends[0]
        done = []
        if np.logical_or.reduce(finished):
            if count == 1:
                done = [(float(ends[0]), int(r)) for r in roster.request_id[finished]]
            else:
                finish_step = block.finish_step(roster) if finish_step is None else finish_step
                done = [(float(ends[finish_step[i]]), int(roster.request_id[i])) for i in np.flatnonzero(finished)]
        done += [(float(ends[0]), request_id) for request_id in prefill.single_token]
        if count > 1 or not prefill.tokens:  # a decode-only step: sizes the next block
            self._last_step_s = float(step_s[count - 1])
        return float(ends[count - 1]), lambda: self._release(sorted(done))

    def _block_end(self, block, roster: Roster, anchors: np.ndarray, ends: np.ndarray):
        """How many of the block's exact steps to commit: up to the first where nobody is left, where a finish
        matters beyond the batch, or during which the next request arrives. Also returns each request's finish
        step when it was needed."""
        last = len(ends) - 1
        idle = np.flatnonzero(anchors[1:] == 0)  # everyone has finished: nothing left to step
        if idle.size:
            last = min(last, int(idle[0]))
        finish_step = None
        if self._finish_ends_block():
            finish_step = block.finish_step(roster)
            last = min(last, int(np.minimum.reduce(finish_step, initial=last)))
        next_arrival = self.run.arrivals.next_arrival_s()
        if next_arrival < ends[last]:
            last = min(last, int(ends.searchsorted(next_arrival, side="left")))
        return last + 1, finish_step

    def _prefill_plan(self):
        """When every prefilling request completes in the next iteration whatever the scheduler decides, their
        chunks (so the block can carry them on as decoders); otherwise None: the iteration is planned alone and
        prefill takes what the decode part leaves of the token budget."""
        if not self.prefilling:
            return _Prefill()
        run, engine = self.run, self.run.engine
        bound = min(engine.prefill_budget, engine.max_batch_tokens - len(self.decode) * (1 + run.policy.gamma))
        needed = sum(int(run.prompt_tokens[r]) - done for r, done in self.prefilling)
        return _Prefill.allocate(self, bound) if needed <= bound else None

    def _block_len(self, roster: Roster) -> int:
        run = self.run
        if not run.allow_blocks or len(roster) == 0:
            return 1
        gap = run.arrivals.next_arrival_s() - self.clock_s
        if gap <= 0:
            return 1
        num_steps = math.ceil(gap / max(self._last_step_s, 1e-9)) + 1 if math.isfinite(gap) else MAX_BLOCK_STEPS
        if self._finish_ends_block():  # no request can finish before this many steps
            num_steps = min(num_steps, math.ceil(int(roster.remaining.min()) / (1 + run.policy.gamma)))
        num_steps = min(num_steps, MAX_BLOCK_STEPS)
        return num_steps if num_steps >= MIN_BLOCK_STEPS else 1

    def _finish_ends_block(self) -> bool:
        """A finish changes more than this batch when someone waits for its seat or KV, when it sends the next
        request (closed loop), or when the router reads this replica's load."""
        run = self.run
        return bool(self.waiting) or run.workload.closed_loop is not None or run.routes_by_load

    def _record(self, block, count: int, ends: np.ndarray, step_s: np.ndarray, decode_tokens: np.ndarray,
                prefill) -> None:
        run = self.run
        lengths, accepted = block.lengths[:count], block.accepted[:count]
        run.positions.add(lengths, accepted)  # rows sitting a step out verify and accept 0: not counted
        anchors = block.anchors[:count]
        row = run.steps.append(
            count, t_s=self.clock_s if count == 1 else np.concatenate([[self.clock_s], ends[:-1]]), step_s=step_s,
            replica=self.index, num_requests=anchors, decode_requests=anchors, batch_tokens=decode_tokens,
            verify_tokens=np.add.reduce(lengths, axis=1), accepted_tokens=np.add.reduce(accepted, axis=1),
            emitted_tokens=np.add.reduce(block.emitted[:count], axis=1),
        )
        if prefill.num_requests:  # the prefill part of the block's first step
            run.steps.add_to(row, num_requests=prefill.num_requests, batch_tokens=prefill.tokens,
                             prefill_tokens=prefill.tokens)

    def _release(self, done: list[tuple[float, int]]) -> None:
        run = self.run
        for finish_s, request_id in done:
            self.kv_used -= run.kv_need[request_id]
            run.finish(request_id, finish_s)


class _Prefill:
    """The prefill part of an iteration: chunks given to prefilling requests, and who completes."""

    def __init__(self, tokens: int = 0, attn_pairs: float = 0.0, num_requests: int = 0,
                 joiners=(), single_token=()) -> None:
        self.tokens = tokens
        self.attn_pairs = attn_pairs
        self.num_requests = num_requests
        self.joiners = list(joiners)  # (request id, domain, tokens left after the first, context)
        self.single_token = list(single_token)  # completed requests that wanted one token only

    @classmethod
    def allocate(cls, replica: Replica, budget: int) -> "_Prefill":
        """Chunks in admission order from ``budget`` tokens; completed requests leave ``replica.prefilling``."""
        run = replica.run
        tokens, attn_pairs, joiners, single, still = 0, 0.0, [], [], []
        num_requests = len(replica.prefilling)
        for entry in replica.prefilling:
            request_id, done = entry
            prompt = int(run.prompt_tokens[request_id])
            chunk = max(min(prompt - done, budget), 0)
            budget -= chunk
            tokens += chunk
            attn_pairs += chunk * (done + chunk / 2.0)
            if done + chunk < prompt:
                still.append([request_id, done + chunk])
            elif run.output_tokens[request_id] > 1:
                joiners.append((request_id, int(run.domain[request_id]), int(run.output_tokens[request_id]) - 1,
                                prompt + 1))
            else:
                single.append(request_id)
        replica.prefilling = still
        return cls(tokens, attn_pairs, num_requests, joiners, single)
