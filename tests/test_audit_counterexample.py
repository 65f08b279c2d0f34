"""The shipped Appendix A counterexample against the hand computation in docs/audit.md."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from simlab.audit import load_audit, run_audit, scheduler_distribution, target_distribution
from simlab.audit.decisions import VerifyLengthChooser
from simlab.audit.rounds import RoundEnumerator

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "audit_appendix_a.yaml"
A, B = 0, 1
HALF = Fraction(1, 2)


@pytest.fixture(scope="module")
def problem():
    return load_audit(SCENARIO)


@pytest.fixture(scope="module")
def verdicts(problem):
    return {v.label: v for v in run_audit(problem).verdicts}


def test_file_is_read_exactly(problem):
    assert problem.draft.start == (Fraction(4, 5), Fraction(1, 5))
    assert problem.target.after[A] == (HALF, HALF)
    assert problem.confidence.block((A, B)) == (0.9, 0.9)
    assert problem.confidence.block((B, A)) == (0.9, 0.0)
    assert target_distribution(problem.target, 1) == {(A,): HALF, (B,): HALF}


def _chooser(problem, label):
    audited = next(s for s in problem.schedulers if s.label == label)
    return VerifyLengthChooser(audited.scheduler, problem.gamma, problem.sps)


def test_early_stop_never_verifies_and_argmax_verifies_only_after_a(problem):
    early, argmax = _chooser(problem, "hardware_aware"), _chooser(problem, "retrospective")
    for x1 in (A, B):
        for x2 in (A, B):
            conf = problem.confidence.block((x1, x2))
            assert early(conf, None) == 0  # Theta(1) = 0.95 < Theta(0) = 1: stop
            assert argmax(conf, None) == (2 if x1 == A else 0)  # Theta(2) = 1.2195 only after x_1 = A


def test_one_verified_draft_branches(problem):
    rounds = RoundEnumerator(problem.target, problem.draft, problem.gamma)
    # x_1 = A is accepted with min(1, 0.5 / 0.8) = 5/8; on rejection the residual is all on B
    assert dict(rounds.verify(None, (A,))) == {
        (B,): Fraction(3, 8),
        (A, A): Fraction(5, 16),
        (A, B): Fraction(5, 16),
    }
    # x_1 = B (0.2 < 0.5) is always accepted
    assert dict(rounds.verify(None, (B,))) == {(B, A): HALF, (B, B): HALF}


@pytest.mark.parametrize("label", ["fixed", "threshold(threshold=0.5)", "hardware_aware", "async_topk(lag_steps=1)"])
def test_lossless_schedulers_are_exact(verdicts, label):
    verdict = verdicts[label]
    assert verdict.distribution == {(A,): HALF, (B,): HALF}
    assert verdict.tv == Fraction(0)
    assert verdict.lossless and verdict.registry_lossless


def test_retrospective_matches_hand_computation(verdicts):
    # P(A) = 0.8 * 5/8 (x_1 = A verified and accepted) + 0.2 * 0.5 (x_1 = B, l = 0, plain target sample) = 0.6
    verdict = verdicts["retrospective"]
    assert verdict.distribution == {(A,): Fraction(3, 5), (B,): Fraction(2, 5)}
    assert verdict.tv == Fraction(1, 10)
    assert not verdict.lossless and not verdict.registry_lossless


def test_total_probability_is_exactly_one(verdicts):
    for verdict in verdicts.values():
        assert sum(verdict.distribution.values(), Fraction(0)) == 1


@pytest.mark.parametrize("n", [2, 3])
def test_bias_persists_over_longer_outputs(problem, n):
    longer = type(problem)(**{**problem.__dict__, "num_output_tokens": n})
    target = target_distribution(longer.target, n)
    for audited in longer.schedulers:
        dist = scheduler_distribution(longer, audited)
        assert sum(dist.values(), Fraction(0)) == 1
        if audited.label == "retrospective":
            first_a = sum((p for seq, p in dist.items() if seq[0] == A), Fraction(0))
            assert first_a == Fraction(3, 5)
        else:
            assert dist == target
