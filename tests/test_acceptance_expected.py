"""Closed-form expectations: exact for iid, and equal to Monte Carlo / direct integration otherwise."""

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.special import expit

from simlab.acceptance import build_acceptance, expected_survival, expected_tokens_per_round, iid_tokens_per_round
from simlab.acceptance.expected import (
    expected_conditional_acceptance,
    measured_conditional_from_logits,
    survival_curve,
    tokens_per_round_from_logits,
)
from simlab.acceptance.spec import AcceptanceSpec
from simlab.config.acceptance import HeterogeneityConfig, IIDAcceptance


@pytest.mark.parametrize("alpha", [0.05, 0.3, 0.75, 0.9, 0.999])
def test_iid_reduces_exactly_to_the_geometric_closed_form(alpha):
    spec = build_acceptance(IIDAcceptance(kind="iid", alpha=alpha), file=None)
    for gamma in range(1, 17):
        closed = (1 - alpha ** (gamma + 1)) / (1 - alpha)
        assert expected_tokens_per_round(spec, "dspark", "chat", gamma) == pytest.approx(closed, rel=1e-13)
        assert iid_tokens_per_round(alpha, gamma) == pytest.approx(closed, rel=1e-15)
    assert expected_survival(spec, "eagle3", "math", 5) == pytest.approx(alpha ** np.arange(1, 6), rel=1e-13)


def test_iid_edge_cases():
    assert iid_tokens_per_round(1.0, 7) == 8.0
    assert iid_tokens_per_round(0.0, 7) == 1.0
    sure = build_acceptance(IIDAcceptance(kind="iid", alpha=1.0), file=None)
    assert expected_tokens_per_round(sure, "dflash", "x", 7) == 8.0
    never = build_acceptance(IIDAcceptance(kind="iid", alpha=0.0), file=None)
    assert expected_tokens_per_round(never, "dflash", "x", 7) == 1.0


def test_single_position_equals_direct_integration():
    # a_1 = E[sigmoid(L + s + eps)] with s + eps ~ N(0, v): one integral, done by adaptive quadrature
    het = HeterogeneityConfig(request_logit_sd=0.9, step_logit_sd=0.7, token_logit_sd=1.3)
    sd = np.sqrt(0.9**2 + 0.7**2 + 1.3**2)
    for level in (-1.0, 0.4, 2.5):
        truth, _ = quad(lambda x: expit(level + sd * x) * np.exp(-x * x / 2) / np.sqrt(2 * np.pi), -12, 12)
        assert survival_curve(np.array([level]), het)[0] == pytest.approx(truth, abs=1e-10)


def test_quadrature_matches_monte_carlo_within_sampling_error():
    n = 400_000
    het = HeterogeneityConfig(request_logit_sd=1.2, step_logit_sd=1.0, step_correlation=0.6, token_logit_sd=1.6)
    logits = np.array([3.0, 2.2, 1.6, 1.2, 1.0, 0.9, 0.85, 0.8])
    rng = np.random.default_rng(17)
    shift = np.hypot(1.2, 1.0) * rng.standard_normal(n)
    c = expit(logits[None, :] + shift[:, None] + 1.6 * rng.standard_normal((n, len(logits))))
    products = np.cumprod(c, axis=1)
    mc, se = products.mean(axis=0), products.std(axis=0, ddof=1) / np.sqrt(n)
    exact = survival_curve(logits, het)
    assert np.all(np.abs(exact - mc) < 5 * se)
    # tau and the measured conditional acceptance follow from the same a_j
    tau_se = np.sqrt(np.var(products.sum(axis=1), ddof=1) / n)
    assert abs(tokens_per_round_from_logits(logits, het) - (1 + mc.sum())) < 5 * tau_se
    ratio = measured_conditional_from_logits(logits, het)
    assert ratio[0] == pytest.approx(exact[0]) and ratio[3] == pytest.approx(exact[3] / exact[2])


def test_selection_makes_measured_acceptance_rise_on_a_flat_curve():
    het = HeterogeneityConfig(request_logit_sd=1.0, token_logit_sd=0.5)
    measured = measured_conditional_from_logits(np.full(8, 1.0), het)
    assert np.all(np.diff(measured) > 0)
    assert np.all(np.diff(survival_curve(np.full(8, 1.0), het)) < 0)


