"""The speculative round's host time under an overlap (async) scheduler: hidden behind the GPU, or exposed.

``spec_round_overhead_s`` is the host work of a speculative round (the verify's bookkeeping, accepting tokens,
the next draft's setup), fitted on SGLang runs whose release turned the overlap scheduler off under speculation
(simlab/calibration/stages/speculative.py). A release that keeps its overlap or async scheduler with speculation on
(SGLang 0.5.23's V2 worker, vLLM 0.34.0's async scheduling, TensorRT-LLM's overlap scheduler for MTP; the
releases table of docs/hardware.md) runs that work for round N+1 while the GPU runs round N, so a round costs

    max(GPU round, host) = GPU round + max(0, host - GPU round)

and the host time is exposed only where it outlasts the GPU's work. simlab prices the exposed part as one constant
per arm: the host time less the GPU time of the arm's smallest round (one request, no context, its verify of
1 + gamma tokens, or a tree's nodes). Every larger round takes longer on the GPU, so the constant is exact for one
request and an upper bound above; for the targets simlab ships (a round of 3 ms or more on any GPU) it is 0.

The drafter's host time per forward (``draft_forward_overhead_s``) stays: each draft forward waits for the one
before it, which a scheduler's overlap does not hide. Cost models measured as tables keep what they measured; a
table's lookup arm (n-gram, suffix), which has no drafter curve to hold the round's host time, pays the round host
time of the roofline the table was derived from, hidden the same way (:func:`with_lookup_round`).
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Any, Optional

from simlab.hardware.lookup_cost import LOOKUP_METHODS


@dataclass(frozen=True)
class RoundHost:
    """One arm's speculative host time per round: what the fit prices, what overlap hides, what stays."""

    host_s: float
    hidden_s: float

    def describe(self) -> dict[str, float]:
        return {"round_host_s": self.host_s, "round_host_hidden_s": self.hidden_s}


def _priced_host(cost: Any) -> Optional[float]:
    """The round's host time of a roofline (plain or calibrated) with a drafter, else None (a table)."""
    params, drafter = getattr(cost, "params", None), getattr(cost, "drafter", None)
    if params is None or drafter is None or not hasattr(params, "spec_round_overhead_s"):
        return None
    return float(params.spec_round_overhead_s)


def smallest_round_gpu_s(cost: Any, verify_tokens: int) -> float:
    """GPU seconds of an arm's smallest verify: ``verify_tokens`` tokens of one request at no context, less the
    step's host times (step and request overheads)."""
    params = cost.params
    host = float(params.step_overhead_s) + float(getattr(params, "request_overhead_s", 0.0) or 0.0)
    return max(0.0, float(cost.verify_s(verify_tokens, 0.0, 1)) - host)


def with_overlap(cost: Any, overlap: Optional[bool], verify_tokens: int,
                 method: Optional[str] = None) -> tuple[Any, Optional[RoundHost]]:
    """``cost`` for a speculative arm (its drafter ``method``) whose release keeps (``overlap`` True) or drops its
    overlap scheduler, and the arm's :class:`RoundHost` (None where the cost model prices no round host time: a
    table, whose drafter curves hold it, but for a lookup arm, :func:`with_lookup_round`). With overlap, a copy
    whose round host time is the part the smallest round's GPU time does not cover."""
    host = _priced_host(cost)
    if host is None:
        if method in LOOKUP_METHODS:
            return with_lookup_round(cost, overlap, verify_tokens)
        return cost, None
    if not overlap or host <= 0.0:
        return cost, RoundHost(host, 0.0)
    exposed = max(0.0, host - smallest_round_gpu_s(cost, verify_tokens))
    if exposed == host:
        return cost, RoundHost(host, 0.0)
    params = dataclasses.replace(cost.params, spec_round_overhead_s=exposed)
    copied = copy.copy(cost)
    copied.params = params
    copied.drafter = copy.copy(cost.drafter)
    copied.drafter.params = params
    return copied, RoundHost(host, host - exposed)


def with_lookup_round(cost: Any, overlap: Optional[bool], verify_tokens: int) -> tuple[Any, Optional[RoundHost]]:
    """A table's lookup arm (``cost`` a :class:`~simlab.hardware.table.TableCostModel`): the round's host time of
    the roofline it was derived from (its drafters' curves hold it inside them; a lookup has no curve), all of it
    exposed, or with ``overlap`` the part the table's smallest round (``verify_tokens`` of one request at no context,
    the step's own host time included) does not cover; (``cost``, None) for a table with no roofline behind it."""
    round_host_s = getattr(cost, "round_host_s", None)
    host = float(round_host_s()) if round_host_s is not None else 0.0
    if host <= 0.0:
        return cost, None
    exposed = max(0.0, host - float(cost.verify_s(verify_tokens, 0.0, 1))) if overlap else host
    copied = copy.copy(cost)
    copied.lookup_round_s = exposed
    return copied, RoundHost(host, host - exposed)
