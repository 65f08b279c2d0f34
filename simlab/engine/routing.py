"""Routers: which replica takes an arriving request, looked up by name (``engine.router``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

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


@dataclass(frozen=True)
class Router:
    """A routing rule; ``reads_state``: its choice depends on the replicas' load or caches, so a finish on a
    replica may change the next choice."""

    choose: Callable[[Sequence, int, int], int]
    reads_state: bool


ROUTERS: dict[str, Router] = {
    "round_robin": Router(round_robin, reads_state=False),
    "least_loaded": Router(least_loaded, reads_state=True),
    "prefix_aware": Router(prefix_aware, reads_state=True),
}
