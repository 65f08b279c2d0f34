"""Compiled verify and draft seconds (simlab/hardware/cost_kernel.py) against the cost models' own paths, bit for
bit: the compiled block prices a scheduler's path with them where the numpy block calls ``verify_s`` on arrays."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from simlab.config.hardware import RooflineHardware
from simlab.hardware import build_cost_model
from simlab.hardware.profiles import load_profile, shipped_profiles
from simlab.hardware.cost_kernel import full_draft_s, planned_draft_s, verify_run_s, verify_s
from simlab.hardware.cost_spec import CALIBRATED, KIND, PLAIN

ROOFLINES = {  # dense and MoE, plain and calibrated, every layout, FP8, with and without CUDA graphs
    "h100-qwen3-8b-plain": dict(gpu="h100-sxm", model="qwen3-8b", calibration="none"),
    "h100-qwen3-8b-vllm": dict(gpu="h100-sxm", model="qwen3-8b", stack="vllm"),
    "h200-qwen3-8b-sglang-fp8": dict(gpu="h200", model="qwen3-8b", stack="sglang", precision="fp8"),
    "b200-qwen3-32b-tp2": dict(gpu="b200", model="qwen3-32b", stack="sglang", tensor_parallel=2),
    "a100-llama-eager": dict(gpu="a100-80g", model="llama-3.1-8b", stack="eager"),
    "h100-no-graphs-plain": dict(gpu="h100-sxm", model="qwen3-8b", calibration="none", cuda_graph_buckets="none"),
    "h200-dsv3-tp8": dict(gpu="h200", model="deepseek-v3", stack="sglang", precision="fp8", tensor_parallel=8),
    "h200-dsv3-tp8-ep8": dict(gpu="h200", model="deepseek-v3", stack="sglang", precision="fp8", tensor_parallel=8,
                              expert_parallel=8),
    "h200-dsv3-dp8-ep8": dict(gpu="h200", model="deepseek-v3", stack="sglang", precision="fp8", tensor_parallel=1,
                              expert_parallel=8),
    "h200-dsv3-dp8-ep8-plain": dict(gpu="h200", model="deepseek-v3", precision="fp8", tensor_parallel=1,
                                    expert_parallel=8, calibration="none"),
    "h100-qwen3-30b-a3b-tp2-plain": dict(gpu="h100-sxm", model="qwen3-30b-a3b", tensor_parallel=2,
                                         calibration="none"),
    "h100-qwen3-235b-tp8": dict(gpu="h100-sxm", model="qwen3-235b-a22b", stack="vllm", tensor_parallel=8),
}


def _roofline(tmp_path, **fields):
    return build_cost_model(RooflineHardware(kind="roofline", **fields), base_dir=tmp_path, file=None)


def _compare(cost, spec, batch: np.ndarray, context: np.ndarray, requests: np.ndarray) -> None:
    expected = cost.verify_s(batch, context.astype(float), requests)
    got = np.array([verify_s(spec, int(b), float(c), int(r)) for b, c, r in zip(batch, context, requests)])
    mismatch = np.flatnonzero(got != expected)
    assert mismatch.size == 0, (batch[mismatch[:5]], context[mismatch[:5]], requests[mismatch[:5]],
                                got[mismatch[:5]], expected[mismatch[:5]])


@pytest.mark.parametrize("name", sorted(ROOFLINES))
def test_compiled_roofline_verify_equals_the_vectorised_one(tmp_path, name):
    cost = _roofline(tmp_path, **ROOFLINES[name])
    spec = cost.verify_kernel()
    assert spec is not None
    assert spec[3][KIND] == (PLAIN if ROOFLINES[name].get("calibration") == "none" else CALIBRATED)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    n = 4000
    requests = rng.integers(1, 513, n)
    batch = requests + rng.integers(0, 8, n) * requests // rng.integers(1, 8, n)
    batch[:600] = np.arange(1, 601)  # every small batch: the CUDA-graph sizes and the routed table's start
    requests[:600] = np.maximum(batch[:600] // 3, 1)
    context = rng.integers(0, 2_000_000, n)
    context[::7] = 0
    _compare(cost, spec, batch, context, requests)


def test_a_step_of_one_request_costs_the_same_compiled(tmp_path):
    """Hand-checked corner: one token, no context, one request (every layout's ceil(R / D) = 1)."""
    for fields in ROOFLINES.values():
        cost = _roofline(tmp_path, **fields)
        assert verify_s(cost.verify_kernel(), 1, 0.0, 1) == cost.verify_s(np.array([1]), np.array([0.0]),
                                                                           np.array([1]))[0]


def test_compressed_attention_stays_numpy(tmp_path):
    cost = _roofline(tmp_path, gpu="b200", model="deepseek-v4-flash", stack="sglang", precision="fp8",
                     tensor_parallel=8)
    assert cost.verify_kernel() is None


def test_compiled_table_verify_is_the_lookup(tmp_path):
    table = load_profile(shipped_profiles()["h100-sxm_qwen3-8b"])
    spec = table.verify_kernel()
    rng = np.random.default_rng(3)
    batch = rng.integers(1, 20000, 3000)
    context = rng.integers(0, 3_000_000, 3000)
    _compare(table, spec, batch, context, np.ones(3000, dtype=np.int64))


@pytest.mark.parametrize("name", ["table", "flat-table", "h100-qwen3-8b-vllm", "h200-dsv3-dp8-ep8"])
def test_a_run_of_batches_is_priced_as_each_alone(tmp_path, name):
    """verify_run_s (a scheduler's seconds after admitting 0, 1, 2, ... candidates) equals verify_s at each."""
    if name == "table":
        spec = load_profile(shipped_profiles()["h100-sxm_qwen3-8b"]).verify_kernel()  # a (context x batch) grid
    elif name == "flat-table":
        spec = load_profile(shipped_profiles()["h100-sxm_qwen3-8b"]).verify_kernel()
        spec = (spec[0][: spec[1]].copy(), spec[1], np.zeros(0)) + tuple(spec[3:])  # one row: no context
    else:
        spec = _roofline(tmp_path, **ROOFLINES[name]).verify_kernel()
    rng = np.random.default_rng(5)
    for _ in range(300):
        first, num, requests = int(rng.integers(1, 300)), int(rng.integers(1, 600)), int(rng.integers(1, 300))
        context = float(rng.choice([0, rng.integers(0, 3_000_000)]))
        out = np.empty(num)
        verify_run_s(spec, first, out, context, requests)
        expected = np.array([verify_s(spec, first + k, context, requests) for k in range(num)])
        assert np.array_equal(out, expected), (first, num, context, requests)


@pytest.mark.parametrize("name", sorted(ROOFLINES))
@pytest.mark.parametrize("method", ["eagle3", "mtp", "dflash", "dspark"])
def test_compiled_roofline_draft_equals_the_cost_models(tmp_path, name, method):
    """The drafter's seconds as ArmPolicy.planned_draft_s prices a plan (its share of the batch's context), bit for
    bit; an MoE drafter layer (DeepSeek's MTP) is left to the numpy block."""
    from simlab.engine.decode import ArmPolicy

    cost = _roofline(tmp_path, **ROOFLINES[name])
    spec = cost.draft_kernel(method)
    if method == "mtp" and cost.model.is_moe:
        assert spec is None
        return
    assert spec is not None
    gamma = 7
    policy = ArmPolicy(method, gamma, None, None, cost, 8192, np.full(gamma, 0.5))
    rng = np.random.default_rng(zlib.crc32((name + method).encode()))
    n = 300
    decoding = rng.integers(0, 300, n)
    drafting = np.minimum(rng.integers(0, 300, n), decoding)
    drafting[:40] = decoding[:40]  # everyone drafts: the whole context
    draft_len = rng.integers(0, gamma + 1, n)
    context = rng.integers(0, 3_000_000, n).astype(float)
    expected = policy.planned_draft_s(draft_len, drafting, decoding, context)
    draft = (np.zeros((1, 1)), spec)
    got = np.array([planned_draft_s(draft, int(d), int(k), int(r), float(c))
                    for d, k, r, c in zip(draft_len, drafting, decoding, context)])
    assert np.array_equal(got, expected), np.flatnonzero(got != expected)[:5]
    batch = np.maximum(decoding, 1)
    full = np.array([full_draft_s(draft, gamma, int(r), float(c)) for r, c in zip(batch, context)])
    assert np.array_equal(full, policy.draft_s(batch, context))


def test_draft_spec_on_compressed_attention_is_none(tmp_path):
    cost = _roofline(tmp_path, gpu="b200", model="deepseek-v4-flash", stack="sglang", precision="fp8",
                     tensor_parallel=8)
    assert cost.draft_kernel("dspark") is None


def test_a_subclass_that_prices_otherwise_stays_numpy(tmp_path):
    """Compiled code repeats the two roofline classes' arithmetic only: a subclass must declare its own."""
    cost = _roofline(tmp_path, gpu="h100-sxm", model="qwen3-8b", stack="vllm")

    class Doubled(type(cost)):
        def _verify_array(self, *args):
            return 2.0 * super()._verify_array(*args)

    cost.__class__ = Doubled
    assert cost.verify_kernel() is None and cost.draft_kernel("dspark") is None
