"""The calibration fit on the engine replay (simlab.calibration.stages.replayed): closed forms with a known
correction, where the fixed point is exact, and the replay the shipped fit uses."""

from dataclasses import replace

import numpy as np
import pytest

from simlab.calibration.stages.lsq import fit_log
from simlab.calibration.stages.replayed import RATIO_TOLERANCE, fit_replayed
from simlab.hardware.device import RooflineParams

BASE = RooflineParams()
# records: (a, b) of a closed form a * step + b * request (seconds) and a replay factor
RECORDS = [(1.0, 3.0), (2.0, 5.0), (4.0, 1.0), (8.0, 7.0)]


def params_of(x, _record):
    return replace(BASE, step_overhead_s=float(x[0]), request_overhead_s=float(x[1]))


def closed(record, params):
    a, b = record
    return {"t": a * params.step_overhead_s + b * params.request_overhead_s}


def observations(truth, metric_of):
    return [(r, "t", metric_of(r, params_of(truth, r))["t"]) for r in RECORDS]


def test_without_a_replay_the_fit_is_the_closed_form_least_squares():
    rng = np.random.default_rng(3)
    obs = [(r, "t", v * float(rng.uniform(0.9, 1.1))) for r, _, v in observations([2.0, 0.5], closed)]
    fit = fit_replayed(obs, params_of, closed, [1.0, 1.0], [0.0, 0.0], [10.0, 10.0])
    result, rounds = fit.result, fit.rounds
    direct = fit_log(lambda x: np.array([closed(r, params_of(x, r))["t"] for r in RECORDS]),
                     np.array([v for _, _, v in obs]), [1.0, 1.0], [0.0, 0.0], [10.0, 10.0])
    assert rounds == 1
    assert np.array_equal(result.x, direct.x)


def test_a_constant_correction_per_record_is_fitted_in_two_rounds():
    """replay = closed form x a fixed factor per record: round 2 fits the corrected closed form, whose ratios then
    stay put; the answer is the closed-form fit of measured / factor."""
    factors = {r: f for r, f in zip(RECORDS, (1.3, 0.8, 1.1, 0.95))}

    def replay(record, params):
        return {"t": closed(record, params)["t"] * factors[record]}

    rng = np.random.default_rng(5)
    obs = [(r, "t", v * float(rng.uniform(0.95, 1.05))) for r, _, v in observations([2.0, 0.5], replay)]
    fit = fit_replayed(obs, params_of, closed, [1.0, 1.0], [0.0, 0.0], [10.0, 10.0], replay)
    result, rounds = fit.result, fit.rounds
    direct = fit_log(lambda x: np.array([closed(r, params_of(x, r))["t"] for r in RECORDS]),
                     np.array([v / factors[r] for r, _, v in obs]), [1.0, 1.0], [0.0, 0.0], [10.0, 10.0])
    assert rounds == 2
    assert result.x == pytest.approx(direct.x, rel=1e-8)


def test_a_replay_that_bends_with_the_parameters_is_matched_where_it_can_be():
    """replay = closed form x (1 + 0.2 step / (1 + request)): with data the replay matches exactly at ``truth``, the
    rounds converge to ``truth`` (the corrected closed form equals the replay at the fixed point), not to the
    closed form's own optimum."""

    def replay(record, params):
        bend = 1.0 + 0.2 * params.step_overhead_s / (1.0 + params.request_overhead_s)
        return {"t": closed(record, params)["t"] * bend * (1.0 + 0.05 * record[0])}

    truth = [2.0, 0.5]
    obs = observations(truth, replay)
    fit = fit_replayed(obs, params_of, closed, [1.0, 1.0], [0.0, 0.0], [10.0, 10.0], replay)
    result, rounds = fit.result, fit.rounds
    plain = fit_replayed(obs, params_of, closed, [1.0, 1.0], [0.0, 0.0], [10.0, 10.0]).result
    assert 2 < rounds < 6
    assert result.x == pytest.approx(truth, rel=10 * RATIO_TOLERANCE)
    assert abs(plain.x[0] - truth[0]) > 0.1  # the closed form alone is far off


def test_the_replay_the_fit_uses_is_the_engine_check_itself():
    """replay_record on the parameters a record's roofline resolves gives exactly what profiles check
    simulates, so the fit minimises the error the check states."""
    from simlab.config.hardware import RooflineHardware
    from simlab.hardware.calibration import resolve_params
    from simlab.calibration.profile_check import load_records, replay_record, simulate_record

    records = load_records()
    for record in (
        records[0],
        next(r for r in records if r.speculative),
        next(r for r in records if r.concurrency >= 64),
    ):
        params = resolve_params(RooflineHardware(**record.hardware()), record.gpu)
        assert replay_record(record, params) == simulate_record(record)


def test_where_the_corrected_rounds_stall_the_polish_on_the_replay_finds_the_match():
    """A replay whose shape differs from the closed form's (powers of the parameters, a weight per record): the
    ratios keep moving for all six rounds, and the least-squares search on the replay itself reaches the
    parameters that made the data."""

    def replay(record, params):
        a, b = record
        return {"t": (a * params.step_overhead_s) ** 1.3 + 0.5 * b * params.request_overhead_s ** 0.7}

    truth = [2.0, 0.5]
    obs = observations(truth, replay)
    fit = fit_replayed(obs, params_of, closed, [1.0, 1.0], [0.0, 0.0], [10.0, 10.0], replay)
    assert fit.rounds == 6 and fit.polished
    assert fit.result.x == pytest.approx(truth, rel=1e-6)
    assert fit.result.rms_log_residual < 1e-8
    assert np.allclose(fit.result.residuals, 0.0, atol=1e-8)  # the replay's residuals, not the closed form's
