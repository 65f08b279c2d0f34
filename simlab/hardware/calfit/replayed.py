"""Fitting a stage's parameters to what the engine replay predicts, not only its closed form.

Stages 3 to 5 predict an engine record in closed form (a steady batch at the mean context): fast enough for a
least-squares search, but up to a third off what the engine itself simulates for the same parameters (the
ramp-up, preemption, the staggered prefills of a closed loop). ``simlab profiles check`` states the error of the
replay, so the fit is made on the replay: each round fits the closed form multiplied, per record and metric, by
the replay-to-closed-form ratio at the previous round's parameters, then replays the records at the new ones.
The rounds stop when no ratio moves by more than :data:`RATIO_TOLERANCE` (or after :data:`MAX_ROUNDS`): at that
point the corrected closed form equals the replay at the fitted parameters, and the fit minimises the replay's
log error to the first order (the ratios vary slowly with the parameters).

The replay is passed in by the caller (``simlab.studies.profile_check.replay_record``: it runs the engine, a
layer above this one); without one the fit is the closed form's, as before.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np

from simlab.hardware.calfit.lsq import FitResult, fit_log
from simlab.hardware.device import RooflineParams

MAX_ROUNDS = 6
RATIO_TOLERANCE = 1e-3  # the largest change of a log ratio between rounds that ends the rounds

Replay = Callable[[object, RooflineParams], dict[str, float]]  # (record, parameters) -> metric -> value
Observation = tuple  # (record, metric, measured value)


def fit_replayed(obs: Sequence[Observation], params_of: Callable[[np.ndarray, object], RooflineParams],
                 closed: Callable[[object, RooflineParams], dict[str, float]], x0: Sequence[float],
                 lower: Sequence[float], upper: Sequence[float], replay: Optional[Replay] = None
                 ) -> tuple[FitResult, int]:
    """Fit ``x`` so that the records' metrics match ``obs``: ``closed(record, params_of(x, record))`` corrected by
    ``replay`` as the module docstring says. Returns the last round's fit and the number of rounds (1 without a
    replay)."""
    measured = np.array([value for _, _, value in obs], dtype=float)
    log_ratio = np.zeros(len(obs))
    start = np.asarray(x0, dtype=float)

    def model(x: np.ndarray) -> np.ndarray:
        return np.array([closed(r, params_of(x, r))[metric] for r, metric, _ in obs]) * np.exp(log_ratio)

    rounds = 0
    while True:
        rounds += 1
        result = fit_log(model, measured, start, lower, upper)
        if replay is None:
            return result, rounds
        new_log_ratio = replayed_log_ratio(obs, result.x, params_of, closed, replay)
        moved = float(np.max(np.abs(new_log_ratio - log_ratio))) if len(obs) else 0.0
        log_ratio = new_log_ratio
        if moved <= RATIO_TOLERANCE or rounds >= MAX_ROUNDS:
            return result, rounds
        start = np.clip(result.x, lower, upper)


def replayed_log_ratio(obs: Sequence[Observation], x: np.ndarray,
                       params_of: Callable[[np.ndarray, object], RooflineParams],
                       closed: Callable[[object, RooflineParams], dict[str, float]], replay: Replay) -> np.ndarray:
    """``log(replay / closed form)`` of every observation at ``x`` (each record replayed once)."""
    replays: dict[int, dict[str, float]] = {}
    out = np.empty(len(obs))
    for i, (record, metric, _) in enumerate(obs):
        params = params_of(x, record)
        if id(record) not in replays:
            replays[id(record)] = replay(record, params)
        out[i] = np.log(replays[id(record)][metric] / closed(record, params)[metric])
    return out
