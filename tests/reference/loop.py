"""Time across replicas and arrivals, sources of requests and routers (docs/engine.md sections 4 and 5).

One heap of pending events, the earliest first. At equal times:

1. iteration ends (their outcomes, section 3.5), by replica index;
   then landings of KV on decode replicas (section 9), by request id: the prefill replica frees the KV;
2. arrivals, by request id: routed with every outcome at that time applied, so a closed-loop request sent by a
   finish at ``t`` with no think time arrives at ``t`` (section 5);
3. iteration starts, by replica index: an iteration starting at ``t`` sees every arrival at ``t`` (section 4).
"""

from __future__ import annotations

import heapq

from .replica import Replica

END, LANDING, ARRIVAL, START = 0, 1, 2, 3


class Router:
    """Section 5: round_robin, least_loaded, prefix_aware."""

    def __init__(self, kind: str, replicas: list[Replica]) -> None:
        if kind not in ("round_robin", "least_loaded", "prefix_aware"):
            raise ValueError(f"unknown router {kind!r}")
        self.kind = kind
        self.replicas = replicas
        self.num_routed = 0

    def least_loaded(self, candidates: list[Replica]) -> Replica:
        """Fewest requests waiting or running; ties: lowest index."""
        return min(candidates, key=lambda rep: (rep.load(), rep.index))

    def route(self, request) -> Replica:
        i = self.num_routed
        self.num_routed += 1
        if self.kind == "round_robin":  # the i-th arrival goes to replica i mod n
            return self.replicas[i % len(self.replicas)]
        if self.kind == "least_loaded":
            return self.least_loaded(self.replicas)
        # prefix_aware (section 7): the longest cached prefix of the prompt, ties by the least-loaded rule
        def cached_blocks(rep: Replica) -> int:
            cache = rep.kv.cache
            return len(cache.leading_run(request)) if cache is not None else 0

        longest = max(cached_blocks(rep) for rep in self.replicas)
        return self.least_loaded([rep for rep in self.replicas if cached_blocks(rep) == longest])


class EventLoop:
    """Runs every replica and the request source until every request has finished."""

    def __init__(self, replicas: list[Replica], router: Router, start, end, decode_router: Router | None = None
                 ) -> None:
        self.replicas = replicas
        self.router = router  # disaggregated (section 9): the prefill pool's
        self.decode_router = decode_router
        self.start = start  # replica -> Iteration (section 3 steps 1-4, at the replica's clock)
        self.end = end  # (replica, Iteration) -> finished requests (section 3 step 5)
        self.heap: list = []
        self.on_finish = None  # closed loop: callback(request, time)

    def push_arrival(self, time: float, request) -> None:
        heapq.heappush(self.heap, (time, ARRIVAL, request.id, request))

    def wake(self, replica: Replica, time: float) -> None:
        """Section 3 (last paragraph): an idle replica wakes at an arrival (section 9: or a landing)."""
        if not replica.busy:
            replica.busy = True
            replica.clock = max(replica.clock, time)
            heapq.heappush(self.heap, (replica.clock, START, replica.index, replica))

    def run(self) -> list:
        """Process every event; returns the step rows in the order the iterations ended."""
        rows = []
        while self.heap:
            time, kind, _, payload = heapq.heappop(self.heap)
            if kind == ARRIVAL:
                request = payload
                if request.remote:  # section 9: a completed prompt, to the decode pool
                    replica = self.decode_router.route(request)
                else:
                    request.arrival_s = time
                    replica = self.router.route(request)
                request.replica = replica.index
                replica.waiting.append(request)
                self.wake(replica, time)
            elif kind == LANDING:  # section 9
                request = payload
                holder = request.holder
                holder.kv.release_held(request)
                if holder.waiting:
                    self.wake(holder, time)
                self.wake(self.replicas_by_index[request.replica], time)
            elif kind == START:
                replica = payload
                iteration = self.start(replica)
                for request in replica.new_transfers:
                    heapq.heappush(self.heap, (request.land_s, LANDING, request.id, request))
                replica.new_transfers = []
                if iteration is None:  # nothing to compute: idle until an arrival or a landing
                    replica.busy = False
                    continue
                heapq.heappush(self.heap, (iteration.end, END, replica.index, (replica, iteration)))
            else:
                replica, iteration = payload
                finished = self.end(replica, iteration)
                rows.append(iteration.row)
                for request in finished:  # in order of request id (section 3.5)
                    if self.on_finish is not None:
                        self.on_finish(request, time)
                for request in sorted(replica.handoffs, key=lambda r: r.id):
                    heapq.heappush(self.heap, (time, ARRIVAL, request.id, request))
                if replica.running or replica.waiting or replica.receiving:
                    heapq.heappush(self.heap, (replica.clock, START, replica.index, replica))
                else:
                    replica.busy = False
        return rows
