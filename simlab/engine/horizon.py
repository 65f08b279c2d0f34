"""How far a replica may plan ahead: every source of outside events declares here when it may next act.

A replica plans a block of iterations (docs/architecture.md) over which nothing outside it may change its
batch. Each source of such events gives a :class:`Horizon`: a time before which it does nothing (the block
ends with the iteration during which that time falls), a number of iterations, and whether a finish on the
replica makes it act (a closed-loop user sends its next request; a router reads the load; a waiting request
may take the freed seat or KV). A replica combines the horizons of every source; the tightest wins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MAX_BLOCK_STEPS = 64


@dataclass(frozen=True)
class Horizon:
    """Nothing outside changes the replica's batch before ``until_s``, within ``max_steps`` iterations, and
    (when ``finish_ends``) before one of its requests finishes."""

    until_s: float = math.inf
    max_steps: int = MAX_BLOCK_STEPS
    finish_ends: bool = False

    def __and__(self, other: "Horizon") -> "Horizon":
        return Horizon(min(self.until_s, other.until_s), min(self.max_steps, other.max_steps),
                       self.finish_ends or other.finish_ends)


OPEN = Horizon()
ONE_STEP = Horizon(max_steps=1)
FINISH_ENDS = Horizon(finish_ends=True)


def combine(horizons) -> Horizon:
    """The tightest of ``horizons``."""
    result = OPEN
    for horizon in horizons:
        result = result & horizon
    return result
