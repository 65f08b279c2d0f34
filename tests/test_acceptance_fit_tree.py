"""``simlab acceptance fit --tree``: rounds drawn from the rank model with a known chain and catch are fitted back
within their standard errors, the written file drives a tree arm to the log's tokens per round, and bad input is
exit 2 naming the flag or the file."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from simlab.acceptance.fitting.tree_rounds import TreeShape, chain, fit_histograms, length_probs
from simlab.acceptance.tree import accepted, build_tree, target_ranks
from simlab.acceptance.tree_fit import calibrated_catch
from tests.helpers import run_cli

TRUE = np.array([0.8, 0.55, 0.6])  # alpha_1, alpha_inf, rho
SHAPE = TreeShape(topk=4, num_draft_tokens=16, depth=5)


def draw_rounds(num_rounds: int, seed: int, catch: float) -> np.ndarray:
    alpha = chain(TRUE, SHAPE.depth)
    tree = build_tree(alpha, catch, SHAPE.topk, SHAPE.num_draft_tokens, SHAPE.depth)
    u = np.random.default_rng(seed).random((num_rounds, SHAPE.depth))
    return accepted(tree, target_ranks(u, alpha, catch, SHAPE.topk))


def test_the_length_distribution_is_the_trees_path_probabilities():
    """Exactly one node per depth can be accepted: P(L >= j) sums the depth-j nodes' path probabilities, and a
    Monte-Carlo walk of the tree agrees within four standard errors per length."""
    alpha, catch = chain(TRUE, 5), 0.455
    probs = length_probs(alpha, catch, SHAPE)
    tree = build_tree(alpha, catch, 4, 16, 5)
    assert probs.sum() == pytest.approx(1.0, abs=1e-12)
    assert probs @ np.arange(6) + 1 == pytest.approx(tree.expected_tokens_per_round(), rel=1e-12)
    n = 40_000
    counts = np.bincount(draw_rounds(n, 1, catch), minlength=6) / n
    assert np.all(np.abs(counts - probs) <= 4 * np.sqrt(probs * (1 - probs) / n))


def test_a_known_chain_is_recovered_within_its_standard_errors():
    catch = calibrated_catch()
    histogram = np.bincount(draw_rounds(20_000, 7, catch), minlength=6).astype(float)
    fit = fit_histograms([histogram], [SHAPE], catch=catch)
    truth = chain(TRUE, 5)
    assert np.all(np.abs(fit.alpha - truth) <= 4 * fit.alpha_se + 1e-3), (fit.alpha, truth, fit.alpha_se)
    assert np.all(fit.alpha_se < 0.02)
    assert fit.fitted_tokens_per_round == pytest.approx(fit.measured_tokens_per_round, abs=0.01)


def test_the_command_writes_a_file_that_drives_a_tree_arm_to_the_logs_tokens_per_round(tmp_path):
    from simlab.runner import run_scenario

    catch = calibrated_catch()
    lengths = draw_rounds(4000, 3, catch)
    log = pd.DataFrame({"request": np.arange(len(lengths)) // 40, "domain": "chat",
                        "position": np.arange(len(lengths)) % 40, "accepted": lengths, "verified": 15})
    path = tmp_path / "rounds.csv"
    log.to_csv(path, index=False)
    out = tmp_path / "tree.yaml"
    code, stdout, stderr = run_cli("acceptance", "fit", str(path), "--format", "csv", "--method", "eagle3",
                                   "--tree", "4,16", "--gamma", "5", "--out", str(out))
    assert code == 0, stderr
    doc = yaml.safe_load(out.read_text())
    assert doc["kind"] == "positional" and len(doc["methods"]["eagle3"]["chat"]) == 5
    assert doc["provenance"]["tree"]["topk"] == 4 and "tree: {topk: 4" in doc["provenance"]["use"]
    measured = lengths.mean() + 1
    scenario = {"name": "t", "seed": 1,
                "workload": {"kind": "closed_loop", "concurrency": 4, "num_requests": 64,
                             "prompt_tokens": {"dist": "constant", "value": 64},
                             "output_tokens": {"dist": "constant", "value": 512}, "domains": {"chat": 1.0}},
                "hardware": {"kind": "roofline", "gpu": "h100-sxm", "model": "llama-3.1-8b"},
                "acceptance": str(out),
                "arms": [{"name": "tree", "method": "eagle3", "gamma": 5, "scheduler": {"kind": "fixed"},
                          "tree": {"topk": 4, "num_draft_tokens": 16, "catch": catch}}]}
    simulated = run_scenario(scenario, plot=False).arms["tree"]["spec_decode_acceptance_length"]
    # 64 requests x 512 tokens: about 8,000 rounds; the lengths' sd is about 1.3 tokens
    assert simulated == pytest.approx(measured, abs=4 * 1.35 / np.sqrt(4000) + 4 * 1.35 / np.sqrt(8000))


@pytest.mark.parametrize("args,needle", [
    (["--tree", "4x16", "--gamma", "5"], "--tree"),
    (["--tree", "4,16"], "--gamma"),
    (["--tree", "2,16", "--gamma", "3"], "15 draft tokens do not fit a tree of depth 3 and topk 2"),
    (["--tree", "4,16", "--gamma", "2"], "deeper than the tree"),
])
def test_bad_tree_input_is_exit_2_naming_it(tmp_path, args, needle):
    path = tmp_path / "rounds.csv"
    pd.DataFrame({"request": [0, 0, 1], "domain": "chat", "position": [0, 1, 0], "accepted": [3, 1, 0],
                  "verified": 15}).to_csv(path, index=False)
    code, _, stderr = run_cli("acceptance", "fit", str(path), "--format", "csv", "--method", "eagle3", *args,
                              "--out", str(tmp_path / "x.yaml"))
    assert code == 2 and needle in stderr and "Traceback" not in stderr
    assert not (tmp_path / "x.yaml").exists()
