"""The latent model's likelihood is exact (gradient, closed-form cases), and fitting recovers the parameters of
logs drawn with the engine's own acceptance draws (ArmDraws), within tolerances from the fit's standard errors."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.polynomial.hermite_e import hermegauss
from scipy.special import expit, logit
from scipy.stats import binomtest

from simlab.acceptance import build_acceptance
from simlab.acceptance.expected import measured_conditional_from_logits
from simlab.acceptance.fitting.estimate import fit_latent
from simlab.acceptance.fitting.fit import fit_log
from simlab.acceptance.fitting.likelihood import SHARED, RoundsLikelihood
from simlab.acceptance.fitting.rates import wilson_interval
from simlab.acceptance.logs.parsed import AcceptanceLog, Rounds
from simlab.acceptance.synthetic import simulate_rounds
from simlab.config.acceptance import HeterogeneityConfig, PositionalAcceptance

CURVES = {"chat": [0.8, 0.75, 0.7, 0.66, 0.62], "math": [0.9, 0.86, 0.82, 0.8, 0.76]}
Z = 4.0  # tolerance in standard errors (two-sided, per parameter)


def spec_of(heterogeneity: dict, confidence: dict | None = None):
    data = {"kind": "positional", "methods": {"dspark": CURVES}, "heterogeneity": heterogeneity}
    if confidence:
        data["confidence"] = confidence
    return build_acceptance(PositionalAcceptance.model_validate(data), file=None)


def without_confidences(rounds: Rounds) -> Rounds:
    return Rounds(rounds.method, rounds.domain, rounds.sequence, rounds.cluster, rounds.step, rounds.drafted,
                  rounds.verified, rounds.accepted, None)


def groups_of(rounds: Rounds):
    counts = rounds.counts()
    return {k: len(v.reached) for k, v in counts.items()}, {k: v.rates for k, v in counts.items()}


# ------------------------------------------------------------------------------------------------ exactness
@pytest.mark.parametrize("with_conf", [False, True])
def test_gradient_matches_finite_differences(with_conf):
    spec = spec_of({"request_logit_sd": 0.8, "step_logit_sd": 0.7, "step_correlation": 0.6, "token_logit_sd": 0.5},
                   {"noise_logit_sd": 0.6, "bias_logit": 0.3})
    rounds = simulate_rounds(spec, "dspark", {"chat": 0.5, "math": 0.5}, 5, 12, 30, seed=3,
                             verify_len=lambda conf: 2 + (conf[:, 0] > 0.8) * 3)
    rounds = rounds if with_conf else without_confidences(rounds)
    groups, _ = groups_of(rounds)
    lik = RoundsLikelihood(rounds, groups)
    theta = np.concatenate([np.linspace(0.5, 2.0, lik.num_logits), [0.7, 0.6, 0.5, 0.5, 0.2, 0.7]])
    analytic = lik.evaluate(theta, scores=True)
    numeric = np.zeros_like(theta)
    for i in range(len(theta)):
        step = np.zeros_like(theta)
        step[i] = 1e-5
        numeric[i] = (lik.evaluate(theta + step).loglik - lik.evaluate(theta - step).loglik) / 2e-5
    if not with_conf:  # bias and head noise do not enter without confidences
        assert analytic.grad[-2:].tolist() == [0.0, 0.0]
    np.testing.assert_allclose(analytic.grad, numeric, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(analytic.cluster_scores.sum(axis=0), analytic.grad, atol=1e-9)


def _rounds(accepted, verified, sequence, domain="chat"):
    n = len(accepted)
    step = np.concatenate([np.arange(np.sum(sequence == s)) for s in np.unique(sequence)])
    return Rounds(np.full(n, "dspark", dtype=object), np.full(n, domain, dtype=object), sequence,
                  sequence.astype(object), step, np.asarray(verified), np.asarray(verified), np.asarray(accepted))


def _exact_round(L, a, ell, shifts, weights):
    """P(round | shift) summed over shift nodes: accepted a of ell verified."""
    c = expit(L[None, :] + shifts[:, None])
    p = np.prod(c[:, :a], axis=1) * ((1 - c[:, a]) if a < ell else 1.0)
    return p, weights


def test_likelihood_equals_quadrature_when_steps_are_independent():
    # rho = 0 and no request term: rounds are independent, each an integral over s ~ N(0, sd^2)
    L = logit(np.array(CURVES["chat"]))
    accepted = np.array([5, 0, 2, 5, 1, 3, 0, 4])
    verified = np.array([5, 5, 5, 5, 2, 5, 1, 4])
    rounds = _rounds(accepted, verified, np.zeros(len(accepted), dtype=np.int64))
    x, w = hermegauss(200)
    w = w / w.sum()
    exact = sum(np.log(w @ _exact_round(L, a, ell, 1.3 * x, w)[0]) for a, ell in zip(accepted, verified))
    theta = np.concatenate([L, [0.0, 1.3, 0.0, 0.0, 0.0, 1.0]])
    got = RoundsLikelihood(rounds, {("dspark", "chat"): 5}).evaluate(theta).loglik
    assert got == pytest.approx(exact, abs=2e-4)


def test_likelihood_equals_quadrature_for_request_terms():
    # no step term: each request's rounds share delta ~ N(0, sd^2); the likelihood is one integral per request
    L = logit(np.array(CURVES["math"]))
    accepted = np.array([5, 4, 5, 5, 0, 1, 0, 2, 5])
    verified = np.full(len(accepted), 5)
    sequence = np.array([0, 0, 0, 0, 1, 1, 1, 1, 2])
    rounds = _rounds(accepted, verified, sequence, "math")
    x, w = hermegauss(200)
    w = w / w.sum()
    exact = 0.0
    for s in np.unique(sequence):
        rows = sequence == s
        p = np.ones(len(x))
        for a, ell in zip(accepted[rows], verified[rows]):
            p = p * _exact_round(L, a, ell, 1.1 * x, w)[0]
        exact += np.log(w @ p)
    theta = np.concatenate([L, [1.1, 0.0, 0.0, 0.0, 0.0, 1.0]])
    got = RoundsLikelihood(rounds, {("dspark", "math"): 5}).evaluate(theta).loglik
    assert got == pytest.approx(exact, abs=2e-4)


def test_wilson_interval_matches_scipy():
    accepted, reached = np.array([0, 7, 50, 99]), np.array([10, 12, 100, 100])
    low, high = wilson_interval(accepted, reached)
    for a, n, lo, hi in zip(accepted, reached, low, high):
        ci = binomtest(int(a), int(n)).proportion_ci(confidence_level=0.95, method="wilson")
        assert (lo, hi) == pytest.approx((ci.low, ci.high), abs=1e-12)


# ------------------------------------------------------------------------------------------------ recovery
def _check(name, estimate, se, truth, max_se):
    assert se is not None and np.isfinite(se) and 0 < se < max_se, f"{name}: se {se}"
    assert abs(estimate - truth) <= Z * se, f"{name}: {estimate:.4f} vs {truth} (se {se:.4f})"


def test_recovers_request_and_step_heterogeneity_from_outcomes():
    truth = {"request_logit_sd": 0.8, "step_logit_sd": 0.9, "step_correlation": 0.6}
    spec = spec_of(truth)
    rounds = without_confidences(simulate_rounds(spec, "dspark", {"chat": 0.5, "math": 0.5}, 5, 120, 80, seed=21))
    groups, rates = groups_of(rounds)
    fit = fit_latent(rounds, groups, rates)
    assert fit.converged and fit.free == ["request_logit_sd", "step_logit_sd", "step_correlation"]
    for name, value in truth.items():
        _check(name, fit.shared[name], fit.shared_se[name], value, max_se=0.15)
    for (method, domain), values in fit.logits.items():
        for k, value in enumerate(values):
            _check(f"L[{domain}][{k}]", value, fit.logit_se[(method, domain)][k], logit(CURVES[domain][k]), 0.4)
    # with the fitted heterogeneity the curve reproduces the measured (pooled, conditional) rates
    het = HeterogeneityConfig(**{k: fit.shared[k] for k in truth})
    for key, counts in rounds.counts().items():
        model = measured_conditional_from_logits(fit.logits[key], het, pooled=True)
        binomial_se = np.sqrt(counts.rates * (1 - counts.rates) / counts.reached)
        assert np.all(np.abs(model - counts.rates) <= Z * binomial_se), (key, model, counts.rates)


@pytest.mark.slow
def test_recovers_head_error_and_token_noise_from_confidences():
    truth = {"request_logit_sd": 0.8, "step_logit_sd": 0.9, "step_correlation": 0.6, "token_logit_sd": 0.7}
    head = {"noise_logit_sd": 0.8, "bias_logit": 0.4}
    rounds = simulate_rounds(spec_of(truth, head), "dspark", {"chat": 0.5, "math": 0.5}, 5, 120, 100, seed=11)
    groups, rates = groups_of(rounds)
    fit = fit_latent(rounds, groups, rates)
    assert fit.converged and set(fit.free) == set(SHARED)
    for name, value in {**truth, **head}.items():
        _check(name, fit.shared[name], fit.shared_se[name], value, max_se=0.15)


@pytest.mark.slow
def test_rounds_without_requests_identify_the_total_shift():
    truth = {"request_logit_sd": 0.8, "step_logit_sd": 0.9, "step_correlation": 0.6, "token_logit_sd": 0.7}
    head = {"noise_logit_sd": 0.8, "bias_logit": 0.4}
    rounds = simulate_rounds(spec_of(truth, head), "dspark", {"chat": 1.0}, 5, 3000, 40, seed=5)
    first = rounds.select(rounds.step == 0)  # one round per request: no pooling over a request's rounds
    shards = Rounds(first.method, first.domain, np.full(len(first), -1), np.arange(len(first)).astype(object),
                    np.zeros(len(first), dtype=np.int64), first.drafted, first.verified, first.accepted, first.conf)
    groups, rates = groups_of(shards)
    fit = fit_latent(shards, groups, rates)
    total = np.hypot(truth["request_logit_sd"], truth["step_logit_sd"])
    _check("total shift sd", fit.shared["request_logit_sd"], fit.shared_se["request_logit_sd"], total, 0.2)
    for name in ("token_logit_sd", "noise_logit_sd", "bias_logit"):
        _check(name, fit.shared[name], fit.shared_se[name], {**truth, **head}[name], 0.2)
    fitted = fit_log(AcceptanceLog.from_rounds("sglang-sts", ["x"], shards))
    assert fitted.heterogeneity["step_correlation"] == 0.8 and "step_correlation" in fitted.assumed


def test_counts_only_logs_write_measured_rates():
    log = AcceptanceLog.from_rounds("csv", ["x"], without_confidences(simulate_rounds(
        spec_of({}), "dspark", {"chat": 1.0}, 5, 30, 40, seed=2)))
    log.rounds = None  # as a counts-only format gives them
    fitted = fit_log(log)
    counts = log.counts[("dspark", "chat")]
    assert fitted.latent is None and fitted.heterogeneity is None
    np.testing.assert_allclose(fitted.curves["dspark"]["chat"], np.round(counts.rates, 6))
