"""Warm-up samples follow the model; the confidence report is JSON-able and sensible."""

import json

import numpy as np

from simlab.acceptance import build_acceptance, confidence_report, warmup_sample
from simlab.acceptance.expected import expected_survival
from simlab.acceptance.spec import AcceptanceSpec
from simlab.config.acceptance import ConfidenceConfig, HeterogeneityConfig, PresetAcceptance

SPEC = AcceptanceSpec(
    base_logit={"dspark": {"math": np.linspace(2.5, 1.5, 8), "chat": np.linspace(1.2, 0.2, 8)}},
    heterogeneity=HeterogeneityConfig(
        request_logit_sd=0.6, step_logit_sd=0.8, step_correlation=0.5, token_logit_sd=1.1
    ),
    confidence=ConfidenceConfig(noise_logit_sd=0.7, bias_logit=0.4),
    calibration_samples=20_000,
)


def test_sample_shapes_and_chained_outcomes():
    s = warmup_sample(SPEC, "dspark", {"math": 0.3, "chat": 0.7}, 6, 5000, seed=4)
    assert s.c_true.shape == s.conf_raw.shape == s.accepted.shape == (5000, 6)
    assert s.accepted.dtype == bool
    # chained: once rejected, never accepted again
    assert not np.any(~s.accepted[:, :-1] & s.accepted[:, 1:])
    assert set(np.unique(s.domain)) == {0, 1} and s.domains == ("math", "chat")


def test_unpooled_sample_survival_matches_quadrature_within_sampling_error():
    n = 100_000
    weights = {"math": 0.3, "chat": 0.7}
    s = warmup_sample(SPEC, "dspark", weights, 8, n, seed=9, pooled=False)
    exact = expected_survival(SPEC, "dspark", weights, 8)
    observed = s.accepted.mean(axis=0)
    se = np.sqrt(exact * (1 - exact) / n)
    assert np.all(np.abs(observed - exact) < 5 * se)
    # the true conditional acceptances average to the same survival: E[prod c] = a_j
    products = np.cumprod(s.c_true, axis=1)
    se_c = products.std(axis=0) / np.sqrt(n)
    assert np.all(np.abs(products.mean(axis=0) - exact) < 5 * se_c)


def test_pooled_sample_is_distributed_like_the_rounds_of_a_run():
    # rows resampled by 1 / tau(domain, delta): their survival is the pooled expectation. Resampling makes the
    # rows share request shifts, so the standard error comes from independent replications.
    weights = {"math": 0.3, "chat": 0.7}
    reps = np.array([warmup_sample(SPEC, "dspark", weights, 8, 25_000, seed=100 + i).accepted.mean(axis=0)
                     for i in range(16)])
    se = reps.std(axis=0, ddof=1) / np.sqrt(len(reps))
    pooled = expected_survival(SPEC, "dspark", weights, 8, pooled=True)
    assert np.all(np.abs(reps.mean(axis=0) - pooled) < 6.5 * se)  # t with 15 df: two-sided p ~ 1e-5
    per_round = expected_survival(SPEC, "dspark", weights, 8)
    assert np.all(np.abs(reps.mean(axis=0) - per_round) > 20 * se)


def test_the_same_seed_gives_the_same_sample():
    a = warmup_sample(SPEC, "dspark", {"chat": 1.0}, 4, 100, seed=1)
    b = warmup_sample(SPEC, "dspark", {"chat": 1.0}, 4, 100, seed=1)
    assert np.array_equal(a.conf_raw, b.conf_raw) and np.array_equal(a.accepted, b.accepted)


def test_confidence_report_is_json_and_calibration_helps():
    report = confidence_report(SPEC, "dspark", {"math": 1, "chat": 1}, 7, calibrate=True, seed=3)
    json.dumps(report)
    assert report["num_fit"] == report["num_eval"] == 10_000
    for key in ("temperatures", "auc", "ece_raw", "ece_calibrated", "reached", "acceptance_rate"):
        assert len(report[key]) == 7
    assert all(isinstance(t, float) and t > 0 for t in report["temperatures"])
    assert all(0.5 < a < 1 for a in report["auc"])
    assert np.mean(report["ece_calibrated"]) < np.mean(report["ece_raw"])
    plain = confidence_report(SPEC, "dspark", {"chat": 1}, 7, calibrate=False, seed=3)
    assert plain["temperatures"] is None and plain["ece_calibrated"] is None


def test_report_for_a_homogeneous_iid_model_cannot_rank_and_is_calibrated():
    iid = AcceptanceSpec(base_logit={"eagle3": {"*": np.full(16, 1.0)}}, calibration_samples=2000)
    report = confidence_report(iid, "eagle3", {"chat": 1}, 3, calibrate=True, seed=0)
    # every round has the same c: the head cannot rank (AUC 1/2), and a perfect head is calibrated
    assert report["auc"] == [0.5, 0.5, 0.5]
    assert max(report["ece_raw"]) < 5 * np.sqrt(0.25 / 1000)


def test_preset_default_calibration_samples():
    spec = build_acceptance(PresetAcceptance(kind="preset", name="qwen3-4b"), file=None)
    assert spec.calibration_samples == 20_000
    report = confidence_report(spec, "dspark", {"chat": 1.0}, 7, calibrate=True, seed=0)
    assert report["num_fit"] + report["num_eval"] == 20_000
