"""What speculation costs at load, by hand-worked cases (issue 41): the experts a mixture of experts reads for
T verified tokens, the eager step above the largest CUDA-graph size, a 16-token tree at one user paying its draft
forwards and its verify, lookahead KV slots preempting earlier, and the curve a scheduler reads."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from helpers import simulate, write_scenario
from simlab.config.hardware import RooflineHardware
from simlab.engine.kv import KVPool
from simlab.engine.kv_growth import grow
from simlab.hardware.roofline import target_kernels
from simlab.hardware.roofline_build import build_roofline
from simlab.hardware.specs import get_model


def _roofline(**fields):
    return build_roofline(RooflineHardware(kind="roofline", gpu="h100-sxm", calibration="none", **fields))


def test_an_moe_verifying_t_tokens_reads_that_share_of_its_experts():
    """Qwen3-30B-A3B: 128 experts, 8 a token. T tokens read 1 - (1 - 8/128)^T of them: the step's memory term
    grows by exactly that share of the routed weights (plus the all-reduce and the sampling of the extra tokens),
    while the step stays memory-bound."""
    cost = _roofline(model="qwen3-30b-a3b", cuda_graph_buckets="none")
    model = get_model("qwen3-30b-a3b")
    k, experts = model.experts_per_token, model.num_experts
    assert (k, experts) == (8, 128)
    for t in (1, 4, 16, 64):
        assert cost.routed_share(t) == pytest.approx(1.0 - (1.0 - k / experts) ** t, rel=1e-12)
    one = cost.verify_s(1)
    for t in (4, 16):
        share = 1.0 - (1.0 - k / experts) ** t
        expected = (cost._routed_read_s * (share - k / experts) + (cost._ar_token_s + cost._sample_token_s) * (t - 1))
        assert cost.verify_s(t) - one == pytest.approx(expected, rel=1e-9)
    # a 16-token tree at one user reads 64 % of the experts where one token reads 6 %
    assert cost.routed_share(16) / cost.routed_share(1) == pytest.approx((1 - (120 / 128) ** 16) / (8 / 128))


def test_a_step_above_the_largest_cuda_graph_pays_the_eager_cost():
    """Graphs captured for 8 and 16 tokens, 50 us a kernel launched from the host outside them: 17 tokens cost at
    least every kernel's launch, 16 tokens run in their graph."""
    launch_s = 5e-5
    cost = _roofline(model="qwen3-8b", cuda_graph_buckets=[8, 16], host_launch_s=launch_s)
    floor = launch_s * target_kernels(get_model("qwen3-8b"))
    fixed = cost.params.step_overhead_s
    assert cost.verify_s(16) < floor  # the GPU time of 16 tokens is far below 328 launches
    assert cost.verify_s(17) == pytest.approx(floor + (cost._ar_token_s + cost._sample_token_s) * 17 + fixed, rel=1e-12)
    assert cost.verify_s(9) == cost.verify_s(16)  # padded to the graph of 16


def test_a_16_token_tree_at_one_user_pays_its_draft_forwards_and_its_verify(tmp_path):
    """One user, an EAGLE-3 tree of depth 3, topk 4 and 16 tokens: every decode-only step costs the tree's draft
    (the fusion, one forward over the root, two over the 4-wide frontier) plus one verify of 16 tokens."""
    data = {
        "name": "tree-one-user", "seed": 1,
        "workload": {"kind": "closed_loop", "concurrency": 1, "num_requests": 2,
                     "prompt_tokens": {"dist": "constant", "value": 300},
                     "output_tokens": {"dist": "constant", "value": 40}},
        "hardware": {"kind": "roofline", "gpu": "h100-sxm", "model": "qwen3-8b"},
        "engine": {"kv_cache_tokens": 100_000},
        "acceptance": {"kind": "preset", "name": "qwen3-8b"},
        "arms": [{"name": "tree", "method": "eagle3", "gamma": 3, "tree": {"topk": 4, "num_draft_tokens": 16}}],
    }
    outcome = simulate(write_scenario(tmp_path, data))["tree"]
    from simlab.config.loading import load_scenario
    from simlab.hardware import build_cost_model

    from simlab.runner import build

    cost = build_cost_model(load_scenario(tmp_path / "scenario.yaml").scenario.hardware, base_dir=tmp_path, file=None)
    # vLLM 0.34.0 (the newest, left out) keeps async scheduling with speculation: the round's host time runs under
    # the GPU's round (simlab.hardware.overlap), so the arm's drafts cost that much less than the scenario's model
    arm_cost = build(load_scenario(tmp_path / "scenario.yaml")).engines.arms[0].step_cost
    assert cost.tree_draft_s("eagle3", 3, 4, 1, 301.0) - arm_cost.tree_draft_s("eagle3", 3, 4, 1, 301.0) == \
        pytest.approx(cost.params.spec_round_overhead_s, rel=1e-9)
    decode = outcome.steps[(outcome.steps.num_requests == 1) & (outcome.steps.batch_tokens == 16)]
    assert len(decode) > 5
    assert (outcome.steps.verify_tokens[decode.index] == 15).all()  # the root is the anchor
    context = 300 + 1  # at the first decode step the request holds its prompt and its first token
    first = decode.iloc[0]
    expected = arm_cost.tree_draft_s("eagle3", 3, 4, 1, float(context)) + cost.verify_s(16, float(context), 1)
    assert first.step_s == pytest.approx(expected, rel=1e-9)
    forwards = cost.drafter._time(cost.drafter.eagle3_step, 1, 1, context) + 2 * cost.drafter._time(
        cost.drafter.eagle3_step, 4, 1, context)
    assert cost.tree_draft_s("eagle3", 3, 4, 1, context) > forwards  # the fusion and the host time on top


