"""Fitting a stage's parameters to what the engine replay predicts, not only its closed form.

Stages 3 to 5 predict an engine record in closed form (a steady batch at the mean context): fast enough for a
least-squares search, but up to a third off what the engine itself simulates for the same parameters (the
ramp-up, preemption, the staggered prefills of a closed loop). ``simlab profiles check`` states the error of the
replay, so the fit is made on the replay, in two steps:

1. **Corrected rounds.** Each round fits the closed form multiplied, per record and metric, by the
   replay-to-closed-form ratio at the previous round's parameters, then replays the records at the new ones. The
   rounds stop when no ratio moves by more than :data:`RATIO_TOLERANCE`, or after :data:`MAX_ROUNDS` (two
   parameters that trade against each other can make the rounds alternate between two answers). The round whose
   replay is closest to the measurements is kept.
2. **Polish.** A least-squares search on the replay itself starts there (finite differences of
   :data:`DIFF_STEP` relative, at most :data:`POLISH_EVALS` steps): the corrected closed form is exact only at the
   parameters it was corrected at, and the polish removes what is left where the ratios vary with the
   parameters. The better of the two, by the replay's own residual, is the answer.

The replay is :func:`simlab.calibration.profile_check.replay_record` (it runs the engine), which
:func:`simlab.calibration.stages.calibrate` and ``simlab profiles fit`` read directly; the functions here take
any replay (the tests give them closed forms with a known correction), and without one the fit is the closed
form's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np

from simlab.calibration.stages.lsq import FitResult, fit_log, fit_result

MAX_ROUNDS = 6
RATIO_TOLERANCE = 1e-3  # the largest change of a log ratio between rounds that ends the rounds
POLISH_EVALS = 12  # least-squares steps on the replay (each also replays once per parameter for the Jacobian)
DIFF_STEP = 1e-3  # relative finite-difference step on the replay (engine decisions make it piecewise smooth)

Replay = Callable[[object, object], dict[str, float]]  # (record, RooflineParams) -> metric -> value
Observation = tuple  # (record, metric, measured value)


@dataclass(frozen=True)
class ReplayedFit:
    """The answer (its residuals the replay's when there is one; its standard errors from the replay's Jacobian
    when polished, else the corrected closed form's), the rounds, and whether the polish gave it."""

    result: FitResult
    rounds: int
    polished: bool


def fit_replayed(obs: Sequence[Observation], params_of: Callable[[np.ndarray, object], object],
                 closed: Callable[[object, object], dict[str, float]], x0: Sequence[float],
                 lower: Sequence[float], upper: Sequence[float], replay: Optional[Replay] = None) -> ReplayedFit:
    """Fit ``x`` so that the records' metrics match ``obs``: ``closed(record, params_of(x, record))``, on
    ``replay`` as the module docstring says when it is given."""
    measured = np.array([value for _, _, value in obs], dtype=float)
    log_measured = np.log(measured)
    log_ratio = np.zeros(len(obs))
    start = np.asarray(x0, dtype=float)

    def model(x: np.ndarray) -> np.ndarray:
        return np.array([closed(r, params_of(x, r))[metric] for r, metric, _ in obs]) * np.exp(log_ratio)

    if replay is None:
        return ReplayedFit(fit_log(model, measured, start, lower, upper), 1, False)
    best: Optional[FitResult] = None  # with the replay's residuals
    rounds = 0
    while True:
        rounds += 1
        result = fit_log(model, measured, start, lower, upper)
        replayed = replayed_values(obs, result.x, params_of, replay)
        candidate = FitResult(result.x, result.standard_errors, np.log(replayed) - log_measured, result.jacobian)
        if best is None or candidate.rms_log_residual < best.rms_log_residual:
            best = candidate
        closed_now = np.array([closed(r, params_of(result.x, r))[metric] for r, metric, _ in obs])
        new_log_ratio = np.log(replayed) - np.log(closed_now)
        moved = float(np.max(np.abs(new_log_ratio - log_ratio))) if len(obs) else 0.0
        log_ratio = new_log_ratio
        if moved <= RATIO_TOLERANCE or rounds >= MAX_ROUNDS:
            break
        start = np.clip(result.x, lower, upper)
    polished = _polish(obs, best.x, params_of, replay, log_measured, lower, upper)
    if polished.rms_log_residual < best.rms_log_residual:
        return ReplayedFit(polished, rounds, True)
    return ReplayedFit(best, rounds, False)


def replayed_values(obs: Sequence[Observation], x: np.ndarray, params_of: Callable[[np.ndarray, object], object],
                    replay: Replay) -> np.ndarray:
    """The replay's value of every observation at ``x`` (each record replayed once)."""
    replays: dict[int, dict[str, float]] = {}
    out = np.empty(len(obs))
    for i, (record, metric, _) in enumerate(obs):
        if id(record) not in replays:
            replays[id(record)] = replay(record, params_of(x, record))
        out[i] = replays[id(record)][metric]
    return out


def _polish(obs, x: np.ndarray, params_of, replay: Replay, log_measured: np.ndarray, lower, upper) -> FitResult:
    from scipy.optimize import least_squares

    def residual(z: np.ndarray) -> np.ndarray:
        return np.log(replayed_values(obs, z, params_of, replay)) - log_measured

    lower, upper = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    # a start on a bound stays inside it: the search's finite differences step away from the bound
    return fit_result(least_squares(residual, np.clip(x, lower, upper), bounds=(lower, upper), x_scale="jac",
                                    diff_step=DIFF_STEP, max_nfev=POLISH_EVALS, method="trf"))
