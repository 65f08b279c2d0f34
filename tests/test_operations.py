"""A step is operations (simlab.hardware.operations) priced by curves fitted on measured kernels
(simlab.hardware.kernel_curves): closed forms of the operations' FLOPs and bytes, the curves' arithmetic, the shipped
curves against the database they were fitted on, and the step against the database's own step estimate."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from simlab.hardware.kernel_curves import curves_file, load_curves
from simlab.hardware.operations import decode_operations, price
from simlab.hardware.specs import GPUS, get_gpu, get_model

FIXTURES = Path(__file__).parent / "fixtures" / "models"


def _sum(ops, kind, what):
    return sum(op.count * getattr(op, what) for op in ops if op.kind == kind)


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_a_dense_decode_multiplies_every_active_weight_once_per_token_split_over_tp(tp):
    model = get_model("qwen3-8b")
    ops = decode_operations(model, num_requests=16, queries_per_request=3, context_per_request=1000.0,
                            tensor_parallel=tp)
    tokens = 48
    assert _sum(ops, "gemm", "flops") == pytest.approx(
        2.0 * tokens * (model.body_matmul_params + model.lm_head_params) / tp, rel=1e-12)
    # attention reads each request's KV once (the per-GPU share of its heads) and multiplies each query by it
    assert _sum(ops, "attention", "bytes") == pytest.approx(16 * 1000.0 * model.kv_bytes_per_token(8 // tp),
                                                            rel=1e-12)
    assert _sum(ops, "attention", "flops") == pytest.approx(
        tokens * 1000.0 * model.attention_flops_per_context_token / tp, rel=1e-12)
    assert (_sum(ops, "allreduce", "bytes") > 0) == (tp > 1)


def test_a_mixture_of_experts_reads_the_experts_its_tokens_select():
    from simlab.hardware.specs import expected_experts

    model = get_model("qwen3-30b-a3b")
    for tokens in (1, 8, 64, 512):
        ops = {op.name: op for op in decode_operations(model, num_requests=tokens, context_per_request=100.0)}
        touched = float(expected_experts(tokens, 128, 8))
        experts = ops["experts"]
        assert experts.kind == "moe"  # one fused kernel: gate-up, activation and down of every touched expert
        weights = touched * 3 * 768 * 2048 * 2  # every touched expert's weights, read once
        assert experts.bytes == pytest.approx(weights + 2 * tokens * 2048 * 9, rel=1e-12)
        assert experts.flops == pytest.approx(2 * tokens * 8 * 3 * 768 * 2048, rel=1e-12)
        assert experts.m == max(1, round(tokens * 8 / touched))  # tokens per touched expert


def test_each_kernel_between_the_gemms_is_its_own_operation_and_pays_the_floor():
    """Qwen3-8B (36 layers, q and k norms): two fused add + norms a layer and the final one, a q/k norm, a rotary and
    a cache write per attention layer, an activation per dense MLP; an MLA model norms its two latents and has no
    q/k norm; a MoE without shared experts has no activation outside its fused kernel."""
    def by_name(model, tokens=4, tp=1):
        return {op.name: op for op in decode_operations(model, num_requests=tokens, context_per_request=100.0,
                                                         tensor_parallel=tp) if op.kind == "elementwise"}

    dense = get_model("qwen3-8b")
    ops = by_name(dense)
    assert {name: op.count for name, op in ops.items()} == {
        "add_rmsnorm": 73, "qk_norm": 36, "rotary": 36, "kv_cache_write": 36, "activation": 36}
    assert ops["add_rmsnorm"].bytes == 2 * 4 * 4096 * 4  # reads x and the residual, writes both, for 4 tokens
    assert ops["kv_cache_write"].bytes == 2 * 4 * 8 * 128 * 4  # each token's K and V read and written
    assert ops["activation"].bytes == 2 * 3 * 12288 * 4
    assert by_name(dense, tp=2)["activation"].bytes == 2 * 3 * 12288 * 4 / 2
    curves = load_curves(GPUS["h100-sxm"])
    one = {op.name: op for op in decode_operations(dense, num_requests=1)}
    assert price([one["rotary"]], curves)["total"] == pytest.approx(
        36 * (curves.gemm_floor_s + one["rotary"].bytes / curves.hbm_bytes_per_s / curves.decode_efficiency))
    mla = by_name(get_model("deepseek-v3"))
    assert "qk_norm" not in mla and mla["latent_norms"].count == 2 * 61
    assert mla["activation"].count == 3 + 58  # three dense layers and the shared expert of each MoE layer
    assert "activation" not in by_name(get_model("qwen3-30b-a3b"))


def test_a_hybrid_models_states_are_read_per_request_and_written_per_query():
    from simlab.hardware.hf_config import read_config_file
    from simlab.hardware.model_description import roofline_shape

    path = FIXTURES / "qwen3.5-27b" / "config.json"
    model = roofline_shape(read_config_file(path), file=str(path), name="qwen3.5-27b")
    ops = decode_operations(model, num_requests=4, queries_per_request=5, context_per_request=2000.0,
                            tensor_parallel=2)
    assert _sum(ops, "state", "bytes") == pytest.approx(model.hybrid.state_bytes / 2 * (4 + 20), rel=1e-12)
    assert _sum(ops, "attention", "bytes") == pytest.approx(4 * 2000.0 * model.kv_bytes_per_token(2), rel=1e-12)
    # the linear layers' projections are GEMMs too: all matmul weights are multiplied once per token
    assert _sum(ops, "gemm", "flops") == pytest.approx(
        2.0 * 20 * (model.body_matmul_params + model.lm_head_params) / 2, rel=1e-9)


def test_the_curves_price_an_operation_as_floor_plus_ideal_over_efficiency():
    curves = load_curves(GPUS["h100-sxm"])
    data = yaml.safe_load(curves_file("h100-sxm").read_text())
    (op,) = [o for o in decode_operations(get_model("qwen3-8b"), num_requests=32, context_per_request=0.0)
             if o.name == "gate_up_proj"]
    ideal = max(op.bytes / 3.35e12, op.flops / 989e12)
    efficiency = np.interp(math.log2(32), data["gemm"]["log2_m"], data["gemm"]["efficiency"])
    assert curves.seconds(op) == pytest.approx(data["gemm"]["floor_s"] + ideal / efficiency, rel=1e-12)
    # a GPU without curves of its own takes its calibrated_like GPU's, on its own datasheet figures
    b300 = load_curves(GPUS["b300"])
    assert b300.source.endswith("b300.yaml") and load_curves(GPUS["mi300x"]).source.endswith("h100-sxm.yaml")
    assert load_curves(GPUS["mi300x"]).hbm_bytes_per_s == 5.3e12


def test_the_shipped_curves_are_what_the_database_gives():
    pytest.importorskip("aiconfigurator_core")
    from simlab.hardware import kernel_fit as script
    shipped = yaml.safe_load(curves_file("h100-sxm").read_text())
    gpu = get_gpu("h100-sxm")
    assert script.fit_gemm("h100_sxm", gpu.hbm_bytes_per_s, gpu.bf16_flop_per_s) == shipped["gemm"]
    assert script.fit_attention("h100_sxm", gpu.hbm_bytes_per_s, gpu.bf16_flop_per_s) == shipped["attention"]
    assert shipped["gemm"]["error_llm_shapes"]["median_abs_error"] < 0.06
    assert script.fit_moe("h100_sxm", gpu.hbm_bytes_per_s, gpu.bf16_flop_per_s) == shipped["moe"]
    assert script.fit_allreduce("h100_sxm") == shipped["allreduce"]
    assert script.fit_alltoall("h100_sxm") == shipped["alltoall"]
    for stack, kernel in (("sglang", "sglang_fused_moe_triton"), ("trtllm", "moe_torch_flow_cutlass")):
        own = script.fit_moe("h100_sxm", gpu.hbm_bytes_per_s, gpu.bf16_flop_per_s, "bf16", stack)
        assert own == shipped["moe_by_stack"][stack]["bf16"] and own["kernel"] == kernel
    assert shipped["alltoall"]["source"].endswith("0.5.12")  # the newest release's one-node rows, not 0.5.6's


def test_the_operations_step_follows_the_databases_own_step_estimate():
    """Qwen3-8B on one H100 (vLLM 0.24.0's kernels): the sum of the operations, each priced by the fitted curves,
    against aiconfigurator's step estimator over the same database, at 1-128 requests of 1,125 tokens of context
    (measured: +6 % at 1, -1 % at 32, +5 % at 128; docs/operations.md)."""
    pytest.importorskip("aiconfigurator_core")
    import logging

    from aiconfigurator_core.sdk.engine import EngineHandle

    logging.disable(logging.WARNING)
    try:
        engine = EngineHandle.compile("Qwen/Qwen3-8B", "h100_sxm", "vllm", backend_version="0.24.0", tp_size=1)
    finally:
        logging.disable(logging.NOTSET)
    curves, model = load_curves(GPUS["h100-sxm"]), get_model("qwen3-8b")
    for batch in (1, 32, 128):
        ops = price(decode_operations(model, num_requests=batch, context_per_request=1125.0), curves)["total"]
        assert ops * 1e3 == pytest.approx(engine.decode_step_latency(batch, 1125, 2), rel=0.12)


def test_fp8_gemms_read_one_byte_a_weight_and_take_their_own_curve():
    model = get_model("qwen3-8b")
    bf16 = decode_operations(model, num_requests=4, context_per_request=500.0)
    fp8 = decode_operations(model, num_requests=4, context_per_request=500.0, precision="fp8")
    by_name = {op.name: op for op in fp8}
    up = by_name["gate_up_proj"]
    assert up.dtype == "fp8" and up.bytes == 2 * 12288 * 4096 + 4 * 4096 + 2 * 4 * 2 * 12288
    assert by_name["lm_head"].dtype == "bf16"  # vLLM's fp8 leaves the LM head in bf16
    curves = load_curves(GPUS["h100-sxm"])
    assert price(fp8, curves)["total"] < price(bf16, curves)["total"]
    with pytest.raises(ValueError, match="no fp8 GEMM curve"):
        load_curves(GPUS["a100-80g"]).seconds(up)
    with pytest.raises(ValueError, match="bf16 and fp8"):
        decode_operations(model, num_requests=1, precision="fp4")


def test_an_fp8_kv_cache_halves_what_attention_reads_and_doubles_the_tokens_that_fit():
    """``kv_precision: fp8``: decode attention reads one byte a K or V element (its FLOPs unchanged), the cache
    write stores one, and the KV cache holds twice the tokens (the roofline's capacity at that precision)."""
    from simlab.config.hardware import OperationsHardware
    from simlab.hardware import build_cost_model

    model = get_model("qwen3-8b")

    def by_name(kv, m=model):
        return {op.name: op for op in decode_operations(m, num_requests=4, context_per_request=1000.0,
                                                         kv_precision=kv)}
    bf16, fp8 = by_name("bf16"), by_name("fp8")
    assert fp8["attention"].bytes == bf16["attention"].bytes / 2 == 4 * 1000 * 2 * 8 * 128  # a layer's
    assert fp8["attention"].flops == bf16["attention"].flops
    assert fp8["kv_cache_write"].bytes == 4 * (2 + 1) * 2 * 8 * 128  # reads bf16 K and V, writes fp8
    curves = load_curves(GPUS["h100-sxm"])  # the database's fp8 KV decode attention rows have their own curve
    floor, efficiency = curves.decode_fp8_kv
    assert fp8["attention"].dtype == "fp8" and efficiency < curves.decode_efficiency
    assert curves.seconds(fp8["attention"]) == pytest.approx(
        floor + fp8["attention"].bytes / curves.hbm_bytes_per_s / efficiency, rel=1e-12)
    assert curves.seconds(fp8["attention"]) < curves.seconds(bf16["attention"])
    mla = get_model("deepseek-v3")
    assert by_name("fp8", mla)["mla_attention"].bytes == by_name("bf16", mla)["mla_attention"].bytes / 2
    with pytest.raises(ValueError, match="KV cache"):
        decode_operations(model, num_requests=1, kv_precision="fp4")
    costs = {kv: build_cost_model(OperationsHardware(kind="operations", gpu="h100-sxm", model="qwen3-8b",
                                                     kv_precision=kv), base_dir=Path("."), file=None)
             for kv in ("bf16", "fp8")}
    assert costs["fp8"].kv_cache_tokens() == pytest.approx(2 * costs["bf16"].kv_cache_tokens(), rel=0.01)
    assert costs["fp8"].verify_s(64, 64 * 8000.0) < costs["bf16"].verify_s(64, 64 * 8000.0)
    # no context: only the fp8 kernel's own floor and the cache write's bytes differ
    assert costs["fp8"].verify_s(1, 0.0) == pytest.approx(costs["bf16"].verify_s(1, 0.0), rel=0.02)


def test_expert_parallelism_reads_whole_experts_on_the_busiest_gpu_and_moves_tokens_by_all_to_all():
    """DeepSeek-V3 on 8 GPUs. E = T = 8: whole experts on each GPU of the tensor-parallel group (the busiest reads
    its share of the experts the step's tokens select, and runs k / E of their copies), two all-reduces a layer.
    T = 1, E = 8: eight data-parallel attention groups; the busiest holds ceil(R / 8) requests, the experts see all
    R, one all-reduce-free step with a dispatch and a combine in every MoE layer."""
    from simlab.hardware.moe_layout import MoeLayout, dispatch_bytes_per_copy

    model = get_model("deepseek-v3")
    h, width, k, n = model.hidden_size, model.moe_intermediate_size, model.experts_per_token, model.num_experts
    for requests in (1, 13, 256):
        whole = {o.name: o for o in decode_operations(model, num_requests=requests, context_per_request=1000.0,
                                                      tensor_parallel=8, expert_parallel=8, precision="fp8")}
        share = MoeLayout.of(model, 8, 8).routed_share(float(requests))
        touched = share * n / 8
        assert whole["experts"].bytes == pytest.approx(touched * 3 * h * width + 2 * 2 * h * requests * k / 8,
                                                       rel=1e-12)
        assert whole["experts"].flops == pytest.approx(2 * requests * k / 8 * 3 * h * width, rel=1e-12)
        assert whole["allreduce"].count == 2 * model.num_layers and "dispatch" not in whole

        groups = {o.name: o for o in decode_operations(model, num_requests=requests, context_per_request=1000.0,
                                                       tensor_parallel=1, expert_parallel=8, precision="fp8")}
        busiest = math.ceil(requests / 8)
        alone = {o.name: o for o in decode_operations(model, num_requests=busiest, context_per_request=1000.0,
                                                      precision="fp8")}
        assert groups["mla_attention"].bytes == alone["mla_attention"].bytes  # the busiest group's requests
        assert groups["q_a_proj"].m == busiest
        assert groups["experts"].bytes == pytest.approx(whole["experts"].bytes, rel=1e-12)  # the replica's tokens
        assert "allreduce" not in groups
        assert groups["dispatch"].count == groups["combine"].count == model.num_moe_layers
        assert groups["dispatch"].bytes == pytest.approx(busiest * k * dispatch_bytes_per_copy(h, "fp8"), rel=1e-12)
        assert groups["combine"].bytes == pytest.approx(busiest * k * 2 * h, rel=1e-12)
    # priced by DeepEP's fitted kernels where the database measured them, else the roofline's default
    op = groups["combine"]
    fit = yaml.safe_load(curves_file("h200").read_text())["alltoall"]["combine"]
    assert load_curves(GPUS["h200"]).seconds(op) == pytest.approx(fit["floor_s"] + op.bytes / fit["bytes_per_s"])
    l40s = load_curves(GPUS["l40s"])
    assert not l40s.alltoall
    assert l40s.seconds(op) == pytest.approx(4.165e-05 + op.bytes / (0.42 * l40s.link_bytes_per_s))


def test_a_stacks_table_prices_its_experts_on_the_stacks_own_moe_kernel():
    """SGLang's and TensorRT-LLM's tables read their own default fused MoE kernel's curve (the database's rows of
    that backend), vLLM's its own; a dense model's steps do not depend on it."""
    from simlab.hardware.operations import _moe_operations

    model = get_model("qwen3-235b-a22b")
    (experts,) = [op for op in _moe_operations(model, 16, 8) if op.name == "experts"]
    data = yaml.safe_load(curves_file("h200").read_text())
    for stack, fit in (("vllm", data["moe"]), ("sglang", data["moe_by_stack"]["sglang"]["bf16"]),
                       ("trtllm", data["moe_by_stack"]["trtllm"]["bf16"])):
        curves = load_curves(GPUS["h200"], 8, stack)
        ideal = max(experts.bytes / curves.hbm_bytes_per_s, experts.flops / curves.bf16_flop_per_s)
        efficiency = np.interp(math.log2(experts.m), fit["log2_tokens_per_expert"], fit["efficiency"])
        assert curves.seconds(experts) == pytest.approx(fit["floor_s"] + ideal / efficiency, rel=1e-12)
        assert curves.moe_kernels["bf16"] == fit["kernel"]
    dense = decode_operations(get_model("qwen3-8b"), num_requests=8, context_per_request=100.0)
    assert price(dense, load_curves(GPUS["h200"], 1, "sglang")) == price(dense, load_curves(GPUS["h200"], 1))
    # SGLang's server arguments run fp8 experts on FlashInfer's TensorRT-LLM MoE on Blackwell, bf16 on Triton
    blackwell = load_curves(GPUS["b200"], 8, "sglang").moe_kernels
    assert blackwell == {"bf16": "sglang_fused_moe_triton", "fp8": "sglang_flashinfer_trtllm_moe"}


def test_kernels_database_prices_gemms_from_the_databases_own_rows():
    """``kernels: database``: a GEMM the database sampled takes its measured latency; one between its samples the
    interpolation of their logarithms; one outside them (the 152k-wide LM head) and every other kernel the curves. A
    GPU the database does not hold is exit 2 naming the field."""
    pytest.importorskip("aiconfigurator_core")
    from simlab.common.errors import InputError
    from simlab.config.hardware import OperationsHardware
    from simlab.hardware.kernel_database import gemm_grids, with_database_gemms
    from simlab.hardware.kernel_fit import _database
    from simlab.hardware.operations import gemm
    from simlab.hardware.operations_table import build_operations

    curves = load_curves(GPUS["h100-sxm"])
    database, source = with_database_gemms(curves, "h100-sxm")
    assert source == gemm_grids("h100_sxm")["source"]
    frame, _ = _database("h100_sxm", "gemm", "gemm_perf.parquet")
    rows = frame[(frame.gemm_dtype == "bfloat16") & (frame.m == 64) & (frame.n == 4096) & (frame.k == 12288)]
    assert database.seconds(gemm("down_proj", 64, 4096, 12288, 1)) == pytest.approx(rows.latency.median() * 1e-3,
                                                                                  rel=1e-9)
    between = database.seconds(gemm("x", 64, 4096, 11000, 1))
    assert database.seconds(gemm("x", 64, 4096, 10240, 1)) < between < database.seconds(gemm("x", 64, 4096, 12288, 1))
    head = gemm("lm_head", 8, 151936, 4096, 1)
    assert database.seconds(head) == curves.seconds(head)
    model = get_model("qwen3-8b")
    (attention,) = [op for op in decode_operations(model, num_requests=8, context_per_request=900.0)
                    if op.name == "attention"]
    assert database.seconds(attention) == curves.seconds(attention)
    cost = build_operations(OperationsHardware(kind="operations", gpu="h100-sxm", model="qwen3-8b",
                                               kernels="database"))
    assert "aiconfigurator-core's rows" in cost.describe()["provenance"]["priced_by"]["gemm"]
    with pytest.raises(InputError) as err:
        build_operations(OperationsHardware(kind="operations", gpu="mi300x", model="qwen3-8b", kernels="database"))
    assert err.value.field == "hardware.kernels"