def test_lookahead_slots_preempt_earlier_under_paged_kv():
    """Blocks of 16 tokens, 7 free. A request holding 106 tokens needs ceil(106 / 16) = 7 blocks without
    speculation, but ceil((106 + 7) / 16) = 8 with 7 lookahead slots: only the speculative one is preempted."""
    for gamma, preempted in ((0, []), (7, [0])):
        kv = KVPool(7 * 16, 1, block_size=16)
        decode = SimpleNamespace(request_id=np.array([0]), context=np.array([106]), remaining=np.array([50]))
        gone = []
        grow(kv, decode, [], gamma, gone.append)
        assert gone == preempted, gamma
        if not preempted:
            assert kv.own[0] == 7
    kv = KVPool(7 * 16, 1, block_size=16)  # at 105 tokens the lookahead still fits: 112 = 7 blocks
    grow(kv, SimpleNamespace(request_id=np.array([0]), context=np.array([105]), remaining=np.array([50])), [], 7,
         lambda r: pytest.fail("preempted"))
    assert kv.own[0] == 7


# ------------------------------------------------------------------------------------- the curve a scheduler reads
def test_each_engine_hands_its_scheduler_its_own_view():
    from simlab.hardware.profiles import load_profile
    from simlab.hardware.sps_view import default_view, scheduler_view

    assert default_view(_roofline(model="qwen3-8b", stack="sglang")) == "smooth"
    assert default_view(_roofline(model="qwen3-8b", stack="vllm")) == "monotone"
    assert default_view(_roofline(model="qwen3-8b", stack="trtllm")) == "staircase"
    staircase = _roofline(model="qwen3-8b", stack="sglang")
    smooth = scheduler_view(staircase, None)
    plain = _roofline(model="qwen3-8b", stack="sglang", cuda_graph_buckets="none")
    batches = np.array([1, 3, 9, 13, 17, 100, 250, 300], dtype=float)
    assert np.array_equal(smooth.verify_s(batches, 4000.0, 8), plain.verify_s(batches, 4000.0, 8))
    vllm = _roofline(model="qwen3-8b", stack="vllm")
    assert vllm.crossover_tokens < 497  # compute-bound: padding to the graph of 512 costs
    assert scheduler_view(vllm, None).verify_s(497) < vllm.verify_s(497) == vllm.verify_s(512)
    assert scheduler_view(staircase, "staircase") is staircase
    table = load_profile("hw_profiles/h100-sxm_qwen3-8b.yaml")  # exported from vLLM's roofline
    assert default_view(table) == "monotone" and not scheduler_view(table, None).buckets.enabled


def test_a_monotone_view_forces_each_row_non_decreasing():
    from simlab.config.hardware import TableHardware
    from simlab.hardware.sps_view import scheduler_view
    from simlab.hardware.table import TableCostModel

    cfg = TableHardware(kind="table", verify={"batch_tokens": [1, 8, 16, 32], "step_s": [0.010, 0.012, 0.011, 0.02]},
                        cuda_graph_buckets=[1, 8, 16, 32])
    view = scheduler_view(TableCostModel(cfg), "monotone")
    assert [view.verify_s(b) for b in (1, 8, 16, 32)] == [0.010, 0.012, 0.012, 0.02]
    assert scheduler_view(TableCostModel(cfg), "smooth").verify_s(16) == 0.011


