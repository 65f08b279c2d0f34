"""The calibrated roofline: the fit recovers known parameters, the curve is monotone, smooth and within the
physics bounds, the calibration is chosen and overridden as documented, and the shipped fit regenerates."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from simlab.common.errors import InputError
from simlab.config.hardware import RooflineHardware
from simlab.hardware import RooflineCostModel
from simlab.calibration.stages import calibrate
from simlab.calibration.stages.fit import engine_params, fit_end_to_end, fit_operators, operator_params
from simlab.calibration.stages.observe import (
    ELEMENTWISE_OPS,
    GEMM_OPS,
    OperatorRows,
    StaticBatch,
    elementwise_elements,
    gemm_params,
    predict_operators,
    predict_static_batch,
)
from simlab.hardware.calibrated import CalibratedRooflineCostModel
from simlab.hardware.calibration import fitted_path
from simlab.hardware.catalog import shipped_specs
from simlab.hardware.device import RooflineParams
from simlab.hardware.knee import knee, knee_array
from simlab.hardware.roofline_build import build_roofline
from simlab.hardware.specs import BF16_BYTES, MODELS, get_gpu

REPO = Path(__file__).resolve().parent.parent
NOISE = 0.02  # standard deviation of the log noise put on synthetic measurements
Z = 4.0  # recovered parameters must lie within Z standard errors (derived from NOISE and the design) of the truth
LLAMA3_8B = replace(MODELS["llama-3.1-8b"], name="llama-3-8b-shape")


def roofline(**fields) -> RooflineCostModel:
    return build_roofline(RooflineHardware(**{"kind": "roofline", "gpu": "h100-sxm", "model": "qwen3-8b", **fields}))


# ------------------------------------------------------------------------------------------------ recovery
def synthetic_operator_rows(truth: RooflineParams, rng: np.random.Generator) -> OperatorRows:
    tokens = np.array([1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 2048, 4096, 8192, 16384],
                      dtype=float)
    n = tokens.size
    layer_params = sum(gemm_params(LLAMA3_8B, op) for op in GEMM_OPS)
    elem_bytes = sum(elementwise_elements(LLAMA3_8B, op) for op in ELEMENTWISE_OPS) * BF16_BYTES
    rows = OperatorRows(tokens=np.concatenate([tokens, tokens]), seconds=np.ones(2 * n),
                        gemm_params=np.concatenate([np.full(n, float(layer_params)), np.zeros(n)]),
                        elem_bytes=np.concatenate([np.zeros(n), np.full(n, float(elem_bytes))]),
                        elem_kernels=np.concatenate([np.zeros(n), np.full(n, float(len(ELEMENTWISE_OPS)))]))
    exact = predict_operators(rows, get_gpu("h100-sxm"), truth)
    return replace(rows, seconds=exact * np.exp(rng.normal(0.0, NOISE, exact.size)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_operator_fit_recovers_known_parameters_within_their_standard_errors(seed):
    truth = RooflineParams(bw_efficiency=0.82, flop_efficiency=0.74, knee_width=1.8, elementwise_efficiency=0.65,
                           kernel_launch_s=4.5e-6, calibration="truth")
    rows = synthetic_operator_rows(truth, np.random.default_rng(seed))
    fitted, result = fit_operators(rows, get_gpu("h100-sxm"))
    standard_errors = result.standard_errors_for(NOISE)
    expected = [truth.bw_efficiency, truth.flop_efficiency, truth.knee_width, truth.elementwise_efficiency,
                truth.kernel_launch_s * 1e6]
    assert np.all(np.abs(result.x - expected) <= Z * standard_errors), (result.x, expected, standard_errors)
    assert operator_params(result.x) == fitted
    assert result.rms_log_residual == pytest.approx(NOISE, rel=0.5)  # 40 residuals: the noise comes back


def test_end_to_end_fit_recovers_attention_efficiency_and_engine_overheads():
    gpu, rng = get_gpu("h100-sxm"), np.random.default_rng(7)
    base = RooflineParams(bw_efficiency=0.8, flop_efficiency=0.78, knee_width=2.0, elementwise_efficiency=0.75,
                          kernel_launch_s=4e-6, calibration="truth")
    engines = ["eng-a", "eng-b"]
    truth_x = np.array([0.6, 1.4, 30.0, 0.9, 12.0])  # attention efficiency, (ms, us per request) per engine
    truth = engine_params(base, truth_x, engines)
    rows = [StaticBatch(e, LLAMA3_8B, 1, b, length, length, 1.0)
            for e in engines for b in (1, 8, 16, 32, 64) for length in (128, 512, 2048)]
    exact = np.array([predict_static_batch(r, gpu, truth[r.engine], 8192) for r in rows])
    noisy = [replace(r, seconds=float(t * math.exp(rng.normal(0.0, NOISE)))) for r, t in zip(rows, exact)]
    fitted, result, names = fit_end_to_end(noisy, gpu, base, 8192)
    assert names == engines
    standard_errors = result.standard_errors_for(NOISE)
    assert np.all(np.abs(result.x - truth_x) <= Z * standard_errors), (result.x, truth_x, standard_errors)
    assert fitted["eng-b"].request_overhead_s == pytest.approx(result.x[4] * 1e-6)


# ------------------------------------------------------------------------------------------------ the curve
def test_knee_is_max_at_width_zero_sum_at_four_and_never_below_max():
    a = np.array([1.0, 2.0, 0.5, 3.0])
    b = np.array([2.0, 2.0, 0.1, 0.0])
    assert np.array_equal(knee_array(a, b, 0.0), np.maximum(a, b))
    assert np.allclose(knee_array(a, b, 4.0), a + b, rtol=1e-15)
    for width in (0.5, 1.0, 2.5):
        k = knee_array(a, b, width)
        assert np.all(k >= np.maximum(a, b)) and np.all(k <= a + b)
        assert knee(2.0, 2.0, width) == pytest.approx(2.0 * (1 + math.sqrt(width) / 2), rel=1e-15)


@pytest.mark.parametrize("spec", shipped_specs(), ids=lambda s: "-".join(map(str, s)))
def test_calibrated_curve_is_monotone_smooth_and_within_the_physics_bounds(spec):
    gpu_name, model_name, tp, stack, precision = spec
    cm = build_roofline(RooflineHardware(kind="roofline", gpu=gpu_name, model=model_name, tensor_parallel=tp,
                                         stack=stack, precision=precision, cuda_graph_buckets="none"))
    assert isinstance(cm, CalibratedRooflineCostModel)
    b = np.arange(1, 8193, dtype=float)
    # monotone in batch tokens at a fixed request count, and along the tables' placement (4 tokens per request)
    for context in (0.0, 65536.0, 1_048_576.0):
        for requests in (np.ones(b.shape), np.full(b.shape, 64.0), np.maximum(1.0, b / 4)):
            cost = cm.verify_s(b, np.full(b.shape, context), requests)
            assert np.all(np.diff(cost) >= 0)
    # monotone in context, for every batch size
    contexts = np.linspace(0, 2_000_000, 50)[:, None]
    assert np.all(np.diff(cm.verify_s(b[None, :], contexts, np.ceil(b / 8)[None, :]), axis=0) >= 0)
    # no corner: the second difference stays far below the large-batch slope (a corner's is the whole slope)
    cost = cm.verify_s(b, np.zeros(b.shape), np.ones(b.shape))
    slope = (cost[-1] - cost[4095]) / 4096
    assert np.max(np.abs(np.diff(cost, 2))) <= 0.02 * slope
    # physics: one token reads every weight once; 8192 tokens do every FLOP, at the datasheet peaks
    gpu, model = cm.gpu, cm.model
    assert cm.verify_s(1) >= cm.weight_read_bytes / gpu.hbm_bytes_per_s
    flops = 2 * (model.body_matmul_params + model.lm_head_params) * 8192 / tp
    assert cm.verify_s(8192, 0.0, 8192) >= flops / gpu.bf16_flop_per_s


def test_the_constant_roofline_fails_the_smoothness_check():
    """The check above can fail: the old model's corner gives a second difference of the whole slope."""
    cm = roofline(calibration="none", cuda_graph_buckets="none")
    b = np.arange(1, 8193, dtype=float)
    cost = cm.verify_s(b, np.zeros(b.shape), np.ones(b.shape))
    slope = (cost[-1] - cost[4095]) / 4096
    assert np.max(np.abs(np.diff(cost, 2))) > 0.5 * slope


