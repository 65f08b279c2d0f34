"""Bracketing and bisection for one arm's SLA threshold, as a generator that asks for probes.

The generator yields a value to simulate and is sent back whether the SLA held there. It assumes the SLA holds
on one side of a threshold: at low loads for ``find="largest"`` (concurrency, rate), at high capacity for
``find="smallest"`` (replicas; a trace's time scale, where smaller gaps are more load). From the scenario's
own value it doubles (or halves) until it brackets the threshold or reaches the range's end, then bisects:
integers to the exact value, other numbers until the bracket is within ``rtol`` of the answer (the answer is
the side that meets the SLA, so it errs towards the safe side by less than ``rtol``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generator, Optional, Union

# which side of a field's threshold meets an SLA: the loads a what-if searches by default, and the sweep's load axes
FIND_DEFAULTS = {
    "workload.concurrency": "largest",
    "workload.rate": "largest",
    "workload.time_scale": "smallest",  # gaps x time_scale: smaller is more load
    "engine.replicas": "smallest",
}

Number = Union[int, float]


@dataclass(frozen=True)
class SearchRange:
    low: Number
    high: Number
    integer: bool
    find: str  # "largest" or "smallest"
    rtol: float = 0.02

    def clip(self, value: Number) -> Number:
        value = min(max(value, self.low), self.high)
        return int(round(value)) if self.integer else float(value)

    def up(self, value: Number) -> Number:
        """Double towards ``high`` (an integer moves by at least 1)."""
        if self.integer:
            return min(self.high, max(int(value) + 1, int(value) * 2))
        return min(self.high, value * 2.0)

    def down(self, value: Number) -> Number:
        """Halve towards ``low`` (an integer moves by at least 1)."""
        if self.integer:
            return max(self.low, min(int(value) - 1, int(value) // 2))
        return max(self.low, value / 2.0)

    def close(self, good: Number, bad: Number) -> bool:
        if self.integer:
            return abs(good - bad) <= 1
        return abs(good - bad) <= self.rtol * abs(good)

    def middle(self, good: Number, bad: Number) -> Number:
        return (good + bad) // 2 if self.integer else (good + bad) / 2.0


@dataclass(frozen=True)
class Answer:
    """``value``: the threshold found (None: the SLA holds nowhere in the range); ``at_bound``: it holds up to
    the range's end, so the true threshold may lie beyond."""

    value: Optional[Number]
    at_bound: bool


def threshold_search(start: Number, rng: SearchRange) -> Generator[Number, bool, Answer]:
    """Yield probe values, receive whether each meets the SLA; return the :class:`Answer`."""
    largest = rng.find == "largest"
    toward_bad, toward_good = (rng.up, rng.down) if largest else (rng.down, rng.up)
    bad_end, good_end = (rng.high, rng.low) if largest else (rng.low, rng.high)
    value = rng.clip(start)
    if (yield value):
        good = value
        while True:
            if good == bad_end:
                return Answer(good, True)
            value = toward_bad(good)
            if (yield value):
                good = value
            else:
                bad = value
                break
    else:
        bad = value
        while True:
            if bad == good_end:
                return Answer(None, False)
            value = toward_good(bad)
            if (yield value):
                good = value
                break
            bad = value
    while not rng.close(good, bad):
        value = rng.middle(good, bad)
        if (yield value):
            good = value
        else:
            bad = value
    return Answer(good, False)
