"""One replica and one engine iteration (docs/engine.md sections 2, 3 and 6)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from .kv import KVCache
from .state import DECODING, FINISHED, PREFILLING, WAITING, Request, Streams
from simlab.schedulers import ScheduleInputs


@dataclass(frozen=True)
class Limits:
    """The engine's per-replica limits and the arm's policy, as one iteration reads them."""

    max_num_seqs: int
    max_batch_tokens: int
    prefill_chunk_tokens: int | None
    method: str
    gamma: int
    scheduler: object  # simlab.schedulers.Scheduler, or None without drafting
    prior_conf: np.ndarray
    cost: object  # simlab.hardware.CostModel
    draft_recompute: bool = False  # section 9: a decode replica builds the drafter's KV over each landed prompt
    tree: object = None  # an EAGLE-3 tree arm's TreeDraws (docs/acceptance.md section 8)
    timing: object = None  # the model the steps cost on, where the scheduler reads another view (``cost``)


@dataclass
class Step:
    """One iteration's row of the step table (section 8)."""

    t_s: float
    step_s: float
    replica: int
    num_requests: int
    decode_requests: int
    batch_tokens: int
    verify_tokens: int
    accepted_tokens: int
    emitted_tokens: int
    prefill_tokens: int
    kv_tokens: int
    num_waiting: int  # not an engine column: requests left waiting after admission


