"""simlab.arms.head_model: the confidence report and prior of an arm, computed once per process per key."""

from __future__ import annotations

import dataclasses

import numpy as np

from simlab import arms
from simlab.acceptance import apply_sts, confidence_report, warmup_sample
from simlab.acceptance.spec import AcceptanceSpec
from simlab.config.acceptance import ConfidenceConfig, HeterogeneityConfig

WEIGHTS = {"chat": 0.6, "math": 0.4}
SPEC = AcceptanceSpec(
    base_logit={method: {"chat": np.linspace(1.6, 0.4, 7), "math": np.linspace(2.2, 1.0, 7)}
                for method in ("dspark", "dflash")},
    heterogeneity=HeterogeneityConfig(request_logit_sd=0.6, step_logit_sd=0.5, token_logit_sd=1.2),
    confidence=ConfidenceConfig(noise_logit_sd=0.8, bias_logit=0.5),
    calibration_samples=2000,
)


def _direct(spec, method, weights, gamma, calibrate, seed):
    report = confidence_report(spec, method, weights, gamma, calibrate=calibrate, seed=seed)
    temperatures = np.asarray(report["temperatures"]) if report.get("temperatures") else None
    sample = warmup_sample(spec, method, weights, gamma, min(spec.calibration_samples, 4096), seed + 1)
    conf = sample.conf_raw if temperatures is None else apply_sts(sample.conf_raw, temperatures)
    return report, np.asarray(conf, dtype=float).mean(axis=0)


def test_head_model_is_the_direct_computation_and_is_not_shared():
    spec = SPEC
    arms._HEAD_MODELS.clear()
    for calibrate in (True, False):
        report, prior = arms.head_model(spec, "dspark", WEIGHTS, 5, calibrate=calibrate, seed=3)
        expected_report, expected_prior = _direct(spec, "dspark", WEIGHTS, 5, calibrate, 3)
        assert report == expected_report and np.array_equal(prior, expected_prior)
    again, prior_again = arms.head_model(spec, "dspark", WEIGHTS, 5, calibrate=True, seed=3)
    assert len(arms._HEAD_MODELS) == 2  # the second call of a key computes nothing
    again["temperatures"][0] = -1.0
    prior_again[0] = -1.0
    fresh, fresh_prior = arms.head_model(spec, "dspark", WEIGHTS, 5, calibrate=True, seed=3)
    assert fresh["temperatures"][0] > 0 and fresh_prior[0] > 0  # callers get copies


def test_head_model_key_holds_everything_it_reads():
    spec = SPEC
    arms._HEAD_MODELS.clear()
    base, _ = arms.head_model(spec, "dspark", WEIGHTS, 5, calibrate=True, seed=3)
    noisier = dataclasses.replace(spec, confidence=ConfidenceConfig(noise_logit_sd=1.5, bias_logit=0.4))
    variants = [
        (noisier, "dspark", WEIGHTS, 5, 3),
        (spec, "dflash", WEIGHTS, 5, 3),
        (spec, "dspark", {"chat": 0.5, "math": 0.5}, 5, 3),
        (spec, "dspark", WEIGHTS, 4, 3),
        (spec, "dspark", WEIGHTS, 5, 4),
        (dataclasses.replace(spec, calibration_samples=1000), "dspark", WEIGHTS, 5, 3),
    ]
    for variant_spec, method, weights, gamma, seed in variants:
        report, prior = arms.head_model(variant_spec, method, weights, gamma, calibrate=True, seed=seed)
        expected_report, expected_prior = _direct(variant_spec, method, weights, gamma, True, seed)
        assert report == expected_report and np.array_equal(prior, expected_prior)
        assert report != base
    assert len(arms._HEAD_MODELS) == 1 + len(variants)
