"""Verify-length schedulers, looked up by name.

Each policy is a pure function over arrays (see :class:`ScheduleInputs`); :func:`make_scheduler` binds a
scheduler config's parameters and returns a callable ``inputs -> lengths``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from simlab.schedulers import policies
from simlab.schedulers.inputs import ScheduleInputs


@dataclass(frozen=True)
class SchedulerInfo:
    """What the engine needs to know about a policy."""

    function: Callable[..., np.ndarray]
    params: tuple[str, ...]
    uses_cost: bool  # reads verify_s / draft_s
    uses_lag: bool  # reads lagged confidences
    uses_truth: bool  # reads true outcomes (not realisable)
    lossless: bool
    uses_draft_cost: bool = False  # reads draft_s (callers may skip computing it otherwise)


REGISTRY: dict[str, SchedulerInfo] = {
    "fixed": SchedulerInfo(policies.fixed, (), False, False, False, True),
    "threshold": SchedulerInfo(policies.threshold, ("threshold", "cumulative"), False, False, False, True),
    "hardware_aware": SchedulerInfo(policies.hardware_aware, (), True, False, False, True),
    "async_topk": SchedulerInfo(policies.async_topk, ("lag_steps",), True, True, False, True),
    "goodput": SchedulerInfo(policies.goodput, ("lag_steps",), True, True, False, True, uses_draft_cost=True),
    "oracle": SchedulerInfo(policies.oracle, (), True, False, True, False),
    "retrospective": SchedulerInfo(policies.retrospective, (), True, False, False, False),
}


@dataclass(frozen=True)
class Scheduler:
    """A policy with its parameters bound."""

    kind: str
    params: dict
    info: SchedulerInfo

    @property
    def lag_steps(self) -> int:
        return int(self.params.get("lag_steps", 0)) if self.info.uses_lag else 0

    @property
    def lossless(self) -> bool:
        return self.info.lossless and not (self.kind == "goodput" and self.lag_steps == 0)

    def __call__(self, inputs: ScheduleInputs) -> np.ndarray:
        return self.info.function(inputs, **self.params)


def make_scheduler(kind: str, **params) -> Scheduler:
    """The scheduler ``kind`` with ``params`` (unknown kinds raise KeyError)."""
    info = REGISTRY[kind]
    unknown = set(params) - set(info.params)
    if unknown:
        raise TypeError(f"scheduler {kind!r} takes no parameter(s) {sorted(unknown)}")
    return Scheduler(kind=kind, params=dict(params), info=info)


def from_config(config) -> Scheduler:
    """Build from a :mod:`simlab.config.arms` scheduler config object (None means fixed)."""
    if config is None:
        return make_scheduler("fixed")
    params = config.model_dump(exclude={"kind"})
    return make_scheduler(config.kind, **params)


__all__ = ["REGISTRY", "ScheduleInputs", "Scheduler", "SchedulerInfo", "from_config", "make_scheduler"]