def test_with_no_knee_and_no_overheads_the_gemm_part_is_the_plain_roofline():
    """At knee width 0, peak efficiencies and no overheads, a decode step is max(weights, FLOPs) per GEMM group
    plus the elementwise traffic the plain roofline leaves out and the sampler's."""
    cm = roofline(cuda_graph_buckets="none", bw_efficiency=1.0, flop_efficiency=1.0, knee_width=0.0,
                  elementwise_efficiency=1.0, kernel_launch_s=0.0, step_overhead_s=0.0, request_overhead_s=0.0)
    gpu, model = cm.gpu, cm.model
    elem = model.num_layers * (8 * model.hidden_size + 2 * (model.num_heads + model.num_kv_heads) * model.head_dim
                               + 3 * model.intermediate_size) * BF16_BYTES / gpu.hbm_bytes_per_s
    elem += model.vocab_size * 16 / gpu.hbm_bytes_per_s  # the sampler's pass over the vocabulary, per position
    head_bytes = model.lm_head_params * BF16_BYTES
    for tokens in (1.0, 100.0, 300.0, 4096.0):
        body = max((cm.weight_read_bytes - head_bytes) / gpu.hbm_bytes_per_s,
                   2 * model.body_matmul_params * tokens / gpu.bf16_flop_per_s)
        head = max(head_bytes / gpu.hbm_bytes_per_s, 2 * model.lm_head_params * tokens / gpu.bf16_flop_per_s)
        assert cm.verify_s(tokens) == pytest.approx(body + head + elem * tokens, rel=1e-12)


