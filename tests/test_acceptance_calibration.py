"""Sequential temperature scaling: recovers a known temperature, lowers ECE, keeps the order, is safe at 0/1."""

import numpy as np
import pytest
from scipy.special import expit

from simlab.acceptance.calibration import apply_sts, fit_sts
from simlab.acceptance.metrics import ece
from simlab.acceptance.spec import AcceptanceSpec
from simlab.acceptance.warmup import warmup_sample
from simlab.config.acceptance import ConfidenceConfig, HeterogeneityConfig


def _chained(c: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return np.logical_and.accumulate(rng.random(c.shape) < c, axis=1)


def test_recovers_the_temperature_of_an_overconfident_head():
    # true c_k = sigmoid(x_k); the head reports sigmoid(2 x_k): STS must find T = 2 at every position,
    # since then the cumulative product equals the true survival probability.
    rng = np.random.default_rng(2)
    x = 1.0 + 1.5 * rng.standard_normal((200_000, 4))
    accepted = _chained(expit(x), rng)
    temperatures = fit_sts(expit(2.0 * x), accepted)
    assert temperatures == pytest.approx([2.0] * 4, rel=0.12)


def test_lowers_ece_of_a_biased_noisy_head_and_keeps_order():
    spec = AcceptanceSpec(
        base_logit={"dspark": {"chat": np.linspace(1.6, 0.6, 7)}},
        heterogeneity=HeterogeneityConfig(request_logit_sd=0.7, step_logit_sd=0.7, token_logit_sd=1.5),
        confidence=ConfidenceConfig(noise_logit_sd=1.0, bias_logit=0.7),
    )
    fit = warmup_sample(spec, "dspark", {"chat": 1.0}, 7, 40_000, seed=1)
    test = warmup_sample(spec, "dspark", {"chat": 1.0}, 7, 40_000, seed=2)
    temperatures = fit_sts(fit.conf_raw, fit.accepted)
    calibrated = apply_sts(test.conf_raw, temperatures)
    before = [ece(np.cumprod(test.conf_raw, 1)[:, j], test.accepted[:, j]) for j in range(7)]
    after = [ece(np.cumprod(calibrated, 1)[:, j], test.accepted[:, j]) for j in range(7)]
    # sampling floor of a calibrated predictor's ECE: about sqrt(bins * 1/4 / n)
    floor = np.sqrt(15 * 0.25 / len(test))
    assert all(b > 3 * floor for b in before)
    assert all(a < b for a, b in zip(after, before))
    assert max(after) < 3 * floor + 0.01
    for k in range(7):
        order = np.argsort(test.conf_raw[:, k], kind="stable")
        assert np.all(np.diff(calibrated[order, k]) >= 0)


def test_apply_is_safe_at_zero_and_one_and_broadcasts():
    conf = np.array([[[0.0, 1.0, 0.5], [0.2, 0.8, 1.0]]])  # [1, 2, 3]
    out = apply_sts(conf, np.array([2.0, 0.5, 3.0]))
    assert out.shape == conf.shape
    assert np.isfinite(out).all()
    assert out[0, 0, 0] == 0.0 and out[0, 0, 1] == 1.0 and out[0, 0, 2] == 0.5 and out[0, 1, 2] == 1.0
    assert out[0, 1, 0] == pytest.approx(expit(np.log(0.25) / 2.0))


def test_temperature_one_is_identity_and_bad_temperatures_are_refused():
    conf = np.array([[0.3, 0.9]])
    assert apply_sts(conf, np.ones(2)) == pytest.approx(conf)
    with pytest.raises(ValueError):
        apply_sts(conf, np.array([1.0, 0.0]))
    with pytest.raises(ValueError):
        apply_sts(conf, np.array([1.0]))


def test_fit_handles_certain_positions():
    # conf exactly 1 where the position is always accepted: the fit stays finite
    n = 2000
    rng = np.random.default_rng(0)
    conf = np.column_stack([np.ones(n), rng.uniform(0.2, 0.9, n)])
    accepted = np.column_stack([np.ones(n, bool), rng.random(n) < conf[:, 1]])
    temperatures = fit_sts(conf, accepted)
    assert np.isfinite(temperatures).all() and (temperatures > 0).all()
