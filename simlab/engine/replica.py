"""One serving replica as a SimPy process: FCFS admission, chunked prefill, continuous batching of decode steps.

Each wake-up of the process is one engine iteration, or a block of iterations over an unchanged batch (no
arrival, admission, prefill or finish can happen inside it); blocks give exactly the same result as single steps.
"""

from __future__ import annotations

import math
from collections import deque
from typing import TYPE_CHECKING

import numpy as np

from simlab.engine.decode import DecodeSet

if TYPE_CHECKING:  # pragma: no cover
    from simlab.engine.simulate import ArmRun

MAX_BLOCK_STEPS = 64


class Replica:
    """A single engine instance with its own batch, KV cache and queue."""

    def __init__(self, run: "ArmRun", index: int) -> None:
        self.run = run
        self.env = run.env
        self.index = index
        self.waiting: deque[int] = deque()
        self.prefilling: list[list[int]] = []  # [request id, prompt tokens done]
        self.decode = DecodeSet(run.policy)
        self.kv_used = 0
        self._wake = None
        self._last_step_s = 1e-3  # sizes blocks only
        self.clock_s = 0.0  # this replica's time, summed step by step (SimPy's clock only orders events)
        self._tokens_per_step = 1.0 + 0.5 * run.policy.gamma  # running estimate, only sizes blocks
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
        engine = run.engine
        while self.waiting and len(self.prefilling) + len(self.decode) < engine.max_num_seqs:
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
            if self.prefilling:
                num_steps, completed = self._mixed_step()
            else:
                num_steps, completed = self._decode_block(), []
            end_s = self._end_s
            yield env.timeout(max(end_s - env.now, 0.0))
            self.clock_s = end_s
            self._finish_step(completed)

    def _decode_block(self) -> int:
        run, decode = self.run, self.decode
        now = self.clock_s
        num_requests = len(decode)
        num_steps = self._block_len()
        plan = decode.plan(num_steps)
        exact = plan.num_exact
        batch_tokens = plan.batch_tokens[:exact]
        context = plan.context_before[:exact].astype(float)
        verify_s = np.asarray(run.cost.verify_s(batch_tokens, context, num_requests))
        step_s = run.policy.draft_s(num_requests, context) + np.broadcast_to(verify_s, (exact,))
        ends = np.cumsum(np.concatenate([[now], step_s]))[1:]
        last = min(exact - 1, plan.first_finish)
        next_arrival = run.arrivals.next_arrival_s()
        if next_arrival < ends[last]:
            last = min(last, int(np.searchsorted(ends, next_arrival, side="left")))
        count = last + 1
        self._commit(plan, count, now, step_s[:count], batch_tokens[:count], prefill_tokens=0, num_prefilling=0)
        return count

    def _block_len(self) -> int:
        run = self.run
        if not run.allow_blocks:
            return 1
        decode = self.decode
        gap = run.arrivals.next_arrival_s() - self.clock_s
        if gap <= 0:
            return 1
        to_arrival = math.ceil(gap / max(self._last_step_s, 1e-9)) + 1 if math.isfinite(gap) else MAX_BLOCK_STEPS
        to_finish = math.ceil(int(decode.remaining.min()) / self._tokens_per_step) + 1
        return int(max(1, min(MAX_BLOCK_STEPS, to_arrival, to_finish)))

    def _mixed_step(self):
        """One iteration holding every decode request (verify first) plus prefill chunks in the leftover budget."""
        run, decode = self.run, self.decode
        engine = run.engine
        now = self.clock_s
        num_requests = len(decode)
        plan = decode.plan(1) if num_requests else None
        decode_tokens = int(plan.batch_tokens[0]) if plan is not None else 0
        budget = min(engine.prefill_budget, engine.max_batch_tokens - decode_tokens)
        prefill_tokens, attn_pairs, completed = 0, 0.0, []
        for entry in self.prefilling:
            if budget <= 0:
                break
            request_id, done = entry
            chunk = min(int(run.prompt_tokens[request_id]) - done, budget)
            prefill_tokens += chunk
            attn_pairs += chunk * (done + chunk / 2.0)
            entry[1] = done + chunk
            budget -= chunk
            if entry[1] >= run.prompt_tokens[request_id]:
                completed.append(request_id)
        context = float(plan.context_before[0]) if plan is not None else 0.0
        step_s = run.cost.step_s(decode_tokens, context, num_requests, prefill_tokens, attn_pairs)
        step_s += run.policy.draft_s(num_requests, context)
        self._commit(
            plan, 1, now, np.array([step_s]), np.array([decode_tokens + prefill_tokens]),
            prefill_tokens=prefill_tokens, num_prefilling=len(self.prefilling),
        )
        if completed:
            done = set(completed)
            self.prefilling = [e for e in self.prefilling if e[0] not in done]
        return 1, completed

    def _commit(self, plan, count, now, step_s, batch_tokens, *, prefill_tokens, num_prefilling) -> None:
        run, decode = self.run, self.decode
        starts_ends = np.cumsum(np.concatenate([[now], step_s]))
        self._end_s = float(starts_ends[-1])
        self._last_step_s = float(step_s[-1])
        num_requests = len(decode)
        if plan is not None and num_requests:
            lengths, accepted, emitted = plan.lengths[:count], plan.accepted[:count], plan.emitted[:count]
            run.positions.add(lengths, accepted)
            verify_tokens, accepted_tokens = lengths.sum(axis=1), accepted.sum(axis=1)
            emitted_tokens = emitted.sum(axis=1)
            self._tokens_per_step = 0.8 * self._tokens_per_step + 0.2 * float(emitted_tokens.mean()) / num_requests
            self._finished = decode.commit(plan, count)
        else:
            verify_tokens = accepted_tokens = emitted_tokens = 0
            self._finished = None
        run.steps.append(
            t_s=starts_ends[:-1], step_s=step_s, replica=self.index, num_requests=num_requests + num_prefilling,
            decode_requests=num_requests, batch_tokens=batch_tokens, verify_tokens=verify_tokens,
            accepted_tokens=accepted_tokens, emitted_tokens=emitted_tokens, prefill_tokens=prefill_tokens,
        )
        if num_requests:
            run.log.steps[decode.request_id] += count

    def _finish_step(self, completed: list[int]) -> None:
        run, decode = self.run, self.decode
        now = self.clock_s
        if self._finished is not None and self._finished.any():
            for request_id in decode.request_id[self._finished]:
                self._release(int(request_id), now)
            decode.remove(~self._finished)
        for request_id in completed:
            run.log.first_token_s[request_id] = now
            remaining = int(run.output_tokens[request_id]) - 1
            if remaining <= 0:
                self._release(request_id, now)
            else:
                decode.add(request_id, int(run.domain[request_id]), remaining, int(run.prompt_tokens[request_id]) + 1)

    def _release(self, request_id: int, now: float) -> None:
        run = self.run
        self.kv_used -= run.kv_need[request_id]
        run.finish(request_id, now)
