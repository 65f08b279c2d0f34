"""Cost curves fitted from a run's own steps (simlab validate), and the relative errors it reports."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from simlab.config.hardware import TableHardware
from simlab.hardware.curves import Curve
from simlab.hardware.table import TableCostModel
from simlab.real.validate.compare import arm_comparison, failures, relative_error
from simlab.real.validate.costs import SchedulerCost, fit_cost_table

A, B, C, D0, D1, P = 0.004, 0.0002, 0.000003, 0.0015, 0.0004, 0.00025


def _steps(num: int = 400, noise: float = 0.0, seed: int = 0):
    rng = np.random.default_rng(seed)
    decode = rng.integers(0, 17, num)
    verify = np.where(decode > 0, rng.integers(0, 8, num) * decode // 2, 0)
    context = decode * rng.integers(60, 200, num)
    prefill = np.where(rng.random(num) < 0.2, rng.integers(1, 129, num), 0)
    prefill[decode == 0] = np.maximum(prefill[decode == 0], 16)
    batch = np.where(decode > 0, decode + verify, 0)
    draft_s = np.where(decode > 0, D0 + D1 * decode, 0.0)
    rest_s = np.where(decode > 0, A + B * batch + C * context, 0.0) + P * prefill
    draft_s = draft_s * (1 + noise * rng.standard_normal(num))
    rest_s = rest_s * (1 + noise * rng.standard_normal(num))
    steps = pd.DataFrame(
        {
            "arm": "x",
            "t_s": 0.0,
            "num_requests": decode + (prefill > 0),
            "batch_tokens": batch + prefill,
            "verify_tokens": verify,
            "accepted_tokens": 0,
            "step_s": draft_s + rest_s,
            "decode_requests": decode,
            "emitted_tokens": 0,
            "prefill_tokens": prefill,
            "replica": 0,
        }
    )
    return steps, pd.DataFrame({"draft_s": draft_s, "context_tokens": context})


def _fit(steps, times):
    return fit_cost_table(steps, times, method="dspark", gamma=7, name="fit", max_batch_tokens=512,
                          max_context_tokens=8192, kv_cache_tokens=4096)


def test_a_linear_machine_is_recovered_exactly_and_prices_steps_as_the_simulator_reads_them():
    steps, times = _steps()
    table = _fit(steps, times)
    coef = table["provenance"]["coefficients"]
    for name, value in {"a": A, "b": B, "c": C, "d0": D0, "d1": D1, "per_token_s": P}.items():
        assert coef[name] == pytest.approx(value, rel=1e-9, abs=1e-15), name
    cost = TableCostModel(TableHardware.model_validate(table))
    decode = steps["decode_requests"].to_numpy()
    batch = (steps["batch_tokens"] - steps["prefill_tokens"]).to_numpy()
    context = times["context_tokens"].to_numpy(float)
    predicted = [cost.draft_s("dspark", 7, int(r)) + (cost.step_s(int(b), float(c), int(r), int(p)) if r or p else 0)
                 for r, b, c, p in zip(decode, batch, context, steps["prefill_tokens"])]
    np.testing.assert_allclose(predicted, steps["step_s"], rtol=1e-9, atol=1e-12)


def test_with_noise_the_fit_keeps_the_runs_total_time():
    steps, times = _steps(num=3000, noise=0.3, seed=1)
    table = _fit(steps, times)
    cost = TableCostModel(TableHardware.model_validate(table))
    decode = steps["decode_requests"].to_numpy()
    batch = (steps["batch_tokens"] - steps["prefill_tokens"]).to_numpy()
    context = times["context_tokens"].to_numpy(float)
    predicted = sum(cost.draft_s("dspark", 7, int(r)) + (cost.step_s(int(b), float(c), int(r), int(p)) if r or p else 0)
                    for r, b, c, p in zip(decode, batch, context, steps["prefill_tokens"]))
    # least squares with intercepts: the residuals of each part sum to about 0 (the non-negativity never binds)
    assert predicted == pytest.approx(steps["step_s"].sum(), rel=2e-3)


def test_the_scheduler_reads_the_real_schedulers_curve_and_is_timed_by_the_fit():
    steps, times = _steps()
    timing = TableCostModel(TableHardware.model_validate(_fit(steps, times)))
    curve = Curve([1, 8, 64], [0.01, 0.012, 0.03])
    view = SchedulerCost(timing, curve)
    np.testing.assert_allclose(view.verify_s(np.array([[0, 1, 8, 36]]), np.array([[500.0]])),
                               [[0.0, 0.01, 0.012, 0.021]])
    assert view.verify_s(8, 123.0) == pytest.approx(0.012)
    assert view.draft_s("dspark", 7, 5) == timing.draft_s("dspark", 7, 5)
    assert view.step_s(10, 300.0, 2, 16) == timing.step_s(10, 300.0, 2, 16)


def test_relative_errors_and_bounds():
    assert relative_error(105.0, 100.0) == pytest.approx(0.05)
    assert relative_error([0.5, None, 0.2], [0.4, 0.3]) == [pytest.approx(0.25), None, None]
    assert relative_error(1.0, 0.0) is None
    real = {"output_throughput": 100.0, "mean_tpot_ms": 20.0, "spec_decode_acceptance_length": 2.5}
    simulated = {"output_throughput": 104.0, "mean_tpot_ms": 21.2, "spec_decode_acceptance_length": 2.5}
    part = arm_comparison(real, simulated)
    assert not part["within_bounds"] and part["error"]["mean_tpot_ms"] == pytest.approx(0.06)
    assert failures({"arms": {"a": part}}) == ["a mean_tpot_ms +6.0% (bound 5.0%)"]
    noisy = arm_comparison(real, simulated, noise={"mean_tpot_ms": 0.02})
    assert noisy["bounds"]["mean_tpot_ms"] == pytest.approx(0.08) and noisy["within_bounds"]
    assert not noisy["within_target"] and failures({"arms": {"a": noisy}}) == []
    assert failures({"arms": {"a": noisy}}, against="target") == ["a mean_tpot_ms +6.0% (target 5.0%)"]
    simulated["mean_tpot_ms"] = 20.9
    assert arm_comparison(real, simulated)["within_bounds"]


def test_sampling_noise_by_hand():
    from simlab.real.validate.noise import combine, pooled_tau_relative_se, simulated_relative_se, tpot_relative_se

    # two requests: 2 rounds emitting 3 + 1, and 2 rounds emitting 2 + 2: tau = 8 / 4 = 2, every request's total 4
    rounds = pd.DataFrame({"id": [0, 0, 1, 1]})
    assert pooled_tau_relative_se(rounds, pd.Series([3, 1, 2, 2])) == 0.0
    # totals 6 and 2 over 2 rounds each: tau 2; residuals 2 and -2; se = sqrt(2 / 1 * 8) / 4 = 1
    assert pooled_tau_relative_se(rounds, pd.Series([3, 3, 1, 1])) == pytest.approx(1.0 / 2.0)
    requests = pd.DataFrame({"output_tokens": [11, 11, 1], "first_token_s": [0.0, 0.0, 0.0],
                             "finish_s": [1.0, 3.0, 0.0]})
    # TPOTs 0.1 and 0.3: sd 0.1414, mean 0.2, n 2
    assert tpot_relative_se(requests) == pytest.approx(np.std([0.1, 0.3], ddof=1) / np.sqrt(2) / 0.2)
    assert simulated_relative_se([1.0, 3.0]) == pytest.approx(np.std([1, 3], ddof=1) / np.sqrt(2) / 2.0)
    assert combine(0.03, 0.04) == pytest.approx(0.05)


def test_paired_noise_cancels_what_requests_share():
    from simlab.real.validate.noise import paired_tau_relative_se, pooled_tau_relative_se

    ids = pd.Series([0, 0, 1, 1])
    easy_and_hard = pd.Series([3, 3, 1, 1])  # request 0 is easy, request 1 hard, in both runs
    assert paired_tau_relative_se(ids, easy_and_hard, ids, easy_and_hard) == 0.0
    assert pooled_tau_relative_se(ids.to_frame("id"), easy_and_hard) == pytest.approx(0.5)
    # run b: request 0 emits one token more in its first round. shares a = (2/4, -2/4); tau_b = 9/4,
    # shares b = ((7 - 4.5) / 4, (2 - 4.5) / 4); u = (-0.125, 0.125); se = sqrt(2 * 2 * 0.015625) / tau_a(2)
    other = pd.Series([4, 3, 1, 1])
    assert paired_tau_relative_se(ids, easy_and_hard, ids, other) == pytest.approx(np.sqrt(4 * 0.015625) / 2.0)
