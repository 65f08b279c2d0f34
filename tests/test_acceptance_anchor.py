"""Anchoring the fitted curves to the outcomes (simlab/acceptance/fitting/anchor.py), and the per-position head bias
it writes: the engine draws it exactly, and a log drawn with such a head is fitted back within its standard
errors, where the joint fit alone misses the measured rates."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import logit

from simlab.acceptance import build_acceptance
from simlab.acceptance.draws import ArmDraws
from simlab.acceptance.expected import measured_conditional_from_logits
from simlab.acceptance.fitting.anchor import full_runs
from simlab.acceptance.fitting.fit import fit_log
from simlab.acceptance.logs.parsed import AcceptanceLog, Rounds
from simlab.acceptance.synthetic import simulate_rounds
from simlab.config.acceptance import ConfidenceConfig, HeterogeneityConfig, PositionalAcceptance

CURVE = [0.8, 0.75, 0.7, 0.66, 0.62]
HETEROGENEITY = {"request_logit_sd": 0.5, "step_logit_sd": 0.7, "step_correlation": 0.5, "token_logit_sd": 0.7}
BIAS = [0.9, 0.4, 0.0, -0.4, -0.8]
Z = 4.0


def test_bias_per_position_shifts_each_position_of_the_head_exactly():
    base = np.log(np.array([[0.8, 0.7, 0.6, 0.5]]) / (1 - np.array([[0.8, 0.7, 0.6, 0.5]])))
    het = HeterogeneityConfig(**HETEROGENEITY)

    def head(bias):
        draws = ArmDraws(seed=3, gamma=4, base_logit=base, heterogeneity=het,
                         confidence=ConfidenceConfig(noise_logit_sd=0.5, bias_logit=bias), temperatures=None)
        ids = np.arange(6)
        conf, accepted, _ = draws.generate(ids, base[np.zeros(6, dtype=int)], np.zeros(6, dtype=int), np.zeros(6),
                                           np.full(6, 5))
        return logit(conf), accepted

    plain, accepted_plain = head(0.0)
    shifted, accepted_shifted = head([0.5, -0.25])  # positions past the list take its last value
    np.testing.assert_allclose(shifted - plain, np.broadcast_to([0.5, -0.25, -0.25, -0.25], plain.shape), atol=1e-9)
    np.testing.assert_array_equal(accepted_plain, accepted_shifted)  # the head does not change outcomes
    assert ConfidenceConfig(bias_logit=0.3).bias_at(3) == 0.3


def test_bias_list_is_validated():
    for bad in ([], [float("nan")], [0.1] * 17):
        with pytest.raises(ValueError):
            ConfidenceConfig(bias_logit=bad)


def _rounds(verified, sequence, drafted=5):
    n = len(verified)
    step = np.concatenate([np.arange(np.sum(sequence == s)) for s in np.unique(sequence)])
    return Rounds(np.full(n, "dspark", dtype=object), np.full(n, "chat", dtype=object), sequence,
                  sequence.astype(object), step, np.full(n, drafted), np.asarray(verified), np.zeros(n, dtype=int))


def test_full_runs_keep_runs_whose_verify_lengths_were_not_chosen():
    # run 0: all full; run 1: full, then capped by the tokens left (4, 2, 0); run 2: a short round mid-run (chosen);
    # run 3: a tail that rises again (chosen)
    verified = [5, 5, 5, 5, 5, 4, 2, 0, 5, 2, 5, 5, 3, 4]
    sequence = np.array([0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 3, 3, 3])
    keep = full_runs(_rounds(verified, sequence), {("dspark", "chat"): 5})
    assert keep.tolist() == [True] * 8 + [False] * 6
    # a group with fewer positions than were drafted: verifying all of its positions is full
    assert full_runs(_rounds([3, 3, 2], np.zeros(3, dtype=int), drafted=7), {("dspark", "chat"): 3}).all()


@pytest.fixture(scope="module")
def biased_head_fit():
    spec = build_acceptance(PositionalAcceptance.model_validate({
        "kind": "positional", "methods": {"dspark": {"chat": CURVE}}, "heterogeneity": HETEROGENEITY,
        "confidence": {"noise_logit_sd": 0.6, "bias_logit": BIAS}}), file=None)
    rounds = simulate_rounds(spec, "dspark", {"chat": 1.0}, 5, 80, 60, seed=4)
    return rounds, fit_log(AcceptanceLog.from_rounds("csv", ["x"], rounds))


def test_anchored_curves_recover_the_truth_and_the_measured_rates(biased_head_fit):
    rounds, fitted = biased_head_fit
    key = ("dspark", "chat")
    anchored, se = fitted.anchored.logits[key], fitted.anchored.logit_se[key]
    assert fitted.anchored.converged and fitted.anchored.num_runs == 80
    assert np.all(np.abs(anchored - logit(CURVE)) <= Z * se), (anchored, se)
    counts = rounds.counts()[key]
    binomial_se = np.sqrt(counts.rates * (1 - counts.rates) / counts.reached)
    het = HeterogeneityConfig(**{k: fitted.latent.shared[k] for k in HETEROGENEITY})
    miss = {name: (measured_conditional_from_logits(values, het, pooled=True) - counts.rates) / binomial_se
            for name, values in (("joint", fitted.latent.logits[key]), ("anchored", anchored))}
    assert np.all(np.abs(miss["anchored"]) <= Z), miss
    # the joint fit's single bias cannot follow this head: the confidences pull its curve off the outcomes
    assert np.abs(miss["joint"]).max() > Z, miss
    np.testing.assert_allclose(fitted.curves["dspark"]["chat"], np.round(1 / (1 + np.exp(-anchored)), 6))


def test_anchored_bias_follows_the_head_per_position(biased_head_fit):
    _, fitted = biased_head_fit
    se = fitted.anchored.logit_se[("dspark", "chat")]
    bias = np.array(fitted.confidence["bias_logit"])
    assert bias.shape == (5,)
    assert np.all(np.abs(bias - BIAS) <= Z * se), (bias, se)
