"""Tree verification in the audit (simlab/audit/tree_rounds.py, docs/audit.md "Draft trees"): recursive rejection
sampling over a draft tree gives exactly the target's distribution, on the shipped file and on drawn chains;
without the residual update it does not; a tree of one child per node is the chain."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import run_cli
from simlab.audit import load_audit, run_audit, target_distribution, total_variation
from simlab.audit.enumeration import scheduler_distribution
from simlab.audit.problem import AuditProblem, ExactChain
from simlab.audit.tree_rounds import TreeRoundEnumerator, tree_distribution

REPO = Path(__file__).resolve().parents[1]
TREES = REPO / "scenarios" / "audit_trees.yaml"


def test_the_shipped_tree_audit_is_lossless_for_every_tree():
    result = run_audit(load_audit(TREES))
    trees = [v for v in result.verdicts if v.label.startswith("tree(")]
    assert [v.label for v in trees] == ["tree(2)", "tree(2x1)", "tree(3x2)", "tree(1x1x1)"]
    assert all(v.tv == 0 for v in trees)
    assert sum(trees[2].distribution.values()) == 1 and len(trees[2].distribution) == 27


def test_a_round_by_hand():
    """Two symbols, target (1/2, 1/2), draft (1, 0): the two roots are both A. The first is accepted with 1/2;
    rejected, the residual is (0, 1) and the second A has acceptance 0, then B is emitted from the residual. The
    round emits A then the bonus (A or B, 1/4 each) or B alone (1/2): the target's first token, exactly."""
    half = Fraction(1, 2)
    chain = ExactChain(start=(half, half), after=((half, half), (half, half)))
    draft = ExactChain(start=(Fraction(1), Fraction(0)), after=((Fraction(1), Fraction(0)),) * 2)
    branches = dict(TreeRoundEnumerator(chain, draft, (2,)).round(None, 0))
    assert branches == {(0, 0): Fraction(1, 4), (0, 1): Fraction(1, 4), (1,): half}


def _problem(target: ExactChain, draft: ExactChain, n: int, trees=()) -> AuditProblem:
    base = load_audit(TREES)
    return AuditProblem(vocab=base.vocab[:len(target.start)], gamma=2, num_output_tokens=n, target=target,
                        draft=draft, confidence=base.confidence, prior_confidence=base.prior_confidence, sps=base.sps,
                        schedulers=base.schedulers[:1], trees=tuple(trees))


def _rows(draw_weights, size):
    weights = [w + 1 for w in draw_weights]  # positive integers
    total = sum(weights)
    return tuple(Fraction(w, total) for w in weights)


chains = st.lists(st.integers(0, 6), min_size=2, max_size=2)


@settings(max_examples=25, deadline=None)
@given(st.lists(chains, min_size=3, max_size=3), st.lists(chains, min_size=3, max_size=3),
       st.sampled_from([(2,), (2, 1), (1, 2), (3,), (2, 2)]))
def test_any_tree_is_lossless_on_drawn_chains(target_rows, draft_rows, tree):
    target = ExactChain(start=_rows(target_rows[0], 2), after=(_rows(target_rows[1], 2), _rows(target_rows[2], 2)))
    draft = ExactChain(start=_rows(draft_rows[0], 2), after=(_rows(draft_rows[1], 2), _rows(draft_rows[2], 2)))
    problem = _problem(target, draft, 3)
    assert total_variation(tree_distribution(problem, tree), target_distribution(target, 3)) == 0


def test_without_the_residual_update_siblings_are_not_lossless():
    problem = load_audit(TREES)
    target = target_distribution(problem.target, problem.num_output_tokens)
    naive = tree_distribution(problem, (2,), residual=False)
    assert abs(sum(naive.values()) - 1) == 0
    assert total_variation(naive, target) > Fraction(1, 100)


def test_a_tree_of_single_children_is_the_chain():
    problem = load_audit(TREES)
    fixed = next(s for s in problem.schedulers if s.label == "fixed")
    assert tree_distribution(problem, (1, 1)) == scheduler_distribution(problem, fixed)  # gamma = 2 verified whole


def test_the_cli_reports_the_trees(tmp_path):
    out = tmp_path / "audit.json"
    code, stdout, stderr = run_cli("audit", str(TREES), "--out", str(out))
    assert code == 0, stderr
    assert "tree(3x2)" in stdout
    doc = json.loads(out.read_text())
    assert {k: v["tv"] for k, v in doc["schedulers"].items() if k.startswith("tree(")} == {
        "tree(2)": 0.0, "tree(2x1)": 0.0, "tree(3x2)": 0.0, "tree(1x1x1)": 0.0}


def test_a_tree_too_large_to_enumerate_is_refused(tmp_path):
    text = TREES.read_text().replace("  - [1, 1, 1]\n", "  - [4, 4, 4, 4, 4, 4]\n")
    text = text.replace("num_output_tokens: 3", "num_output_tokens: 8")
    path = tmp_path / "big.yaml"
    path.write_text(text)
    code, _, stderr = run_cli("audit", str(path))
    assert code == 2 and "trees[3]" in stderr
