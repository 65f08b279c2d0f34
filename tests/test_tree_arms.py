"""EAGLE-3 tree arms in the engine (``tree: {topk, num_draft_tokens}``, docs/acceptance.md section 8): the engine
against the reference stepper bit for bit; the tokens per round the tree model says; a tree of topk 4 and 16
tokens verifies 16 per request and accepts more than its chain on the same draws; bad input."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import simlab
from helpers import run_cli, write_scenario
from reference import run_reference
from simlab.runner import as_loaded, build
from test_reference_equivalence import CONTEXT_TABLE, ROOFLINE, differences, poisson, scenario, uniform

TREE = {"name": "eagle3-tree", "method": "eagle3", "gamma": 4, "tree": {"topk": 4, "num_draft_tokens": 16}}
CHAIN = {"name": "eagle3-chain", "method": "eagle3", "gamma": 4}
ARMS = [TREE, CHAIN, {"name": "no-spec", "method": "none"}]
ENGINE = {"max_num_seqs": 24, "max_batch_tokens": 2048, "prefill_chunk_tokens": 512, "kv_cache_tokens": 400_000}
# one domain, no heterogeneity: every round's acceptance probabilities are the curve's
FLAT_ACCEPTANCE = {"kind": "positional", "methods": {"eagle3": {"*": [0.78, 0.74, 0.7, 0.66]}}}

SCENARIOS = {
    "roofline-preset": scenario("tree", acceptance={"kind": "preset", "name": "qwen3-8b"}, arms=ARMS, engine=ENGINE),
    "table-short-outputs": scenario(
        "tree-table", hardware=CONTEXT_TABLE, acceptance={"kind": "preset", "name": "qwen3-8b"}, arms=ARMS,
        workload=poisson(60, output=uniform(1, 60)),
        engine={"max_num_seqs": 16, "max_batch_tokens": 512, "kv_cache_tokens": 400_000}),
    # paged KV: a tree's lookahead slots are its nodes, so a tight cache preempts (more than the chain)
    "paged-preempting": scenario(  # vLLM 0.11.0: every arm on the same CUDA graphs, so only the KV differs
        "tree-paged", acceptance={"kind": "preset", "name": "qwen3-8b"}, arms=ARMS,
        hardware={**ROOFLINE, "stack_version": "0.11.0"},
        workload=poisson(80, 20.0, output=uniform(50, 200)),
        engine={**ENGINE, "kv_policy": "paged", "block_size": 16, "kv_cache_tokens": 6000}),
    "catch-given": scenario("tree-catch", acceptance={"kind": "preset", "name": "qwen3-8b"}, engine=ENGINE,
                            arms=[{**TREE, "tree": {"topk": 2, "num_draft_tokens": 6, "catch": 0.8}}, CHAIN]),
    # 7 nodes over 7 drafted levels at topk 4: the tree is 6 deep, so a request may verify past its depth
    "shallower-than-gamma": scenario(
        "tree-shallow", acceptance={"kind": "preset", "name": "qwen3-8b"}, engine=ENGINE,
        arms=[{**TREE, "gamma": 7, "tree": {"topk": 4, "num_draft_tokens": 8}}, CHAIN]),
}


def test_a_tree_shallower_than_its_levels_is_verified_whole_beyond_its_depth():
    from simlab.acceptance.tree import TreeDraws, build_tree

    tree = build_tree(np.linspace(0.9, 0.5, 7), 0.5, topk=4, num_draft_tokens=8, depth=7)
    assert tree.max_depth == 6 and tree.num_nodes == 7
    within = TreeDraws(tree, 0.5, 4, depth=7).nodes_within()
    assert within.tolist() == [0, 1, 2, 4, 5, 6, 7, 7]  # depth 1 holds two nodes, 2..6 one each
    assert TreeDraws(tree, 0.5, 4).nodes_within().tolist() == [0, 1, 2, 4, 5, 6, 7]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_tree_arms_engine_equals_reference(name):
    data = SCENARIOS[name]
    result = simlab.run_scenario(data, plot=False)
    built = build(as_loaded(data))
    found = []
    for i, prepared in enumerate(built.arms):
        found += differences(result, run_reference(built=built, arm=i), prepared.arm.label)
    assert not found, "\n".join(found)
    if name == "paged-preempting":
        assert result.arms["eagle3-tree"]["num_preemptions"] > result.arms["eagle3-chain"]["num_preemptions"] > 0


def test_a_tree_of_topk_4_and_16_tokens_verifies_16_per_request():
    result = simlab.run_scenario(SCENARIOS["roofline-preset"], plot=False)
    steps = result.steps[(result.steps.arm == "eagle3-tree") & (result.steps.decode_requests > 0)]
    per_request = (steps.batch_tokens - steps.prefill_tokens) / steps.decode_requests
    assert per_request.max() == 16  # 15 draft tokens and each request's own
    assert (per_request == 16).mean() > 0.5
    tree, chain = result.arms["eagle3-tree"], result.arms["eagle3-chain"]
    assert tree["spec_decode_acceptance_length"] > chain["spec_decode_acceptance_length"] + 0.3
    assert tree["mean_drafted_tokens_per_step"] > 3 * chain["mean_drafted_tokens_per_step"]


def test_tokens_per_round_are_the_tree_models():
    """Without heterogeneity each depth's acceptance is the curve's: 1 + the per-depth rates (accepted at depth k
    over rounds that verified depth k, unbiased whatever truncates rounds near their ends) estimates the tree's
    expected tokens per round; the tolerance is 4 standard errors of that sum."""
    data = scenario("tree-flat", acceptance=FLAT_ACCEPTANCE, arms=[TREE], engine=ENGINE,
                    workload=poisson(150, output=uniform(100, 400)))
    data["workload"]["domains"] = {"chat": 1.0}
    result = simlab.run_scenario(data, plot=False)
    metrics = result.arms["eagle3-tree"]
    tree = build(as_loaded(data)).arms[0].policy.tree
    rates = np.array(metrics["spec_decode_per_position_acceptance_rates"], dtype=float)
    verified = np.array(metrics["spec_decode_num_verified_per_position"], dtype=float)
    stderr = np.sum(np.sqrt(rates * (1 - rates) / verified))
    assert abs(1 + rates.sum() - tree.tree.expected_tokens_per_round()) < 4 * stderr
    assert verified.min() > 5000


BAD = {
    "a tree on dspark": ({"method": "dspark", "gamma": 7, "tree": {"topk": 4, "num_draft_tokens": 16}},
                         "arms[0].tree"),
    "more draft tokens than the tree holds": ({**TREE, "gamma": 2, "tree": {"topk": 2, "num_draft_tokens": 8}},
                                              "arms[0].tree"),
    "a scheduler that trims the tree": ({**TREE, "scheduler": {"kind": "hardware_aware"}}, "arms[0].tree"),
    "no topk": ({**TREE, "tree": {"num_draft_tokens": 16}}, "arms[0].tree.topk"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_trees_are_exit_2_naming_the_field(tmp_path, case):
    arm, field = BAD[case]
    data = scenario("bad-tree", arms=[arm], engine=ENGINE)
    code, _, stderr = run_cli("run", str(write_scenario(tmp_path, data)), "--out", str(tmp_path / "out"))
    assert code == 2 and field in stderr and "Traceback" not in stderr, stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("engine, field", [
    ({**ENGINE, "max_num_seqs": 256}, "engine.max_batch_tokens"),  # 256 x 16 tokens > 2048
])
def test_engines_a_tree_arm_cannot_run_on(tmp_path, engine, field):
    data = scenario("bad-tree-engine", arms=[TREE], engine=engine, acceptance={"kind": "preset", "name": "qwen3-8b"})
    code, _, stderr = run_cli("run", str(write_scenario(tmp_path, data)))
    assert code == 2 and field in stderr, stderr


def test_real_mode_refuses_a_tree_arm():
    from simlab.common.errors import InputError
    from simlab.config.loading import scenario_from_data
    from simlab.real.validate.run import check_scenario

    data = copy.deepcopy(scenario("real-tree", arms=[TREE], engine=ENGINE))
    with pytest.raises(InputError) as err:
        check_scenario(scenario_from_data(data, file="real.yaml"), "eagle3")
    assert err.value.field == "arms[0].tree"


def test_a_tree_pays_at_one_user_and_not_at_a_full_batch():
    """The README's quickstart sentence: SGLang's example tree (topk 4, 16 tokens, depth 3) against EAGLE-3's chain
    of 5 on the quickstart's profile: faster for a lone user, slower with 64 users in the system."""
    arms = [{"name": "chain", "method": "eagle3", "gamma": 5},
            {"name": "tree", "method": "eagle3", "gamma": 3, "tree": {"topk": 4, "num_draft_tokens": 16}}]
    speeds = {}
    for users in (1, 64):
        data = {"name": f"tree-{users}", "seed": 3, "hardware": "h100-sxm_qwen3-8b",
                "acceptance": {"kind": "preset", "name": "qwen3-8b"}, "arms": arms,
                "engine": {"max_num_seqs": 128, "max_batch_tokens": 8192},
                "workload": {"kind": "closed_loop", "concurrency": users, "num_requests": max(40, 2 * users),
                             "prompt_tokens": {"dist": "constant", "value": 512},
                             "output_tokens": {"dist": "constant", "value": 400},
                             "domains": {"chat": 0.6, "code": 0.2, "math": 0.2}}}
        result = simlab.run_scenario(data, plot=False).arms
        speeds[users] = (result["tree"]["median_user_tok_s"], result["chain"]["median_user_tok_s"])
    assert speeds[1][0] > speeds[1][1] and speeds[64][0] < speeds[64][1], speeds