# ------------------------------------------------------------------------------------------------ the config
def test_default_is_the_gpus_fit_for_vllm_and_a_stack_can_be_chosen():
    default, trt = roofline(), roofline(stack="trtllm")
    assert default.params.calibration == "h100-sxm/vllm" and trt.params.calibration == "h100-sxm/trtllm"
    assert trt.params.step_overhead_s != default.params.step_overhead_s
    assert trt.params.bw_efficiency == default.params.bw_efficiency  # the GPU's part is shared
    info = default.describe()["calibration"]
    assert info["stack"] == "vllm" and info["error"]["fitted"] and info["error"]["held_out"]
    assert info["stack_fit"]["fitted_on"]  # the engine measurements the stack was fitted on
    assert roofline(calibration="AUTO").params == default.params


def test_given_parameters_override_the_fit_and_none_is_the_constant_roofline():
    cm = roofline(bw_efficiency=0.5, request_overhead_s=0.0)
    assert cm.params.bw_efficiency == 0.5 and cm.params.request_overhead_s == 0.0
    assert cm.params.flop_efficiency == roofline().params.flop_efficiency
    assert cm.describe()["calibration"]["overridden"] == ["bw_efficiency", "request_overhead_s"]
    assert "overridden" not in roofline().describe()["calibration"]
    none = roofline(calibration="none")
    assert type(none) is RooflineCostModel
    assert (none.params.bw_efficiency, none.params.flop_efficiency, none.params.step_overhead_s) == (0.8, 0.5, 5e-4)


@pytest.mark.parametrize("fields,field,needle", [
    ({"calibration": "tensorrt-llm"}, "hardware.calibration", "stack: vllm | sglang | trtllm | eager"),
    ({"calibration": "fitted"}, "hardware.calibration", "auto (the GPU's fit for the stack) or none"),
    ({"calibration": "none", "knee_width": 1.0}, "hardware.knee_width", "calibration: auto"),
    ({"calibration": "none", "request_overhead_s": 1e-5}, "hardware.request_overhead_s", "calibration: auto"),
])
def test_calibration_input_errors_name_the_field_and_what_is_valid(fields, field, needle):
    with pytest.raises(InputError) as err:
        build_roofline(RooflineHardware(kind="roofline", gpu="h100-sxm", model="qwen3-8b", **fields), file="s.yaml")
    assert err.value.field == field and err.value.file == "s.yaml" and needle in str(err.value)


# ------------------------------------------------------------------------------------------------ the shipped fit
def _close(a, b, path="") -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), path
        for key in a:
            _close(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, (int, float)):
        assert b == pytest.approx(a, rel=1e-4, abs=1e-12), path  # stored to 6 significant digits
    else:
        assert a == b, path


def test_the_shipped_fit_regenerates_from_the_calibration_data():
    shipped = yaml.safe_load(fitted_path().read_text(encoding="utf-8"))
    refit = yaml.safe_load(yaml.safe_dump(calibrate(REPO / "hw_profiles" / "calibration")))
    _close(shipped, refit)


def test_every_gpu_states_its_error_or_that_it_has_none():
    fitted = yaml.safe_load(fitted_path().read_text(encoding="utf-8"))
    for gpu, entry in fitted["gpus"].items():
        error = entry["error"]
        if gpu == "h100-sxm":
            assert error["fitted"] and error["held_out"] and "not_measured_on_this_gpu" not in error
        else:
            assert error["not_measured_on_this_gpu"] and entry["note"]
    assert fitted["gpus"]["a100-80g"]["error"]["held_out"]  # another model shape on the A100
    assert fitted["gpus"]["h200"]["error"]["reference_checks"][0]["id"] == "simlab-h200-qwen3-8b-measured"
    assert not fitted["gpus"]["b200"]["error"]["fitted"] and not fitted["gpus"]["b200"]["error"]["held_out"]
