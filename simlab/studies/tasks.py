"""The one task a study hands its executor: simulate a scenario (a sweep's point, a what-if's probe, a plan's
deployment) and return its arms' metrics as data. Never raises: an input error or a failure comes back as data,
so that one bad task does not take down the others (executors return a lost worker as
:class:`simlab.studies.executors.TaskLost`; :func:`outcome` reads both alike).
"""

from __future__ import annotations

import json
import time
import traceback
from dataclasses import dataclass
from typing import Optional

from simlab.common.errors import InputError


@dataclass(frozen=True)
class ScenarioTask:
    """One simulation (picklable): the scenario's ``data`` and the ``file`` it is read as. ``out`` is the results
    folder it writes (None: nothing written), ``plot`` draws its report.png, ``command`` is recorded in it.
    ``shared_cost`` builds the scenario's hardware once per worker process
    (:func:`simlab.studies.plan_space.cost_model`: a plan's deployments share a few layouts)."""

    data: dict
    file: str
    out: Optional[str] = None
    plot: bool = False
    command: Optional[str] = None
    shared_cost: bool = False


def run_task(task: ScenarioTask) -> dict:
    """Simulate ``task``: ``{"arms": {label: metrics}, "error": None, "input_error": False, "wall_s": ...}``, or
    ``arms`` None and the error (with ``traceback`` when it was not an input error)."""
    from simlab.common.json_text import dumps
    from simlab.config.loading import scenario_from_data
    from simlab.runner import run_scenario

    started = time.perf_counter()
    try:
        loaded = scenario_from_data(task.data, file=task.file)
        cost = None
        if task.shared_cost:
            from simlab.studies.plan_space import cost_model

            cost = cost_model(task.data["hardware"])
        results = run_scenario(loaded, out=task.out, jobs=1, plot=task.plot, command=task.command, cost=cost)
        arms = json.loads(dumps(results.arms))  # exactly what summary.json holds (NaN as null)
        return {"arms": arms, "error": None, "input_error": False, "wall_s": time.perf_counter() - started}
    except InputError as err:
        return {"arms": None, "error": err.message, "input_error": True, "wall_s": time.perf_counter() - started}
    except Exception as exc:
        text = str(exc).strip().splitlines()
        return {"arms": None, "error": f"{type(exc).__name__}: {text[0] if text else ''}".strip(),
                "input_error": False, "traceback": traceback.format_exc(), "wall_s": time.perf_counter() - started}


def outcome(result) -> dict:
    """A task's result as :func:`run_task` returns it, a lost worker's (:class:`TaskLost`) included."""
    if isinstance(result, dict):
        return result
    return {"arms": None, "error": f"the worker running it failed ({result.error})", "input_error": False,
            "wall_s": None}


def first_arm(result: dict) -> Optional[dict]:
    """The metrics of a one-arm task's arm (None when it failed)."""
    return next(iter(result["arms"].values())) if result["arms"] is not None else None
