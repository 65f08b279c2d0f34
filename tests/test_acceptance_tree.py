"""Draft trees (simlab/acceptance/tree.py): the tree built as EAGLE-2/3 build it, worked by hand; its expected
tokens per round against exact enumeration of the target's ranks and against seeded sampling; chains as the
topk-1 case; the calibration on published EAGLE-3 chains and trees, with its held-out errors as docs state them."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np
import pytest

from simlab.acceptance.tree import (accepted, build_tree, chain_tokens_per_round, max_tokens, rank_probs,
                                    static_tree, target_ranks)
from simlab.acceptance.tree_fit import CATCH, FITTED, HELD_OUT, calibrate

DOCS = Path(__file__).resolve().parents[1] / "docs" / "acceptance.md"


def test_a_small_dynamic_tree_worked_by_hand():
    """alpha = (0.8, 0.6), catch 0.5, topk 2, depth 2. Depth 1: (1) 0.8, (2) 0.2 x 0.5 = 0.1. Depth 2 expands both:
    ranks 1, 2 at depth 2 have 0.6 and 0.4 x 0.5 = 0.2, so (1,1) 0.48, (1,2) 0.16, (2,1) 0.06, (2,2) 0.02.
    Three draft tokens (num_draft_tokens 4) keep (1), (1,1), (1,2): 1 + 0.8 + 0.48 + 0.16 = 2.44 tokens per round."""
    tree = build_tree([0.8, 0.6], 0.5, topk=2, num_draft_tokens=4, depth=2)
    assert tree.num_nodes == 3
    assert tree.parent.tolist() == [0, 0, 1, 1] and tree.rank.tolist() == [0, 1, 1, 2]
    assert tree.path_prob.tolist() == pytest.approx([1.0, 0.8, 0.48, 0.16], abs=1e-15)
    assert tree.expected_tokens_per_round() == pytest.approx(2.44, abs=1e-15)
    five = build_tree([0.8, 0.6], 0.5, topk=2, num_draft_tokens=6, depth=2)  # (2) 0.1 and (2,1) 0.06 join
    assert five.expected_tokens_per_round() == pytest.approx(2.44 + 0.1 + 0.06, abs=1e-15)


def test_only_the_frontier_expands():
    """topk 1 at depth 1 keeps one frontier node: depth 2's candidates are its children only, however probable the
    root's second child would have made theirs (EAGLE's beam, not the best subtree)."""
    tree = build_tree([0.5, 0.99], 0.9, topk=1, num_draft_tokens=3, depth=2)
    assert tree.rank.tolist() == [0, 1, 1] and tree.depth.tolist() == [0, 1, 2]


@pytest.mark.parametrize("topk, num_draft_tokens, depth", [(2, 6, 3), (3, 8, 3), (2, 4, 4), (3, 10, 2)])
def test_expected_tokens_equal_exact_enumeration_of_the_ranks(topk, num_draft_tokens, depth):
    alpha = np.array([0.81, 0.7, 0.66, 0.6])[:depth]
    catch = 0.37
    tree = build_tree(alpha, catch, topk, num_draft_tokens, depth)
    outcomes = range(1, topk + 2)  # topk + 1: beyond every candidate
    probs = [np.append(q := rank_probs(a, catch, topk), 1.0 - q.sum()) for a in alpha]
    total = weight = 0.0
    for ranks in itertools.product(outcomes, repeat=depth):
        p = float(np.prod([probs[d][r - 1] for d, r in enumerate(ranks)]))
        total += p * (int(accepted(tree, np.array([ranks]))[0]) + 1)
        weight += p
    assert weight == pytest.approx(1.0, abs=1e-12)
    assert total == pytest.approx(tree.expected_tokens_per_round(), abs=1e-12)


def test_sampled_rounds_agree_with_the_expectation():
    alpha = np.array([0.78, 0.74, 0.7, 0.66, 0.62])
    tree = build_tree(alpha, 0.45, topk=4, num_draft_tokens=16, depth=5)
    rng = np.random.default_rng(20261202)
    num_rounds = 200_000
    ranks = target_ranks(rng.random((num_rounds, 5)), alpha, 0.45, 4)
    tokens = accepted(tree, ranks) + 1
    assert abs(tokens.mean() - tree.expected_tokens_per_round()) < 4 * tokens.std() / np.sqrt(num_rounds)


@pytest.mark.parametrize("depth", [1, 3, 7])
def test_a_topk_1_tree_is_the_chain(depth):
    alpha = np.linspace(0.8, 0.6, depth)
    tree = build_tree(alpha, 0.5, topk=1, num_draft_tokens=depth + 1, depth=depth)
    assert tree.rank.tolist() == [0] + [1] * depth
    assert tree.expected_tokens_per_round() == pytest.approx(chain_tokens_per_round(alpha)[-1], abs=1e-12)
    u = np.random.default_rng(1).random((1000, depth))
    chain_accepted = np.argmin(np.concatenate([u < alpha, np.zeros((1000, 1), bool)], axis=1), axis=1)
    assert (accepted(tree, target_ranks(u, alpha, 0.5, 1)) == chain_accepted).all()  # the chain's own draws


def test_a_tree_of_topk_4_and_16_tokens_verifies_16_and_accepts_more_than_its_chain():
    calibration = calibrate()
    alpha = calibration.alpha["eagle3"]
    tree = build_tree(alpha, calibration.catch, topk=4, num_draft_tokens=16, depth=4)
    assert tree.num_nodes + 1 == 16  # the draft tokens and the root's: what each request verifies per round
    chain = chain_tokens_per_round(alpha)[3]
    assert tree.expected_tokens_per_round() > chain + 0.5
    u = np.random.default_rng(7).random((50_000, 4))
    ranks = target_ranks(u, alpha[:4], calibration.catch, 4)
    chain_tree = build_tree(alpha, calibration.catch, topk=1, num_draft_tokens=5, depth=4)
    assert (accepted(tree, ranks) >= accepted(chain_tree, ranks)).all()  # the same draws: never fewer


def test_trees_that_cannot_hold_their_tokens_are_refused():
    assert max_tokens(4, 3) == 4 + 2 * 16
    with pytest.raises(ValueError, match="do not fit"):
        build_tree([0.8] * 3, 0.5, topk=4, num_draft_tokens=38, depth=3)
    with pytest.raises(ValueError, match="parent"):
        static_tree([(1,), (2, 1)], [0.8, 0.7], 0.5)


def test_the_calibration_and_its_held_out_errors_are_what_the_docs_say():
    calibration = calibrate()
    assert calibration.predict(FITTED) == pytest.approx(FITTED.tokens_per_round, abs=1e-9)
    assert np.abs(calibration.chain_residuals["eagle3"]).max() < 0.02  # chains of 2..7 drafts
    assert 0.0 < calibration.catch < 1.0
    assert calibration.catch == pytest.approx(CATCH, abs=1e-8)  # the stored constant the simulator reads
    doc = DOCS.read_text(encoding="utf-8")
    assert f"catch = {calibration.catch:.3f}" in doc
    for point in HELD_OUT:
        predicted = calibration.predict(point)
        row = re.search(rf"\| `{point.name}` \| ([0-9.]+) \| ([0-9.]+) \| ([+-][0-9.]+) % \|", doc)
        assert row, f"docs/acceptance.md has no row for {point.name}"
        assert float(row.group(1)) == point.tokens_per_round
        assert row.group(2) == f"{predicted:.2f}"
        assert row.group(3) == f"{(predicted / point.tokens_per_round - 1) * 100:+.1f}"