def _hw_arm(tmp_path, sps):
    data = {
        "name": "sps", "seed": 5,
        "workload": {"kind": "closed_loop", "concurrency": 48, "num_requests": 144,
                     "prompt_tokens": {"dist": "constant", "value": 500},
                     "output_tokens": {"dist": "constant", "value": 120}},
        "hardware": "h100-sxm_qwen3-8b",
        "engine": {"max_num_seqs": 64, "kv_cache_tokens": 400_000},
        "acceptance": {"kind": "preset", "name": "qwen3-8b"},
        "arms": [{"name": "hw", "method": "dspark", "gamma": 7,
                  "scheduler": {"kind": "hardware_aware", **({"sps": sps} if sps else {})}}],
    }
    return simulate(write_scenario(tmp_path, data, name=f"{sps}.yaml"))["hw"].metrics


def test_algorithm_1_on_the_staircase_collapses_and_on_its_engines_view_does_not(tmp_path):
    """The documented what-if: reading the staircase, Algorithm 1 stops at the first bucket edge (Θ drops there)
    and verifies almost nothing; reading vLLM's monotone view of the same steps it verifies several tokens."""
    staircase, own = _hw_arm(tmp_path, "staircase"), _hw_arm(tmp_path, None)
    assert staircase["spec_decode_acceptance_length"] < 1.3
    assert own["spec_decode_acceptance_length"] > 2.5
    assert own["output_throughput"] > 1.4 * staircase["output_throughput"]  # seeded: 3,015 against 2,061 tok/s


def test_a_smooth_view_keeps_a_tables_own_rows():
    from simlab.config.hardware import TableHardware
    from simlab.hardware.sps_view import scheduler_view
    from simlab.hardware.table import TableCostModel

    jagged = TableCostModel(TableHardware(kind="table", verify={"batch_tokens": [1, 8, 16],
                                                                 "step_s": [0.010, 0.012, 0.011]}))
    assert scheduler_view(jagged, "smooth") is jagged and scheduler_view(jagged, "staircase") is jagged
    assert scheduler_view(jagged, "monotone").verify_s(16) == 0.012


def test_vllm_captures_speculative_graphs_in_whole_requests():
    """vLLM rounds its capture sizes up to multiples of 1 + K and drops those above the largest: with K = 3 the
    graphs hold 4, 8, 16, 24, ... tokens."""
    from simlab.hardware.buckets import vllm_default_capture_sizes
    from simlab.hardware.graph_sizes import spec_decode_sizes

    sizes = vllm_default_capture_sizes()
    assert spec_decode_sizes(sizes, 4)[:4] == [4, 8, 16, 24]  # 1, 2, 4 -> 4; 8 -> 8; 16 -> 16
    rounded = spec_decode_sizes(sizes, 4)
    assert all(s % 4 == 0 and s <= 512 for s in rounded) and rounded[-1] == 512
    assert spec_decode_sizes(sizes, 3)[-1] == 498 and spec_decode_sizes([1, 2], 8) == []  # 512 -> 513 > 512
    assert spec_decode_sizes([1, 2, 4, 8], 3) == [3, 6]  # 9 is above the largest, 8


def _built(tmp_path, version, engine=None, *, stack="sglang", arm=("eagle3", 3), concurrency=2, **hardware):
    """The built scenario of Qwen3-8B on an H100 under ``stack`` ``version``: no speculation and ``arm`` (method,
    gamma) at a fixed draft length, ``concurrency`` users of 200/40 tokens, twice that many requests."""
    from simlab.config.loading import load_scenario
    from simlab.runner import build

    method, gamma = arm
    data = {
        "name": "spec-at-load", "seed": 2,
        "workload": {"kind": "closed_loop", "concurrency": concurrency, "num_requests": 2 * concurrency,
                     "prompt_tokens": {"dist": "constant", "value": 200},
                     "output_tokens": {"dist": "constant", "value": 40}},
        "hardware": {"kind": "roofline", "gpu": "h100-sxm", "model": "qwen3-8b", "stack": stack,
                     "stack_version": version, **hardware},
        "acceptance": {"kind": "iid", "alpha": 0.6},
        "arms": [{"name": "no-spec", "method": "none"},
                 {"name": method, "method": method, "gamma": gamma, "scheduler": {"kind": "fixed"}}],
        **({"engine": engine} if engine else {}),
    }
    return build(load_scenario(write_scenario(tmp_path, data)))


