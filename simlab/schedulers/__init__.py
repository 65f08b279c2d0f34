"""Verify-length schedulers, looked up by name in :mod:`simlab.schedulers.registry`.

Each policy is a pure function over arrays (see :class:`ScheduleInputs`); :func:`make_scheduler` binds a
kind's parameters and returns a callable ``inputs -> lengths``.
"""

from __future__ import annotations

from simlab.schedulers.inputs import ScheduleInputs
from simlab.schedulers.registry import (
    DEFAULT_KIND,
    REGISTRY,
    Scheduler,
    SchedulerEntry,
    config_model,
    from_config,
    kinds,
    make_scheduler,
)

__all__ = ["DEFAULT_KIND", "REGISTRY", "ScheduleInputs", "Scheduler", "SchedulerEntry", "config_model",
           "from_config", "kinds", "make_scheduler"]
