"""A prefill chunk priced as part of the forward it joins (a table's ``prefill`` curve and pairs;
``kind: operations`` builds them from the model's operations)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from simlab.config.hardware import OperationsHardware, TableHardware
from simlab.hardware import build_cost_model
from simlab.hardware.kernel_curves import load_curves
from simlab.hardware.operations import forward_token_operations, prefill_operations, prefill_pair_s, price
from simlab.hardware.specs import GPUS, get_model
from simlab.hardware.table import TableCostModel

FIXTURES = Path(__file__).parent / "fixtures" / "models"


def _table(**prefill) -> TableCostModel:
    return TableCostModel(TableHardware(kind="table", verify={"batch_tokens": [1, 1024], "step_s": [0.01, 0.03]},
                                        prefill=prefill))


def test_a_chunk_adds_what_its_tokens_add_to_the_forward_it_joins_and_its_attention_pairs():
    cost = _table(batch_tokens=[1, 100, 1000], step_s=[0.001, 0.002, 0.011], attention_pair_s=1e-9)
    # 10 decode tokens: the forward at 10 (0.001 + 9/99 x 0.001) grows to 110 tokens (0.002 + 10/900 x 0.009)
    decode = 0.01 + 0.02 * 9 / 1023
    expected = decode + (0.002 + 0.009 * 10 / 900) - (0.001 + 0.001 * 9 / 99) + 1e-9 * 5000.0
    assert cost.step_s(10, 0.0, 10, 100, 5000.0) == pytest.approx(expected, rel=1e-12)
    # a pure prefill step is the forward at the chunk's tokens (with the curve's constant part), plus its pairs
    assert cost.step_s(0, 0.0, 0, 100, 5000.0) == pytest.approx(0.002 + 5e-6, rel=1e-12)
    # beyond the last point the forward keeps growing along the last segment
    assert cost.step_s(0, 0.0, 0, 1900, 0.0) == pytest.approx(0.011 + 0.009, rel=1e-12)
    assert cost.prefill_s(100) == pytest.approx(0.002 + 1e-9 * 100 * 100 / 2, rel=1e-12)


def test_window_layers_see_at_most_their_window_of_pairs():
    cost = _table(batch_tokens=[1, 10000], step_s=[0.0, 0.0], attention_pair_s=2e-9, window_pair_s=1e-9,
                  window_tokens=128)
    pairs = 512 * (4000 + 256)  # a 512-token chunk after 4,000 tokens: its window layers see 512 x 128 pairs
    assert cost.step_s(0, 0.0, 0, 512, pairs) == pytest.approx(2e-9 * pairs + 1e-9 * 512 * 128, rel=1e-12)


def test_a_per_token_prefill_is_unchanged_and_bad_curves_are_refused():
    assert _table(per_token_s=1e-5).step_s(8, 0.0, 8, 100, 1e6) == pytest.approx(0.01 + 0.02 * 7 / 1023 + 1e-3)
    for bad, match in (({"batch_tokens": [1, 2]}, "go together"),
                       ({"batch_tokens": [1, 2], "step_s": [0.1]}, "2 points"),
                       ({"batch_tokens": [2, 1], "step_s": [0.1, 0.2]}, "strictly increasing"),
                       ({"batch_tokens": [1, 2], "step_s": [0.1, 0.2], "per_token_s": 1e-5}, "not both"),
                       ({"window_pair_s": 1e-9}, "window_tokens")):
        with pytest.raises(ValidationError, match=match):
            _table(**bad)


@pytest.mark.parametrize("tp", [1, 2])
def test_a_forwards_token_operations_multiply_the_body_weights_once_per_token(tp):
    model = get_model("qwen3-8b")
    ops = forward_token_operations(model, tokens=300, tensor_parallel=tp)
    assert sum(op.count * op.flops for op in ops if op.kind == "gemm") == pytest.approx(
        2.0 * 300 * model.body_matmul_params / tp, rel=1e-12)
    assert not any(op.kind in ("attention", "sampler") or op.name == "lm_head" for op in ops)
    curves = load_curves(GPUS["h100-sxm"])
    pair_s, window_s = prefill_pair_s(model, curves, tp)
    assert window_s == 0.0
    assert pair_s == pytest.approx(model.num_kv_layers * 4 * model.num_heads / tp * model.head_dim
                                   / curves.bf16_flop_per_s / curves.prefill_efficiency, rel=1e-12)


def test_a_hybrid_prompt_reads_and_writes_each_state_once_not_once_a_token():
    from simlab.hardware.hf_config import read_config_file
    from simlab.hardware.model_description import roofline_shape

    path = FIXTURES / "qwen3.5-27b" / "config.json"
    model = roofline_shape(read_config_file(path), file=str(path), name="qwen3.5-27b")
    (state,) = [op for op in prefill_operations(model, prompt_tokens=2048) if op.kind == "state"]
    assert state.count * state.bytes == pytest.approx(2.0 * model.hybrid.state_bytes, rel=1e-12)
    assert state.count * state.flops == pytest.approx(2048 * model.hybrid.state_flops_per_token, rel=1e-12)


def test_kind_operations_prices_a_chunk_in_its_step_and_the_kv_left_by_its_precision(tmp_path):
    def cost_of(precision):
        return build_cost_model(OperationsHardware(kind="operations", gpu="h100-sxm", model="qwen3-32b",
                                                   precision=precision), base_dir=tmp_path, file=None)

    bf16, fp8 = cost_of("bf16"), cost_of("fp8")
    assert fp8.kv_cache_tokens() > 3 * bf16.kv_cache_tokens()  # 32 GB of weights fewer leave 4x the KV
    model, curves = get_model("qwen3-32b"), load_curves(GPUS["h100-sxm"])
    forward = price(forward_token_operations(model, tokens=2048), curves)["total"]
    pair_s, _ = prefill_pair_s(model, curves)
    # a pure 2,048-token chunk from context 0 at a grid point: the forward, its pairs, the engine's step time
    step = bf16.config.provenance["engine_overhead"]["step_overhead_s"]
    assert bf16.prefill_s(2048) == pytest.approx(forward + pair_s * 2048 * 1024 + step, rel=1e-9)
    # joining 64 decode tokens costs less than running the chunk on its own: the weights are read once
    assert bf16.step_s(64, 64 * 1000.0, 64, 2048, 2048 * 1024) < (bf16.verify_s(64, 64 * 1000.0, 64)
                                                                   + bf16.prefill_s(2048))


def test_routed_experts_take_the_fused_moe_curve_and_all_reduces_their_tp_sizes_fit():
    import math

    import numpy as np
    import yaml

    from simlab.hardware.kernel_curves import curves_file
    from simlab.hardware.operations import decode_operations

    shipped = yaml.safe_load(curves_file("h100-sxm").read_text())
    curves = load_curves(GPUS["h100-sxm"], tensor_parallel=8)
    ops = {op.name: op for op in decode_operations(get_model("qwen3-30b-a3b"), num_requests=64,
                                                   context_per_request=500.0, tensor_parallel=8)}
    experts, allreduce = ops["experts"], ops["allreduce"]
    fit = shipped["moe"]
    ideal = max(experts.bytes / 3.35e12, experts.flops / 989e12)
    efficiency = np.interp(math.log2(experts.m), fit["log2_tokens_per_expert"], fit["efficiency"])
    assert curves.seconds(experts) == pytest.approx(fit["floor_s"] + ideal / efficiency, rel=1e-12)
    ring = shipped["allreduce"][8]
    assert curves.seconds(allreduce) == pytest.approx(ring["floor_s"] + allreduce.bytes / ring["bytes_per_s"],
                                                      rel=1e-12)
    # a run's provenance says which operations measured kernels price, and where they fall back
    from simlab.hardware.kernel_curves import measured_families

    assert measured_families(curves)["all-reduce"] == curves.source
    assert measured_families(curves)["fused MoE"] == f"{curves.source} ({fit['kernel']})"  # the kernel fitted on
    assert measured_families(load_curves(GPUS["a100-80g"]))["fused MoE"].startswith("grouped GEMM")
    assert "no all-reduce rows for TP 16" in measured_families(load_curves(GPUS["h100-sxm"], 16))["all-reduce"]
    cost = build_cost_model(OperationsHardware(kind="operations", gpu="h100-sxm", model="qwen3-30b-a3b",
                                               tensor_parallel=2), base_dir=Path("."), file=None)
    assert cost.describe()["provenance"]["priced_by"]["fused MoE"] == f"{curves.source} ({fit['kernel']})"
    # a GPU whose database rows hold no fused-MoE kernel simlab reads prices the experts as one grouped GEMM
    a100 = load_curves(GPUS["a100-80g"], tensor_parallel=8)
    assert not a100.moe and a100.seconds(experts) == pytest.approx(
        a100.gemm_floor_s + a100.ideal_s(experts) / np.interp(math.log2(experts.m), a100.gemm_log2_m,
                                                               a100.gemm_efficiency), rel=1e-12)


def test_mla_decodes_in_the_latent_and_reads_each_requests_latent_once():
    model = get_model("deepseek-v3")
    tp, requests, context = 8, 16, 2000.0
    ops = decode_operations_of(model, requests, context, tp)
    latent = model.kv_lora_rank + model.qk_rope_head_dim
    (attention,) = [op for op in ops if op.kind == "attention"]
    assert attention.count == 61 and attention.bytes == pytest.approx(latent * 2 * requests * context, rel=1e-12)
    assert attention.flops == pytest.approx(2 * 128 / tp * (2 * 512 + 64) * requests * context, rel=1e-12)
    by_name = {op.name: op for op in ops}
    # the absorbed up-projections: each of the GPU's heads maps its 128 nope dims into the 512-dim latent and back
    assert by_name["w_uk_absorb"].flops == pytest.approx(2 * requests * 16 * 512 * 128, rel=1e-12)
    assert by_name["w_uv_absorb"].flops == pytest.approx(2 * requests * 16 * 128 * 512, rel=1e-12)
    assert by_name["kv_a_proj"].flops == pytest.approx(2 * requests * latent * 7168, rel=1e-12)  # replicated
    # a prefill's pairs are multi-head attention on the up-projected keys and values (192 qk dims, 128 v dims)
    curves = load_curves(GPUS["h200"], tensor_parallel=tp)
    pair_s, _ = prefill_pair_s(model, curves, tp)
    assert pair_s == pytest.approx(61 * 2 * 16 * (128 + 64 + 128) / curves.bf16_flop_per_s
                                   / curves.prefill_efficiency, rel=1e-12)


def decode_operations_of(model, requests, context, tp):
    from simlab.hardware.operations import decode_operations

    return decode_operations(model, num_requests=requests, context_per_request=context, tensor_parallel=tp,
                             precision="fp8")


def test_each_stacks_engine_time_is_what_its_runs_leave_unexplained():
    """The shipped per-stack engine time is what simlab.calibration.engine_time fits on the stacks' runs (within
    the float noise of a replay), and each stack's own is used."""
    import yaml

    from simlab.calibration.engine_time import fit
    from simlab.hardware.operations_table import ENGINE_TIME_FILE, engine_time

    shipped = yaml.safe_load(ENGINE_TIME_FILE.read_text())["stacks"]
    refit = fit()
    assert set(refit) == set(shipped) == {"vllm", "sglang", "trtllm"}
    for stack, entry in refit.items():
        assert entry["fitted_on"] == shipped[stack]["fitted_on"]
        for key in ("step_overhead_s", "request_overhead_s"):
            assert entry[key] == pytest.approx(shipped[stack][key], rel=1e-3, abs=1e-7)
    assert max(abs(r) for r in shipped["vllm"]["residual_ms"]) < 0.1  # 4 runs at 1-8 users, two parameters
    assert engine_time("eager") == engine_time("vllm")
    sglang = build_cost_model(OperationsHardware(kind="operations", gpu="h100-sxm", model="qwen3-8b", stack="sglang"),
                              base_dir=Path("."), file=None)
    vllm = build_cost_model(OperationsHardware(kind="operations", gpu="h100-sxm", model="qwen3-8b"),
                            base_dir=Path("."), file=None)
    gap = shipped["vllm"]["step_overhead_s"] - shipped["sglang"]["step_overhead_s"]
    assert vllm.verify_s(8, 8000.0, 8) - sglang.verify_s(8, 8000.0, 8) == pytest.approx(gap, rel=1e-9)
    assert sglang.describe()["provenance"]["engine_overhead"]["from"]["stack"] == "sglang"