def test_a_spec_arm_on_vllm_pads_to_its_own_graphs(tmp_path):
    built = _built(tmp_path, "0.13.0", stack="vllm", arm=("mtp", 2), concurrency=3)
    plain, spec = (arm.step_cost for arm in built.engines.arms)
    assert plain is built.cost and spec.buckets.sizes[:3] == [3, 6, 9]
    # 7 tokens run the graph of 9 (three requests of 1 + 2), not vLLM's plain graph of 8; 9 its own, not 16's
    assert (spec.buckets.pad(7), spec.buckets.pad(9)) == (9, 9) and (plain.buckets.pad(7), plain.buckets.pad(9)) == (
        8,
        16,
    )
    assert spec.verify_s(9, 600.0, 3) < plain.verify_s(9, 600.0, 3)  # the padded tokens' elementwise work
    assert built.engines.arms[1].settings.describe()["cuda_graph_max_tokens"] == 498


def test_a_release_that_keeps_its_overlap_hides_the_rounds_host_time(tmp_path):
    """SGLang 0.5.3 turns its overlap scheduler off under speculation: a round pays the fitted host time
    (spec_round_overhead_s). 0.5.23 keeps it: the host work runs under the GPU's round, and Qwen3-8B's smallest
    round (4 tokens of one request, about 6 ms) covers all of it, so every draft is cheaper by exactly that."""
    off, on = _built(tmp_path, "0.5.3"), _built(tmp_path, "0.5.23")
    host = off.cost.params.spec_round_overhead_s
    assert host > 5e-4  # the fit's 0.9 ms
    for built, hidden in ((off, 0.0), (on, host)):
        described = built.engines.arms[1].settings.describe()
        assert described["overlap_schedule"] is (hidden > 0)
        assert (described["round_host_s"], described["round_host_hidden_s"]) == (host, hidden)
        assert "round_host_s" not in built.engines.arms[0].settings.describe()  # no speculation: no round
    cost_off, cost_on = off.engines.arms[1].step_cost, on.engines.arms[1].step_cost
    for requests in (1, 8, 64):
        assert cost_off.draft_s("eagle3", 3, requests, 1e4) - cost_on.draft_s("eagle3", 3, requests, 1e4) == \
            pytest.approx(host, rel=1e-9)
    assert on.engines.arms[0].step_cost is on.cost  # the plain arm is priced as before


def test_host_time_longer_than_the_smallest_round_stays_exposed_beyond_it(tmp_path):
    """A round whose host work (here set to 50 ms) outlasts the GPU's smallest round exposes the difference:
    max(GPU, host) = GPU + (host - GPU) at one request, no context."""
    from simlab.hardware.overlap import smallest_round_gpu_s

    built = _built(tmp_path, "0.5.23", spec_round_overhead_s=0.05)
    gpu = smallest_round_gpu_s(built.cost, 4)
    assert 0.003 < gpu < 0.02
    assert gpu == pytest.approx(built.cost.verify_s(4, 0.0, 1) - built.cost.params.step_overhead_s
                                - built.cost.params.request_overhead_s, rel=1e-12)
    described = built.engines.arms[1].settings.describe()
    assert described["round_host_hidden_s"] == pytest.approx(gpu, rel=1e-12)
    assert built.engines.arms[1].step_cost.params.spec_round_overhead_s == pytest.approx(0.05 - gpu, rel=1e-12)


def test_a_scenario_can_turn_the_overlap_scheduler_off_or_on(tmp_path):
    """engine.overlap_schedule overrides the release's (SGLang's --disable-overlap-schedule, vLLM's
    --async-scheduling): off on 0.5.23 exposes the round's host time again, on 0.5.3 hides it; METRICS says so."""
    off = _built(tmp_path, "0.5.23", engine={"overlap_schedule": False})
    on = _built(tmp_path, "0.5.3", engine={"overlap_schedule": True})
    host = off.cost.params.spec_round_overhead_s
    assert off.engines.arms[1].step_cost.params.spec_round_overhead_s == host
    assert on.engines.arms[1].step_cost.params.spec_round_overhead_s == 0.0
    for built, value in ((off, False), (on, True)):
        described = built.engines.arms[1].settings.describe()
        assert described["overlap_schedule"] is value and described["from"]["overlap_schedule"] == "scenario"
    default = _engine_dump({"max_num_seqs": 8})
    assert "overlap_schedule" not in default  # left out, a dump leaves it out (study points hash as before)
    assert _engine_dump({"overlap_schedule": True})["overlap_schedule"] is True


def _engine_dump(fields):
    from simlab.config.scenario import EngineConfig

    return EngineConfig(**fields).model_dump()
