"""A decode replica's intake in a disaggregated engine (docs/engine.md section 9): admitting requests whose
prompt's KV is still on a prefill replica, the link that moves it, and the drafter's KV it rebuilds.

A transfer starts when the decode replica admits the request (a seat and its KV are allocated for it), or when
the link finishes the one before; it takes ``tokens x bytes_per_token / bytes_per_s`` on the link and lands
``latency_s`` later. The prefill replica holds the request's KV until it lands.
"""

from __future__ import annotations

import math
from collections import deque


class KVLink:
    """Transfers in admission order; landing times never decrease."""

    def __init__(self, bytes_per_token: float, bytes_per_s: float, latency_s: float) -> None:
        self.seconds_per_token = bytes_per_token / bytes_per_s
        self.latency_s = latency_s
        self.free_s = 0.0  # when the link has sent everything it was given
        self.pending: deque[tuple[float, int]] = deque()  # (landing time, request id)

    def __len__(self) -> int:
        return len(self.pending)

    def start(self, request_id: int, tokens: int, now_s: float) -> float:
        """Queue the transfer of ``tokens`` tokens' KV at ``now_s``; returns when it lands."""
        self.free_s = max(now_s, self.free_s) + tokens * self.seconds_per_token
        land_s = self.free_s + self.latency_s
        self.pending.append((land_s, request_id))
        return land_s

    def next_land_s(self) -> float:
        return self.pending[0][0] if self.pending else math.inf

    def landed(self, now_s: float) -> list[int]:
        """The requests whose KV has landed by ``now_s``, in landing order (removed from the link)."""
        out = []
        pending = self.pending
        while pending and pending[0][0] <= now_s:
            out.append(pending.popleft()[1])
        return out


class Intake:
    """What a decode replica adds to a co-located one: ``ctx`` is its :class:`ReplicaContext`."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.link: KVLink = ctx.new_link()
        self._rebuild_draft: set[int] = set()  # landed requests whose drafter KV the replica builds (recompute)

    def __len__(self) -> int:
        """Requests admitted whose KV has not landed yet."""
        return len(self.link)

    def next_land_s(self) -> float:
        return self.link.next_land_s()

    def admit(self, request_id: int, kv, now_s: float) -> bool:
        """A seat is free: allocate the request's KV (the prompt's blocks, or prompt + output reserved) and start
        the transfer of all but the prompt's last token, which the replica computes when the KV has landed.
        False when the KV does not fit (nothing changed)."""
        requests = self.ctx.requests
        prompt = int(requests.prompt_tokens[request_id])
        units = kv.units_for(prompt) if kv.paged else prompt + int(requests.output_tokens[request_id])
        if not kv.admit(request_id, units, []):
            return False
        self.ctx.transfer_started(request_id, self.link.start(request_id, prompt - 1, now_s))
        return True

    def landed(self, now_s: float) -> list[list[int]]:
        """Prefilling entries (request id, done, target) of the requests whose KV has landed by ``now_s``: they
        prefill the prompt's last token."""
        if not len(self.link):
            return []
        requests = self.ctx.requests
        entries = []
        for request_id in self.link.landed(now_s):
            prompt = int(requests.prompt_tokens[request_id])
            requests.remote[request_id] = False
            entries.append([request_id, prompt - 1, prompt])
            if self.ctx.draft_recompute:
                self._rebuild_draft.add(request_id)
        return entries

    def rebuild_s(self, completed: list[int]) -> float:
        """The drafter's forwards over the prompts of landed requests that complete now (``draft_kv: recompute``),
        in admission order."""
        if not self._rebuild_draft:
            return 0.0
        cost, method, prompt = self.ctx.cost, self.ctx.policy.method, self.ctx.requests.prompt_tokens
        extra = 0.0
        for request_id in completed:
            if request_id in self._rebuild_draft:
                self._rebuild_draft.discard(request_id)
                extra += cost.draft_prefill_s(method, int(prompt[request_id]))
        return extra

    def forget(self, request_id: int) -> None:
        """A preempted request recomputes its context, the drafter's KV with it."""
        self._rebuild_draft.discard(request_id)