class Replica:
    """Section 2: a waiting queue, the running requests in admission order, a clock and the KV cache."""

    def __init__(self, index: int, kv: KVCache, role: str = "colocated", link: tuple[float, float] = (0.0, 0.0)
                 ) -> None:
        self.index = index
        # section 9: a prefill replica hands completed prompts on; a decode replica receives their KV over its link
        # (seconds per token, latency), one transfer at a time
        self.role = role
        self.seconds_per_token, self.latency_s = link
        self.link_free = 0.0
        self.receiving: list[Request] = []  # admitted, KV not landed yet, in admission order
        self.new_transfers: list[Request] = []  # transfers started by the last iteration start
        self.handoffs: list[Request] = []  # prompts completed by the last iteration end
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []  # in admission order (a re-admitted request goes last)
        self.clock = 0.0
        self.kv = kv
        self.busy = False  # an iteration is running or about to start
        self.num_preemptions = 0

    def load(self) -> int:
        """Section 5 (least_loaded): requests waiting or running."""
        return len(self.waiting) + len(self.running) + len(self.receiving)

    # ------------------------------------------------------------------------------------------------- 6.2
    def preempt_newest(self) -> Request:
        """Section 6.2: the most recently admitted running request releases all its blocks and goes to the
        front of ``waiting``; it will prefill its context so far again."""
        victim = self.running.pop()  # running is in admission order
        self.kv.release(victim)
        victim.state = WAITING
        victim.done = 0
        victim.rebuild_draft = False
        self.waiting.appendleft(victim)
        self.num_preemptions += 1
        return victim

    def grow(self, gamma: int, tree=None) -> None:
        """Section 6.2 (growth): each decoding request, in admission order, takes blocks up to
        ceil((context + max_len) / block_size); when none are free, evict cached blocks (section 7), else preempt
        the newest running request. A tree arm's lookahead is its tree's nodes within max_len levels (section 3)."""
        for request in list(self.running):
            if request.state != DECODING:
                continue  # a prefilling request holds its whole prefill since admission
            max_len = min(gamma, request.remaining - 1)
            if tree is not None:
                max_len = int(tree.nodes_within()[max_len])
            while request.state == DECODING and request.own_kv < self.kv.blocks_needed(request, max_len):
                if self.kv.make_room(1):
                    self.kv.take_one(request)
                else:
                    self.preempt_newest()  # possibly ``request`` itself: then growth moves on

    # ------------------------------------------------------------------------------------------------- 3.1
    def admit(self, max_num_seqs: int) -> None:
        """Section 3 step 1: first come, first served, while seats are free and the head's KV fits."""
        while self.waiting and len(self.running) + len(self.receiving) < max_num_seqs:
            head = self.waiting[0]
            if head.remote:  # section 9: a seat and its KV, then the transfer of all but the prompt's last token
                if not self.kv.try_admit_remote(head):
                    break
                self.waiting.popleft()
                self.link_free = max(self.clock, self.link_free) + (head.prompt - 1) * self.seconds_per_token
                head.land_s = self.link_free + self.latency_s
                self.receiving.append(head)
                self.new_transfers.append(head)
                continue
            # section 6.2 (recompute): a request prefills its whole context so far (its prompt the first time)
            head.prefill_target = head.prompt + head.emitted
            if not self.kv.try_admit(head):
                break
            self.waiting.popleft()
            head.state = PREFILLING
            self.running.append(head)

    # ------------------------------------------------------------------------------------------------- 3
    def land(self) -> None:
        """Section 9: requests whose KV has landed join the running requests, to prefill the prompt's last token."""
        for r in [r for r in self.receiving if r.land_s <= self.clock]:
            self.receiving.remove(r)
            r.remote = False
            r.state = PREFILLING
            r.prefill_target = r.prompt
            r.done = r.prompt - 1
            r.rebuild_draft = True
            self.running.append(r)

    def start_iteration(self, limits: Limits, streams: Streams | None) -> "Iteration | None":
        """Section 3 steps 1-4: an iteration starting at ``clock`` (growth and admission happen now; the
        outcomes wait for :meth:`end_iteration`, at its end). None when there is nothing to compute."""
        # 3.1: KV growth (paged only), then admission (and, section 9, landed KV)
        if self.kv.paged:
            self.grow(limits.gamma, limits.tree)
        self.admit(limits.max_num_seqs)
        self.land()
        if not self.running:
            return None
        kv_tokens = self.kv.tokens_in_use()
        num_waiting = len(self.waiting)

        # 3.2: decode part
        decoding = [r for r in self.running if r.state == DECODING]
        num_decode = len(decoding)
        context = sum(r.context for r in decoding)
        lengths = [0] * num_decode
        accepted = [0] * num_decode
        gamma = limits.gamma
        if num_decode > 0 and gamma > 0:
            streams.draw_next([r for r in decoding if len(r.conf) == r.steps])  # step steps_r of each
            drawn = [streams.at(r, r.steps) for r in decoding]
            conf = np.array([c for c, _ in drawn])[None, :, :]
            true_accepted = np.array([t for _, t in drawn], dtype=np.int64)[None, :]
            max_len = np.array([min(gamma, r.remaining - 1) for r in decoding], dtype=np.int64)[None, :]
            scheduler = limits.scheduler
            entry = scheduler.entry  # its registry entry says what it reads
            inputs = ScheduleInputs(
                conf=conf,
                max_len=max_len,
                verify_s=lambda b: limits.cost.verify_s(b, context, num_decode),
                token_budget=max(limits.max_batch_tokens - num_decode, 0),
                true_accepted=true_accepted,
            )
            if entry.reads_draft_cost:
                inputs.draft_s = limits.cost.draft_s(limits.method, gamma, num_decode, context)
            if entry.reads_lag:
                lag = scheduler.lag_steps
                inputs.lagged_conf = np.array([
                    streams.at(r, r.steps - lag)[0] if r.steps >= lag else limits.prior_conf for r in decoding
                ])[None, :, :]
                inputs.lagged_max_len = max_len
            lengths = [int(x) for x in scheduler(inputs)[0]]
            accepted = [min(int(t), ell) for t, ell in zip(true_accepted[0], lengths)]
        verified = lengths
        if limits.tree is not None:  # a tree verifies its nodes within the levels the request may emit
            within = limits.tree.nodes_within()
            verified = [int(within[ell]) for ell in lengths]
        decode_tokens = num_decode + sum(verified)

        # 3.3: prefill part
        budget = min(limits.prefill_chunk_tokens or limits.max_batch_tokens, limits.max_batch_tokens,
                     limits.max_batch_tokens - decode_tokens)
        prefilling = [r for r in self.running if r.state == PREFILLING]
        chunks = []
        pairs = 0.0
        for r in prefilling:
            chunk = max(min(r.prefill_target - r.done, budget), 0)
            chunks.append(chunk)
            pairs += chunk * (r.done + chunk / 2)
            budget -= chunk
        prefill_tokens = sum(chunks)

        # 3.4: cost
        if num_decode > 0 and gamma > 0 and limits.tree is not None:
            draft = limits.cost.tree_draft_s(limits.method, gamma, limits.tree.topk, num_decode, context)
        elif num_decode > 0 and gamma > 0:
            draft = limits.cost.draft_s(limits.method, gamma, num_decode, context)
        else:
            draft = 0.0
        timing = limits.timing or limits.cost
        if prefill_tokens > 0:
            target = timing.step_s(decode_tokens, context, num_decode, prefill_tokens, pairs)
        elif num_decode > 0:
            target = timing.verify_s(decode_tokens, context, num_decode)
        else:
            target = 0.0
        step_s = draft + target
        if limits.draft_recompute:  # section 9: the drafter's forwards over landed prompts that complete now
            rebuilt = [r for r, c in zip(prefilling, chunks) if r.rebuild_draft and r.done + c == r.prefill_target]
            if rebuilt:
                extra = 0.0
                for r in rebuilt:
                    extra += limits.cost.draft_prefill_s(limits.method, r.prompt)
                    r.rebuild_draft = False
                step_s += extra
        row = Step(
            t_s=self.clock, step_s=step_s, replica=self.index,
            num_requests=num_decode + sum(1 for c in chunks if c > 0),  # section 8: prefills given a chunk
            decode_requests=num_decode, batch_tokens=decode_tokens + prefill_tokens,
            verify_tokens=sum(verified), accepted_tokens=sum(accepted),
            emitted_tokens=sum(accepted) + num_decode, prefill_tokens=prefill_tokens, kv_tokens=kv_tokens,
            num_waiting=num_waiting,
        )
        return Iteration(end=self.clock + step_s, row=row, decoding=decoding, lengths=lengths,
                         accepted=accepted, prefilling=prefilling, chunks=chunks)

    def end_iteration(self, it: "Iteration", positions: dict) -> list[Request]:
        """Section 3 step 5: the outcomes at ``it.end``; returns the requests that finished, by id."""
        self.clock = it.end
        for r, ell, a in zip(it.decoding, it.lengths, it.accepted):
            r.remaining -= a + 1
            r.steps += 1
            for k in range(ell):  # 0-based position k is the (k+1)-th drafted token
                positions["verified"][k] += 1
                if a >= k:  # every earlier position accepted
                    positions["reached"][k] += 1
                if a > k:
                    positions["accepted"][k] += 1
        self.handoffs = []
        for r, chunk in zip(it.prefilling, it.chunks):
            r.done += chunk
            if r.done == r.prefill_target and self.role == "prefill":  # section 9: on to a decode replica
                self.kv.prompt_complete(r)
                self.kv.hand_off(r)
                self.running.remove(r)
                r.state, r.remote, r.holder = WAITING, True, self
                self.handoffs.append(r)
            elif r.done == r.prefill_target:
                self.kv.prompt_complete(r)
                r.remaining -= 1  # its first token, or the token its recompute produces (6.2)
                if np.isnan(r.first_token_s):
                    r.first_token_s = it.end
                r.state = DECODING
        finished = sorted((r for r in self.running if r.remaining == 0), key=lambda r: r.id)
        for r in finished:
            self.running.remove(r)
            self.kv.release(r)
            r.state = FINISHED
            r.finish_s = it.end
        return finished


@dataclass
class Iteration:
    """An iteration between its start and its end: its row (section 8) and what its outcomes need."""

    end: float
    row: Step
    decoding: list
    lengths: list
    accepted: list
    prefilling: list
    chunks: list
