"""Where requests come from: an open-loop schedule (trace or synthetic) or a closed loop of users,
and the router that picks a replica for each arrival."""

from __future__ import annotations

import heapq
import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from simlab.engine.simulate import ArmRun


def route(replicas: list, policy: str, counter: int) -> int:
    """Index of the replica that takes the next request: round_robin or least_loaded (ties: lowest index)."""
    if len(replicas) == 1:
        return 0
    if policy == "round_robin":
        return counter % len(replicas)
    loads = [r.load for r in replicas]
    return int(np.argmin(loads))


class Arrivals:
    """Feeds requests to replicas and knows when the next one is due (so blocks can stop before it)."""

    def __init__(self, run: "ArmRun") -> None:
        self.run = run
        self.env = run.env
        self._routed = 0
        closed = run.workload.closed_loop
        self._num_requests = len(run.prompt_tokens)
        self._next_id = 0
        self._pending: list[tuple[float, int]] = []  # closed loop with think time: (due time, seq)
        if closed is None:
            self._arrival_s = run.workload.requests.arrival_s
            self.env.process(self._open_loop())
        else:
            self._arrival_s = None
            self._think_time_s = closed.think_time_s
            for _ in range(min(closed.concurrency, self._num_requests)):
                self._arrive(self._take_id(), 0.0)

    def next_arrival_s(self) -> float:
        """Time of the next known arrival (inf when none is scheduled)."""
        if self._arrival_s is not None:
            return float(self._arrival_s[self._next_id]) if self._next_id < self._num_requests else math.inf
        return self._pending[0][0] if self._pending else math.inf

    def _take_id(self) -> int:
        request_id = self._next_id
        self._next_id += 1
        return request_id

    def _arrive(self, request_id: int, now_s: float) -> None:
        run = self.run
        run.arrive(request_id, now_s)
        index = route(run.replicas, run.engine.router, self._routed)
        self._routed += 1
        run.log.replica[request_id] = index
        run.replicas[index].submit(request_id, now_s)

    def _open_loop(self):
        env = self.env
        arrival_s = self._arrival_s
        while self._next_id < self._num_requests:
            due = float(arrival_s[self._next_id])
            if due > env.now:
                yield env.timeout(due - env.now)
            self._arrive(self._take_id(), due)

    def on_finish(self, now_s: float) -> None:
        """Closed loop: the user whose request finished sends the next one after its think time."""
        if self._arrival_s is not None or self._next_id >= self._num_requests:
            return
        request_id = self._take_id()
        if self._think_time_s <= 0.0:
            self._arrive(request_id, now_s)
            return
        due = now_s + self._think_time_s
        heapq.heappush(self._pending, (due, request_id))
        self.env.process(self._delayed(request_id, due))

    def _delayed(self, request_id: int, due: float):
        yield self.env.timeout(max(due - self.env.now, 0.0))
        heapq.heappop(self._pending)
        self._arrive(request_id, due)
