"""Expert parallelism and data-parallel attention in the roofline (simlab.hardware.moe_layout): the busiest GPU's
experts against a Monte-Carlo count of uniform routing, the layout's weights, KV and all-to-all worked by hand,
the stack's MoE latency once per MoE layer, per-GPU metrics over every GPU, and the errors."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import yaml

from simlab.common.errors import InputError
from simlab.config.hardware import RooflineHardware
from simlab.hardware.moe_layout import AllToAll, MoeLayout, dispatch_bytes_per_copy
from simlab.hardware.roofline_build import build_roofline
from simlab.hardware.specs import expected_experts, get_gpu, get_model

APPROXIMATION = 0.01  # the busiest-GPU closed form's stated bias against uniform routing (docs/hardware.md)


def roofline(model="deepseek-v3", gpu="h200", **fields):
    base = {"kind": "roofline", "gpu": gpu, "model": model, "calibration": "none", "cuda_graph_buckets": "none"}
    if model == "deepseek-v3":
        base.update(precision="fp8", tensor_parallel=8)
    return build_roofline(RooflineHardware(**{**base, **fields}))


@pytest.mark.parametrize("experts,k,ep", [(256, 8, 8), (128, 8, 4)])
def test_the_busiest_gpus_experts_match_a_count_of_uniform_routing(experts, k, ep):
    """Each of B tokens picks k distinct experts uniformly; the GPU holding the most touched experts reads
    them. 4,000 seeded draws per batch; the tolerance is four standard errors plus the stated bias."""
    rng = np.random.default_rng(18)
    layout = MoeLayout(1, ep, experts, k)
    local = experts // ep
    for tokens in (1, 4, 16, 64):
        draws = 4000
        picks = np.argsort(rng.random((draws, tokens, experts)), axis=2)[:, :, :k]
        touched = np.zeros((draws, experts), dtype=bool)
        np.put_along_axis(touched, picks.reshape(draws, -1), True, axis=1)
        busiest = touched.reshape(draws, ep, local).sum(axis=2).max(axis=1) / local
        standard_error = busiest.std(ddof=1) / np.sqrt(draws)
        share = layout.routed_share(tokens)
        assert abs(share - busiest.mean()) <= 4 * standard_error + APPROXIMATION * share, tokens


def test_the_share_is_exact_at_its_limits():
    tp = MoeLayout(8, 1, 256, 8)  # experts split across the group: the expected distinct experts, exactly
    assert tp.routed_share(5) == expected_experts(5, 256, 8) / 256
    ep = MoeLayout(8, 8, 256, 8)
    assert ep.routed_share(0) == 0.0 and ep.routed_share(10_000) == 1.0
    b = np.arange(0, 600, dtype=float)
    shares = ep.routed_share(b)
    assert np.all(np.diff(shares) >= 0) and shares[-1] == 1.0
    assert ep.routed_share(7.0) == pytest.approx(float(shares[7]), rel=1e-15)  # scalar = array path
    # one token's 8 experts land on several of the 8 GPUs: the busiest reads more than the 1/8 it would split
    assert ep.routed_share(1) * 32 > 2.0 > 8 / 8


def test_expert_parallelism_divides_the_expert_weights_and_keeps_the_rest_per_group():
    model = get_model("deepseek-v3")
    tp8, ep8 = roofline(), roofline(tensor_parallel=1, expert_parallel=8)
    routed = model.routed_expert_params * 1.0  # FP8: one byte each
    assert ep8.weight_bytes_per_gpu == pytest.approx((ep8.weight_bytes - routed) / 1 + routed / 8, rel=1e-15)
    assert tp8.weight_bytes_per_gpu == tp8.weight_bytes / 8
    assert (ep8.groups, ep8.num_gpus, ep8.describe()["num_gpus"]) == (8, 8, 8)
    # eight attention groups, each holding its own requests' KV in the memory its GPU has left
    per_gpu = int(ep8._kv_budget_bytes() // ep8.kv_bytes_per_token) // 16 * 16
    assert ep8.kv_cache_tokens() == 8 * per_gpu
    # within the tensor-parallel group (E = T), whole experts: the same bytes once every expert is touched
    within = roofline(expert_parallel=8)
    assert within.groups == 1 and within.weight_bytes_per_gpu == pytest.approx(tp8.weight_bytes_per_gpu, rel=1e-12)
    assert within.verify_s(2048, 0.0, 2048) == pytest.approx(tp8.verify_s(2048, 0.0, 2048), rel=1e-12)
    assert within.verify_s(1) > tp8.verify_s(1)  # one token: the busiest GPU holds more of its experts


def test_data_parallel_attention_adds_the_all_to_all_once_per_moe_layer():
    model = get_model("deepseek-v3")
    a2a = AllToAll.build(MoeLayout(1, 8, 256, 8), model, "fp8", 450e9, 40e-6, 0.5)
    dispatch = 7168 + 7168 / 128 * 4 + 16  # DeepEP's FP8 copy: data, one fp32 scale per 128 channels, metadata
    assert dispatch_bytes_per_copy(7168, "fp8") == dispatch == 7408
    assert a2a.latency_s == 2 * 40e-6
    assert a2a.s_per_token == pytest.approx(8 * 7 / 8 * (7408 + 2 * 7168) / (450e9 * 0.5), rel=1e-15)
    slow = roofline(tensor_parallel=1, expert_parallel=8, alltoall_latency_s=1e-4)
    fast = roofline(tensor_parallel=1, expert_parallel=8, alltoall_latency_s=0.0)
    for users in (1, 8, 64):
        gap = slow.verify_s(users, 1000.0 * users, users) - fast.verify_s(users, 1000.0 * users, users)
        assert gap == pytest.approx(model.num_moe_layers * 2 * 1e-4, rel=1e-9)
    # the tensor-parallel layout all-reduces instead: no all-to-all
    assert roofline(alltoall_latency_s=1e-4).verify_s(8) == roofline(alltoall_latency_s=0.0).verify_s(8)


def test_each_attention_group_runs_its_own_requests():
    """Eight groups: a GPU attends an eighth of the requests' context, where tensor parallelism 8 reads the whole
    replicated MLA latent on every GPU; at 256 users of 8,000 tokens the data-parallel layout is far faster."""
    tp8, dp8 = roofline(), roofline(tensor_parallel=1, expert_parallel=8)
    # memory-bound: 8,000 more tokens of context on each of 64 users cost a GPU an eighth of them
    extra = dp8.verify_s(64, 64 * 9000.0, 64) - dp8.verify_s(64, 64 * 1000.0, 64)
    assert extra == pytest.approx(64 * 8000.0 / 8 * dp8._mem_per_context_s, rel=1e-9)
    assert tp8.verify_s(64, 64 * 9000.0, 64) - tp8.verify_s(64, 64 * 1000.0, 64) == pytest.approx(8 * extra, rel=1e-9)
    context = 256 * 8000.0
    assert dp8.verify_s(256, context, 256) < 0.75 * tp8.verify_s(256, context, 256)
    assert dp8.verify_s(1) > tp8.verify_s(1)  # one user: one GPU reads all the attention weights
    # the array path (the engine's plans) agrees with the scalar one
    b = np.array([1.0, 7.0, 64.0, 300.0])
    assert np.allclose(dp8.verify_s(b, b * 900.0, b), [dp8.verify_s(x, x * 900.0, x) for x in b], rtol=1e-12)


def test_the_stacks_moe_latency_is_paid_once_per_moe_layer_not_per_token():
    model = get_model("qwen3-30b-a3b")
    with_latency = roofline("qwen3-30b-a3b", "h100-sxm", moe_layer_overhead_s=5e-5)
    without = roofline("qwen3-30b-a3b", "h100-sxm", moe_layer_overhead_s=0.0)
    for tokens in (1, 16, 256):
        assert with_latency.verify_s(tokens) - without.verify_s(tokens) == pytest.approx(
            model.num_moe_layers * 5e-5, rel=1e-9)
    dense = roofline("qwen3-8b", "h100-sxm", moe_layer_overhead_s=5e-5)
    assert dense.verify_s(8) == roofline("qwen3-8b", "h100-sxm").verify_s(8)
    # DeepSeek's MTP layer is one MoE layer: one latency per drafter forward
    mtp = roofline(moe_layer_overhead_s=5e-5).draft_s("mtp", 3, 4) - roofline().draft_s("mtp", 3, 4)
    assert mtp == pytest.approx(3 * 5e-5, rel=1e-9)


def test_the_calibrated_moe_latency_is_the_stacks_fit():
    from simlab.hardware.calibration import fitted_values, load_fitted

    fit = load_fitted()["moe"]
    assert fit["sglang"]["fitted_on"] and fit["trtllm"]["borrowed"] == "sglang"
    cm = build_roofline(RooflineHardware(kind="roofline", gpu="h200", model="deepseek-v3", precision="fp8",
                                         tensor_parallel=8, stack="sglang"))
    assert cm.params.moe_hidden_overhead_s == fit["sglang"]["moe_hidden_overhead_s"] > 0
    assert cm.params.moe_layer_overhead_s == 0.0  # the form the fit no longer uses
    assert fitted_values("h100-sxm", "vllm")["moe_hidden_overhead_s"] == fit["vllm"]["moe_hidden_overhead_s"]


def test_the_moe_latency_grows_with_the_hidden_size_not_with_tensor_parallelism():
    """Per MoE layer: moe_hidden_overhead_s x hidden / 1,024 (Qwen3-30B-A3B: hidden 2,048, 48 MoE layers), the
    same at TP2 and TP4, added to moe_layer_overhead_s."""
    model = get_model("qwen3-30b-a3b")
    assert model.hidden_size == 2048 and model.num_moe_layers == 48
    for tp in (2, 4):
        with_latency = roofline("qwen3-30b-a3b", "h100-sxm", tensor_parallel=tp, moe_hidden_overhead_s=1e-5)
        without = roofline("qwen3-30b-a3b", "h100-sxm", tensor_parallel=tp)
        for tokens in (1, 16):
            assert with_latency.verify_s(tokens) - without.verify_s(tokens) == pytest.approx(48 * 2 * 1e-5, rel=1e-9)
    both = roofline("qwen3-30b-a3b", "h100-sxm", moe_hidden_overhead_s=1e-5, moe_layer_overhead_s=3e-6)
    assert both.verify_s(1) - roofline("qwen3-30b-a3b", "h100-sxm").verify_s(1) == pytest.approx(48 * 23e-6, rel=1e-9)
    # DeepSeek's MTP layer (hidden 7,168) pays one layer's: 7 x the per-1,024 time per drafter forward
    mtp = roofline(moe_hidden_overhead_s=1e-5).draft_s("mtp", 3, 4) - roofline().draft_s("mtp", 3, 4)
    assert mtp == pytest.approx(3 * 7 * 1e-5, rel=1e-9)


@pytest.mark.parametrize("fields,needle", [
    ({"model": "qwen3-8b", "expert_parallel": 8}, "qwen3-8b is dense"),
    ({"model": "qwen3-30b-a3b", "expert_parallel": 256}, "above qwen3-30b-a3b's 128 experts"),
    ({"model": "qwen3-30b-a3b", "expert_parallel": 16}, "beyond one 8-GPU NVLink node"),
    ({"model": "qwen3-30b-a3b", "expert_parallel": 6}, "does not divide qwen3-30b-a3b's 128 experts"),
    ({"model": "qwen3-30b-a3b", "tensor_parallel": 4, "expert_parallel": 2}, "not a multiple of tensor_parallel 4"),
])
def test_a_bad_expert_parallel_names_the_field(fields, needle):
    with pytest.raises(InputError) as err:
        build_roofline(RooflineHardware(**{"kind": "roofline", "gpu": "h100-sxm", **fields}), file="s.yaml")
    assert err.value.field == "hardware.expert_parallel" and needle in str(err.value)
    assert "expert_parallel 1" in str(err.value) or "is dense" in str(err.value)


def test_the_command_line_rejects_expert_parallelism_on_a_dense_model(tmp_path):
    scenario = {"name": "bad", "workload": {"kind": "closed_loop", "concurrency": 2, "num_requests": 4,
                                             "prompt_tokens": {"dist": "constant", "value": 64},
                                             "output_tokens": {"dist": "constant", "value": 16}},
                "hardware": {"kind": "roofline", "gpu": "h100-sxm", "model": "qwen3-8b", "expert_parallel": 2},
                "acceptance": {"kind": "iid", "alpha": 0.5}, "arms": [{"name": "a", "method": "none"}]}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(scenario))
    run = subprocess.run([sys.executable, "-m", "simlab", "run", str(path), "--out", str(tmp_path / "out")],
                         capture_output=True, text=True)
    assert run.returncode == 2 and "hardware.expert_parallel" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "out").exists()


def test_per_gpu_metrics_count_every_gpu_of_the_layout():
    from simlab.runner import run_scenario

    scenario = {"name": "ep", "workload": {"kind": "closed_loop", "concurrency": 16, "num_requests": 32,
                                            "prompt_tokens": {"dist": "constant", "value": 256},
                                            "output_tokens": {"dist": "constant", "value": 32}},
                "hardware": {"kind": "roofline", "gpu": "h200", "model": "deepseek-v3", "precision": "fp8",
                             "tensor_parallel": 1, "expert_parallel": 8},
                "acceptance": {"kind": "iid", "alpha": 0.7},
                "arms": [{"name": "no-spec", "method": "none"}, {"name": "mtp", "method": "mtp", "gamma": 1}]}
    arms = run_scenario(scenario, plot=False).arms
    assert arms["no-spec"]["num_gpus"] == 8
    assert arms["no-spec"]["output_throughput_per_gpu"] == pytest.approx(arms["no-spec"]["output_throughput"] / 8)
    assert arms["mtp"]["output_throughput"] > 0


def test_a_mixed_steps_prefill_is_spread_over_the_attention_groups():
    """Each attention group prefills its own requests within its share of the token budget: a prefill of 8,192
    tokens costs eight groups about what it costs tensor parallelism 8, not eight times as much."""
    tp8, dp8 = roofline(), roofline(tensor_parallel=1, expert_parallel=8)
    tokens = 8192
    assert 0.5 < dp8.prefill_s(tokens) / tp8.prefill_s(tokens) < 1.5
    assert dp8.step_s(64, 64_000.0, 64, tokens, tokens * tokens / 2) > dp8.verify_s(64, 64_000.0, 64)


def test_mla_prefill_attention_runs_as_multi_head_attention():
    model = get_model("deepseek-v3")
    assert model.attention_flops_per_pair == 2 * 128 * (2 * 512 + 64)  # decode, in the latent
    assert model.prefill_attention_flops_per_pair == 2 * 128 * (128 + 64 + 128)  # prefill, on up-projected K/V
    dense = get_model("qwen3-8b")
    assert dense.prefill_attention_flops_per_pair == dense.attention_flops_per_pair
    cm = roofline()  # calibration none: the prefill's attention FLOPs over the GPU's FLOP rate
    pairs = 4096.0 * 2048.0
    gap = cm.step_s(0, 0.0, 0, 4096, 2 * pairs) - cm.step_s(0, 0.0, 0, 4096, pairs)
    expected = pairs * model.num_layers * model.prefill_attention_flops_per_pair / 8 / (
        get_gpu("h200").bf16_flop_per_s * cm.params.flop_efficiency) / cm.params.prefill_efficiency
    assert gap == pytest.approx(expected, rel=1e-9)


def test_an_exported_expert_parallel_table_still_counts_every_gpu():
    from simlab.config.hardware import TableHardware
    from simlab.hardware.export import table_dict
    from simlab.hardware.gpus import gpus_per_replica
    from simlab.hardware.table import TableCostModel

    cm = roofline(tensor_parallel=1, expert_parallel=8)
    data = table_dict(cm, generator="test")
    assert data["provenance"]["source"]["num_gpus"] == 8
    table = TableCostModel(TableHardware.model_validate({k: v for k, v in data.items() if k != "name"}))
    assert gpus_per_replica(table.describe()) == 8
