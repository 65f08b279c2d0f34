"""AUC and ECE against hand-computed values and the binormal closed form."""

import numpy as np
import pytest
from scipy.stats import norm

from simlab.acceptance.metrics import auc, ece


def test_auc_hand_example_without_ties():
    # positives 0.35, 0.8; negatives 0.1, 0.4: of 4 pairs the positive wins 3
    assert auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == pytest.approx(0.75, abs=1e-15)


def test_auc_counts_ties_as_half():
    # positives 0.5, 0.9; negatives 0.5, 0.2: wins 3 pairs and ties 1 -> 3.5 / 4
    assert auc([0.5, 0.5, 0.2, 0.9], [1, 0, 0, 1]) == pytest.approx(0.875, abs=1e-15)


def test_auc_equals_brute_force_pair_count():
    rng = np.random.default_rng(3)
    scores = rng.integers(0, 6, size=300).astype(float)  # many ties
    labels = rng.random(300) < 0.4
    pos, neg = scores[labels], scores[~labels]
    diff = pos[:, None] - neg[None, :]
    brute = ((diff > 0).sum() + 0.5 * (diff == 0).sum()) / diff.size
    assert auc(scores, labels) == pytest.approx(brute, abs=1e-12)


def test_auc_without_both_classes_is_none():
    assert auc([0.2, 0.3], [1, 1]) is None
    assert auc([0.2, 0.3], [0, 0]) is None


@pytest.mark.parametrize("separation", [0.5, 1.3])
def test_auc_matches_binormal_closed_form(separation):
    n_pos = n_neg = 20_000
    rng = np.random.default_rng(11)
    scores = np.concatenate([separation + rng.standard_normal(n_pos), rng.standard_normal(n_neg)])
    labels = np.concatenate([np.ones(n_pos, bool), np.zeros(n_neg, bool)])
    truth = norm.cdf(separation / np.sqrt(2.0))
    # Hanley & McNeil (1982) standard error of the Mann-Whitney AUC
    q1, q2 = truth / (2 - truth), 2 * truth**2 / (1 + truth)
    se = np.sqrt(
        (truth * (1 - truth) + (n_pos - 1) * (q1 - truth**2) + (n_neg - 1) * (q2 - truth**2)) / (n_pos * n_neg)
    )
    assert abs(auc(scores, labels) - truth) < 5 * se


def test_ece_hand_example():
    # 10 bins: [0.12, 0.15] in bin 1 (mean p 0.135, mean y 0.5), 0.82 in bin 8 (p 0.82, y 1),
    # [0.9, 1.0] in bin 9 (p 0.95, y 0.5): 0.4 * 0.365 + 0.2 * 0.18 + 0.4 * 0.45
    value = ece([0.12, 0.15, 0.82, 0.9, 1.0], [0, 1, 1, 1, 0], num_bins=10)
    assert value == pytest.approx(0.4 * 0.365 + 0.2 * 0.18 + 0.4 * 0.45, abs=1e-12)


def test_ece_of_a_perfect_bin_is_zero_and_batches_broadcast():
    probs = np.array([[0.25, 0.25, 0.25, 0.25], [0.9, 0.9, 0.9, 0.9]])
    outcomes = np.array([1, 0, 0, 0])
    assert ece(probs, outcomes, num_bins=15).tolist() == pytest.approx([0.0, 0.65], abs=1e-12)


def test_ece_of_calibrated_draws_is_within_sampling_noise():
    n, bins = 50_000, 15
    rng = np.random.default_rng(5)
    p = rng.random(n)
    y = rng.random(n) < p
    # each bin's gap is ~ N(0, var/n_b); E|gap| <= sqrt(mean var / n_b); sum of weights*that <= sqrt(bins * 0.25 / n)
    assert ece(p, y, bins) < 3 * np.sqrt(bins * 0.25 / n)
