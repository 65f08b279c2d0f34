"""Where requests come from: an open-loop schedule (trace or synthetic) or a closed loop of users.

A source hands each arrival to ``arrive(request_id, time_s)`` (the simulation routes it) and declares its
:class:`~simlab.engine.horizon.Horizon`: when it may next send a request.
"""

from __future__ import annotations

import heapq
import math
from typing import Callable

import numpy as np

from simlab.engine.horizon import Horizon

Arrive = Callable[[int, float], None]


class OpenLoop:
    """Request i arrives at ``arrival_s[i]``."""

    def __init__(self, env, arrival_s: np.ndarray, arrive: Arrive) -> None:
        self.env = env
        self._arrival_s = arrival_s
        self._arrive = arrive
        self._next_id = 0
        self._horizon = (-1, Horizon())  # (next id, its horizon): asked once per block, changes once per arrival
        env.process(self._run())

    def horizon(self) -> Horizon:
        """Nothing arrives before the next scheduled arrival."""
        next_id = self._next_id
        if self._horizon[0] != next_id:
            until_s = float(self._arrival_s[next_id]) if next_id < len(self._arrival_s) else math.inf
            self._horizon = (next_id, Horizon(until_s=until_s))
        return self._horizon[1]

    def arrival_after_s(self, num_skipped: int) -> float:
        """When the arrival after the next ``num_skipped`` ones is due (inf when there is none)."""
        index = self._next_id + num_skipped
        return float(self._arrival_s[index]) if index < len(self._arrival_s) else math.inf

    @property
    def num_sent(self) -> int:
        """Requests that have arrived so far."""
        return self._next_id

    def on_finish(self, now_s: float) -> None:
        """A finish sends nothing in an open loop."""

    def _run(self):
        env, arrival_s = self.env, self._arrival_s
        while self._next_id < len(arrival_s):
            due = float(arrival_s[self._next_id])
            if due > env.now:
                yield env.timeout(due - env.now)
            request_id = self._next_id
            self._next_id += 1
            self._arrive(request_id, due)


class ClosedLoop:
    """``concurrency`` users send request ids in order; a user's next request arrives ``think_time_s`` after
    its last one finishes."""

    def __init__(self, env, num_requests: int, concurrency: int, think_time_s: float, arrive: Arrive, *,
                 num_replicas: int) -> None:
        self.env = env
        self._num_requests = num_requests
        self._think_time_s = think_time_s
        self._arrive = arrive
        self._next_id = 0
        self._pending: list[tuple[float, int]] = []  # think-time arrivals: (due time, request id)
        # with several replicas a finish on one sends a request that may go to another at any moment
        self._horizon_steps = 1 if num_replicas > 1 else Horizon().max_steps
        for _ in range(min(concurrency, num_requests)):
            self._send(0.0)

    def horizon(self) -> Horizon:
        """The next think-time arrival, and every finish (it sends the next request)."""
        return Horizon(until_s=self._pending[0][0] if self._pending else math.inf,
                       max_steps=self._horizon_steps, finish_ends=True)

    def on_finish(self, now_s: float) -> None:
        """The user whose request finished sends the next one after its think time."""
        if self._next_id >= self._num_requests:
            return
        if self._think_time_s <= 0.0:
            self._send(now_s)
            return
        request_id = self._take_id()
        due = now_s + self._think_time_s
        heapq.heappush(self._pending, (due, request_id))
        self.env.process(self._delayed(request_id, due))

    def _take_id(self) -> int:
        request_id = self._next_id
        self._next_id += 1
        return request_id

    def _send(self, now_s: float) -> None:
        self._arrive(self._take_id(), now_s)

    def _delayed(self, request_id: int, due: float):
        yield self.env.timeout(max(due - self.env.now, 0.0))
        heapq.heappop(self._pending)
        self._arrive(request_id, due)