def test_a_drafter_on_kind_operations_takes_its_kv_from_the_target_as_on_the_roofline():
    from simlab.config.hardware import RooflineHardware

    ops = build_cost_model(OperationsHardware(kind="operations", gpu="h100-sxm", model="qwen3-8b"),
                           base_dir=Path("."), file=None)
    roofline = build_cost_model(RooflineHardware(kind="roofline", gpu="h100-sxm", model="qwen3-8b"),
                                base_dir=Path("."), file=None)
    for method in ("eagle3", "dspark", "none"):
        assert ops.draft_kv_bytes_per_token(method) == roofline.draft_kv_bytes_per_token(method)
    assert ops.draft_kv_bytes_per_token("eagle3") == 2 * 8 * 128 * 2  # one layer's K and V a token


def test_a_linear_tail_reads_the_same_point_by_point_and_as_an_array():
    import numpy as np

    from simlab.hardware.curves import LinearTail

    tail = LinearTail([1, 100, 1000], [0.001, 0.002, 0.011])
    xs = np.array([0.5, 1.0, 50.0, 100.0, 550.0, 1000.0, 1900.0, 5000.0])
    assert tail(xs) == pytest.approx([tail.at(float(x)) for x in xs], rel=1e-12)
    assert tail.at(1900.0) == pytest.approx(0.02, rel=1e-12) and tail.at(0.5) == 0.001