def test_step_correlation_does_not_change_expectations():
    logits = np.array([2.0, 1.0, 0.5])
    a = survival_curve(logits, HeterogeneityConfig(request_logit_sd=0.5, step_logit_sd=0.8, step_correlation=0.0))
    b = survival_curve(logits, HeterogeneityConfig(request_logit_sd=0.5, step_logit_sd=0.8, step_correlation=0.95))
    assert np.array_equal(a, b)


def test_domain_mix_is_the_weighted_mean():
    spec = AcceptanceSpec(
        base_logit={"dspark": {"math": np.linspace(2, 1, 7), "chat": np.linspace(1, 0, 7)}},
        heterogeneity=HeterogeneityConfig(request_logit_sd=0.8, token_logit_sd=0.8),
    )
    mixed = expected_tokens_per_round(spec, "dspark", {"math": 1, "chat": 3}, 7)
    parts = 0.25 * expected_tokens_per_round(spec, "dspark", "math", 7) + 0.75 * expected_tokens_per_round(
        spec, "dspark", "chat", 7
    )
    assert mixed == pytest.approx(parts, rel=1e-14)
    cond = expected_conditional_acceptance(spec, "dspark", {"math": 1, "chat": 3}, 7)
    surv = expected_survival(spec, "dspark", {"math": 1, "chat": 3}, 7)
    assert cond[2] == pytest.approx(surv[2] / surv[1])
    with pytest.raises(ValueError):
        expected_tokens_per_round(spec, "dspark", {"math": 0.0}, 7)


def test_pooled_tau_is_what_a_run_of_many_requests_measures():
    # Simulate requests that each generate N output tokens with gamma drafts verified per round, and pool
    # tokens / rounds over all of them (as Table 1 and the simulator do). Hard requests need more rounds, so
    # the pooled figure is the harmonic mean 1 / E[1 / tau(delta)], well below the per-round mean E[tau].
    het = HeterogeneityConfig(request_logit_sd=2.0, step_logit_sd=0.9, step_correlation=0.0, token_logit_sd=1.2)
    logits = np.array([2.0, 1.6, 1.3, 1.1])
    gamma, num_tokens, num_requests = len(logits), 400, 12000
    rng = np.random.default_rng(8)
    delta = het.request_logit_sd * rng.standard_normal(num_requests)
    tokens = np.zeros(num_requests)
    rounds = np.zeros(num_requests)
    active = np.ones(num_requests, bool)
    while active.any():
        n = int(active.sum())
        shift = delta[active] + het.step_logit_sd * rng.standard_normal(n)
        c = expit(logits + shift[:, None] + het.token_logit_sd * rng.standard_normal((n, gamma)))
        emitted = 1 + np.logical_and.accumulate(rng.random((n, gamma)) < c, axis=1).sum(axis=1)
        tokens[active] += emitted
        rounds[active] += 1
        active &= tokens < num_tokens
    measured = tokens.sum() / rounds.sum()
    # standard error of a ratio estimator over independent requests (delta method)
    resid = tokens - measured * rounds
    se = np.sqrt(np.sum(resid**2)) / rounds.sum()
    # each request overshoots N by at most gamma tokens, which reweights requests by at most gamma / N
    overshoot_bound = gamma / num_tokens * measured
    pooled = tokens_per_round_from_logits(logits, het, pooled=True)
    per_round = tokens_per_round_from_logits(logits, het)
    tolerance = 5 * se + overshoot_bound
    assert abs(measured - pooled) < tolerance
    assert per_round - measured > 3 * tolerance  # the per-round mean is not what a run measures


def test_pooled_equals_per_round_without_request_heterogeneity():
    het = HeterogeneityConfig(step_logit_sd=1.0, token_logit_sd=0.8)
    logits = np.array([1.5, 1.0, 0.5])
    assert tokens_per_round_from_logits(logits, het, pooled=True) == tokens_per_round_from_logits(logits, het)
    # a domain mix still pools: the harder domain contributes more rounds
    spec = AcceptanceSpec(base_logit={"dflash": {"a": np.full(3, 3.0), "b": np.full(3, -1.0)}}, heterogeneity=het)
    tau_a, tau_b = (expected_tokens_per_round(spec, "dflash", d, 3) for d in "ab")
    mixed = expected_tokens_per_round(spec, "dflash", {"a": 1, "b": 1}, 3, pooled=True)
    assert mixed == pytest.approx(2 / (1 / tau_a + 1 / tau_b), rel=1e-12)
