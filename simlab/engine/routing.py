"""Routers: which replica takes an arriving request, looked up by name (``engine.router``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np


def round_robin(replicas: Sequence, request_id: int, counter: int) -> int:
    """The i-th arrival goes to replica i mod n."""
    return counter % len(replicas)


def least_loaded(replicas: Sequence, request_id: int, counter: int) -> int:
    """Fewest requests waiting or running; ties to the lowest index."""
    return int(np.argmin([r.load for r in replicas]))


def prefix_aware(replicas: Sequence, request_id: int, counter: int) -> int:
    """The replica whose prefix cache holds the longest prefix of the request's prompt; ties by the
    least-loaded rule."""
    best = min(range(len(replicas)), key=lambda i: (-replicas[i].cached_prefix_blocks(request_id),
                                                    replicas[i].load, i))
    return best


def round_robin_skipped(replicas: Sequence, replica, counter: int) -> int:
    """How many of the next arrivals (the next is arrival number ``counter``) go elsewhere than ``replica``."""
    return (replicas.index(replica) - counter) % len(replicas)


def least_loaded_skipped(replicas: Sequence, replica, counter: int) -> int:
    """How many of the next arrivals cannot go to ``replica``: a replica with d fewer requests is chosen before it
    for the next d (d + 1 when it comes first, winning ties), as long as only arrivals add to the loads and
    ``replica``'s own load stays as it is (its finishes end its block: the router reads state)."""
    load, ahead = replica.load, True
    num_skipped = 0
    for other in replicas:
        if other is replica:
            ahead = False
        else:
            num_skipped += max(0, load - other.load + ahead)
    return num_skipped


@dataclass(frozen=True)
class Router:
    """A routing rule; ``reads_state``: its choice depends on the replicas' load or caches, so a finish on a
    replica may change the next choice. ``skipped(replicas, replica, counter)``, where known: how many of the next
    arrivals cannot reach ``replica``, from the replicas' state now (their blocks may run past those)."""

    choose: Callable[[Sequence, int, int], int]
    reads_state: bool
    skipped: Optional[Callable[[Sequence, object, int], int]] = None


ROUTERS: dict[str, Router] = {
    "round_robin": Router(round_robin, reads_state=False, skipped=round_robin_skipped),
    "least_loaded": Router(least_loaded, reads_state=True, skipped=least_loaded_skipped),
    "prefix_aware": Router(prefix_aware, reads_state=True),
}
