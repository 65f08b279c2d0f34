"""Serving stacks and precision in the roofline: cases worked by hand, the stacks' data, and bad input."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from simlab.common.errors import InputError
from simlab.config.hardware import RooflineHardware
from simlab.hardware.precision import EXPERT_PRECISIONS, KV_BYTES, PRECISIONS, WEIGHT_BYTES, peak_flop_per_s
from simlab.hardware.roofline import RooflineCostModel, target_kernels
from simlab.hardware.roofline_build import build_roofline
from simlab.hardware.specs import get_gpu, get_model
from simlab.hardware.stacks import STACKS, sglang_default_capture_sizes, trtllm_default_capture_sizes


def plain(**fields) -> RooflineCostModel:
    return build_roofline(RooflineHardware(**{"kind": "roofline", "gpu": "h100-sxm", "model": "qwen3-8b",
                                              "calibration": "none", "cuda_graph_buckets": "none", **fields}))


# ------------------------------------------------------------------------------------------------ precision
def test_fp8_halves_the_weight_read_of_a_memory_bound_step():
    """One token at no context is memory-bound: the step reads the decoder layers' matmul weights (1 byte each
    in FP8, 2 in bf16) plus the bf16 rest (embedding-free: norms and the LM head)."""
    model = get_model("qwen3-8b")
    bf16, fp8 = plain(), plain(precision="fp8")
    body, rest = model.body_matmul_params, model.read_params - model.body_matmul_params
    assert bf16.weight_read_bytes == 2 * body + 2 * rest
    assert fp8.weight_read_bytes == 1 * body + 2 * rest
    bandwidth = get_gpu("h100-sxm").hbm_bytes_per_s * bf16.params.bw_efficiency
    overhead = bf16.params.step_overhead_s + model.vocab_size * 16 / bandwidth  # and the one position's sampling
    # the decoder layers' read halves, the LM head's does not
    assert bf16.verify_s(1) - overhead == pytest.approx((2 * body + 2 * rest) / bandwidth, rel=1e-12)
    assert fp8.verify_s(1) - overhead == pytest.approx((body + 2 * rest) / bandwidth, rel=1e-12)
    saved = (bf16.verify_s(1) - overhead) - (fp8.verify_s(1) - overhead)
    assert saved == pytest.approx(body / bandwidth, rel=1e-9)  # half the 2-byte body read


def test_fp8_kv_cache_halves_attentions_kv_read():
    bf16, fp8 = plain(), plain(kv_precision="fp8")
    assert bf16.kv_bytes_per_token == 2 * 36 * 8 * 128 * 2 == 147_456
    assert fp8.kv_bytes_per_token == 147_456 / 2
    context = 1_000_000.0  # memory-bound at one token: the step grows by context x KV bytes / bandwidth
    grow_bf16 = bf16.verify_s(1, context) - bf16.verify_s(1, 0.0)
    grow_fp8 = fp8.verify_s(1, context) - fp8.verify_s(1, 0.0)
    assert grow_fp8 == pytest.approx(grow_bf16 / 2, rel=1e-9)
    assert fp8.kv_cache_tokens() == pytest.approx(2 * bf16.kv_cache_tokens(), abs=16)  # twice the tokens fit


def test_fp8_gemms_run_at_the_fp8_peak_and_fp4_bytes_carry_their_scales():
    gpu = get_gpu("b200")
    assert peak_flop_per_s(gpu, "fp8") == 2 * gpu.bf16_flop_per_s
    assert peak_flop_per_s(gpu, "fp4") == 4 * gpu.bf16_flop_per_s
    assert peak_flop_per_s(get_gpu("h100-sxm"), "fp4") is None
    assert WEIGHT_BYTES == {"bf16": 2, "fp8": 1, "fp4": 0.5625, "mxfp4": 0.53125} and KV_BYTES == {"bf16": 2, "fp8": 1}
    model = get_model("qwen3-8b")
    bf16, fp8 = plain(), plain(precision="fp8")
    # a large prefill is compute-bound: its decoder-layer GEMMs run at the FP8 peak (1,979 against 989 TFLOP/s)
    assert fp8._prefill_token_s == pytest.approx(bf16._prefill_token_s * 989 / 1979, rel=1e-12)
    assert fp8.weight_bytes == model.body_matmul_params + 2 * (model.total_params - model.body_matmul_params)


# ------------------------------------------------------------------------------------------------ stacks
def test_the_stacks_fixed_overhead_is_paid_once_per_step_not_per_token():
    base, more = plain(), plain(step_overhead_s=5e-4 + 2e-3)
    for tokens in (1, 8, 64, 512):  # one token or a verify of many: the same 2 ms more
        assert more.verify_s(tokens, 4096.0, 1) - base.verify_s(tokens, 4096.0, 1) == pytest.approx(2e-3, rel=1e-9)
    calibrated = build_roofline(RooflineHardware(kind="roofline", gpu="h100-sxm", model="qwen3-8b"))
    bumped = build_roofline(RooflineHardware(kind="roofline", gpu="h100-sxm", model="qwen3-8b",
                                             step_overhead_s=calibrated.params.step_overhead_s + 1e-3))
    for tokens in (1, 16, 128):
        assert bumped.verify_s(tokens, 0.0, 1) - calibrated.verify_s(tokens, 0.0, 1) == pytest.approx(1e-3, rel=1e-9)


def test_each_stack_has_its_own_fit_and_capture_sizes():
    models = {name: build_roofline(RooflineHardware(kind="roofline", gpu="h100-sxm", model="qwen3-8b", stack=name))
              for name in STACKS}
    assert {m.params.calibration for m in models.values()} == {f"h100-sxm/{s}" for s in STACKS}
    assert models["vllm"].buckets.sizes[:4] == [1, 2, 4, 8] and models["vllm"].buckets.largest == 512
    assert models["sglang"].buckets.sizes == sglang_default_capture_sizes()
    assert sglang_default_capture_sizes()[:6] == [1, 2, 4, 8, 12, 16] and sglang_default_capture_sizes()[-1] == 256
    assert models["trtllm"].buckets.sizes == trtllm_default_capture_sizes() == [1, 2, 4] + list(range(8, 129, 8))
    assert models["eager"].buckets.sizes == []  # no CUDA graphs
    assert len({m.params.step_overhead_s for m in models.values() if m.params.stack != "eager"}) == 3


def test_a_step_outside_a_cuda_graph_costs_at_least_its_kernel_launches():
    model = get_model("qwen3-8b")
    floor = 1e-4 * target_kernels(model)  # 328 kernels x 100 us: far above the GPU time
    assert target_kernels(model) == 36 * 9 + 1 + 3
    eager = plain(stack="eager", host_launch_s=1e-4)
    sampler = model.vocab_size * 16 / (get_gpu("h100-sxm").hbm_bytes_per_s * eager.params.bw_efficiency)
    assert eager.verify_s(1) == pytest.approx(floor + sampler + eager.params.step_overhead_s, rel=1e-12)
    graphed = build_roofline(RooflineHardware(kind="roofline", gpu="h100-sxm", model="qwen3-8b", calibration="none",
                                              host_launch_s=1e-4))  # vLLM's graphs up to 512 tokens
    assert graphed.verify_s(1) < 0.01 < floor
    assert graphed.verify_s(600) >= floor  # above the largest captured size the host launches every kernel
    assert float(graphed.verify_s(__import__("numpy").array([1.0, 600.0]))[1]) == pytest.approx(graphed.verify_s(600))


# ------------------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("fields,field,needle", [
    ({"precision": "fp4"}, "hardware.precision", "h100-sxm has no FP4 tensor cores; valid: bf16, fp8"),
    ({"gpu": "a100-80g", "precision": "fp8"}, "hardware.precision", "valid: bf16"),
])
def test_a_precision_the_gpu_lacks_is_an_input_error(fields, field, needle):
    with pytest.raises(InputError) as err:
        build_roofline(RooflineHardware(**{"kind": "roofline", "gpu": "h100-sxm", "model": "qwen3-8b", **fields}),
                       file="s.yaml")
    assert err.value.field == field and needle in str(err.value)


@pytest.mark.parametrize("hardware,needle", [
    ({"stack": "tgi"}, "hardware.stack"),
    ({"precision": "fp4"}, "hardware.precision: 'fp4': h100-sxm has no FP4 tensor cores"),
    ({"kv_precision": "fp4"}, "hardware.kv_precision"),
])
def test_the_command_line_says_which_field_is_wrong(tmp_path, hardware, needle):
    scenario = {"name": "bad", "workload": {"kind": "closed_loop", "concurrency": 2, "num_requests": 4,
                                             "prompt_tokens": {"dist": "constant", "value": 64},
                                             "output_tokens": {"dist": "constant", "value": 16}},
                "hardware": {"kind": "roofline", "gpu": "h100-sxm", "model": "qwen3-8b", **hardware},
                "acceptance": {"kind": "iid", "alpha": 0.5}, "arms": [{"name": "a", "method": "none"}]}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(scenario))
    run = subprocess.run([sys.executable, "-m", "simlab", "run", str(path), "--out", str(tmp_path / "out")],
                         capture_output=True, text=True)
    assert run.returncode == 2, run.stderr
    assert needle in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "out").exists()


def test_a_scenario_with_the_contracts_hardware_fields_runs_and_records_them():
    """The contract's roofline fields (stack, precision, kv_precision, tensor_parallel) in one scenario."""
    from simlab.runner import run_scenario

    hardware = {"kind": "roofline", "gpu": "b200", "model": "qwen3-8b", "stack": "sglang", "precision": "fp4",
                "kv_precision": "fp8", "tensor_parallel": 1}
    scenario = {"name": "contract-stack", "workload": {"kind": "closed_loop", "concurrency": 4, "num_requests": 8,
                                                       "prompt_tokens": {"dist": "constant", "value": 256},
                                                       "output_tokens": {"dist": "constant", "value": 32}},
                "hardware": hardware, "acceptance": {"kind": "iid", "alpha": 0.7},
                "arms": [{"name": "none", "method": "none"}, {"name": "dspark", "method": "dspark", "gamma": 5,
                                                                "scheduler": {"kind": "fixed"}}]}
    results = run_scenario(scenario, plot=False)
    assert all(m["completed"] == 8 for m in results.arms.values())
    recorded = results.summary["scenario"]["hardware"]
    assert {k: recorded[k] for k in hardware} == hardware
    fp4 = build_roofline(RooflineHardware(**hardware))
    bf16 = build_roofline(RooflineHardware(**{**hardware, "precision": "bf16", "kv_precision": "bf16"}))
    assert fp4.verify_s(1) < bf16.verify_s(1)  # a quarter of the decoder layers' bytes at one token


def test_the_config_accepts_exactly_the_stacks_and_precisions_the_hardware_layer_defines():
    """config/ may not import hardware/, so RooflineHardware spells the names again; they must stay the same."""
    from typing import get_args

    accepted = {name: set(get_args(RooflineHardware.model_fields[name].annotation))
                for name in ("stack", "precision", "kv_precision")}
    assert accepted == {"stack": set(STACKS), "precision": set(PRECISIONS), "kv_precision": set(KV_BYTES)}
    (experts,) = [a for a in get_args(RooflineHardware.model_fields["expert_precision"].annotation) if a is not None
                  and a is not type(None)]
    assert set(get_args(experts)) == set(EXPERT_PRECISIONS) == set(WEIGHT_BYTES)
