"""The roofline target model against hand-computed numbers (Qwen3-8B and Llama-3-70B public configs)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from simlab.common.errors import InputError
from simlab.config.hardware import RooflineHardware
from simlab.hardware import build_cost_model
from simlab.hardware.roofline_build import build_roofline
from simlab.hardware.specs import GIB, MODELS

# Qwen3-8B config.json: 36 layers, hidden 4096, 32 heads, 8 KV heads, head_dim 128, MLP 12288, vocab 151936
H, L, HEADS, KV, D, I, V = 4096, 36, 32, 8, 128, 12288, 151936
ATTN = H * (HEADS * D + 2 * KV * D) + HEADS * D * H  # 41,943,040
MLP = 3 * H * I  # 150,994,944
NORMS = 2 * H + 2 * D  # input/post norms + q/k norms
MATMUL_PARAMS = L * (ATTN + MLP) + V * H  # decoder layers + LM head
READ_BYTES = 2 * (L * (ATTN + MLP + NORMS) + H + V * H)  # layers + final norm + LM head
TOTAL_BYTES = READ_BYTES + 2 * V * H  # + the (untied) input embedding
H100_BW, H100_FLOPS = 3.35e12, 989e12
SAMPLE_BYTES = V * 16  # each sampled logit row: fp32 logits and probabilities written and read


def qwen8b(**params) -> object:
    """The constant-efficiency roofline (calibration: none) whose closed forms these tests check."""
    base = dict(kind="roofline", gpu="h100-sxm", model="qwen3-8b", calibration="none", bw_efficiency=0.8,
                flop_efficiency=0.5, step_overhead_s=5e-4)
    return build_roofline(RooflineHardware(**{**base, **params}))


def test_hand_counts_match_the_public_sizes():
    assert MODELS["qwen3-8b"].kv_bytes_per_token() == 147_456 == 2 * 36 * 8 * 128 * 2
    assert MODELS["qwen3-8b"].weight_bytes == TOTAL_BYTES
    assert TOTAL_BYTES / 2 == pytest.approx(8.19e9, rel=0.01)  # "8.2B parameters"
    assert MODELS["llama-3.1-8b"].total_params == pytest.approx(8.03e9, rel=0.01)
    assert MODELS["qwen3-4b"].total_params == pytest.approx(4.02e9, rel=0.01)  # tied embeddings
    assert MODELS["qwen3-14b"].total_params == pytest.approx(14.8e9, rel=0.01)
    assert MODELS["llama-3-70b"].total_params == pytest.approx(70.6e9, rel=0.01)


@pytest.mark.parametrize("context_tokens", [0.0, 4096.0, 65536.0])
def test_memory_bound_at_one_token_is_bytes_over_bandwidth_plus_overhead(context_tokens):
    cm = qwen8b()
    expected = (READ_BYTES + context_tokens * 147_456) / (H100_BW * 0.8) + SAMPLE_BYTES / (H100_BW * 0.8) + 5e-4
    assert cm.verify_s(1, context_tokens, 1) == pytest.approx(expected, rel=1e-12)
    assert 0.0058 < cm.verify_s(1) < 0.0070  # public: ~6-7 ms per token for an 8B bf16 model on one H100


def test_compute_bound_at_large_batch_is_flops_over_peak():
    cm = qwen8b(cuda_graph_buckets="none")
    expected = 2 * MATMUL_PARAMS * 4096 / (H100_FLOPS * 0.5) + 4096 * SAMPLE_BYTES / (H100_BW * 0.8) + 5e-4
    assert cm.verify_s(4096, 0.0, 512) == pytest.approx(expected, rel=1e-12)
    # attention FLOPs: 4 x layers x heads x head_dim per (query, context) pair, queries per request = B / R
    context = 1_000_000.0
    extra = 4 * L * HEADS * D * (8 - 1) * context / (H100_FLOPS * 0.5)
    assert cm.verify_s(4096, context, 512) - cm.verify_s(4096, context, 4096) == pytest.approx(extra, rel=1e-9)


def test_crossover_near_peak_flops_over_bandwidth():
    cm = qwen8b(cuda_graph_buckets="none", bw_efficiency=1.0, flop_efficiency=1.0)
    memory_only = cm.verify_s(1)
    b = np.arange(1, 1000)
    sampler = b * SAMPLE_BYTES / H100_BW  # grows with every token on either side of the corner
    cost = cm.verify_s(b, np.zeros_like(b, dtype=float), np.ones_like(b)) - sampler
    memory_only -= SAMPLE_BYTES / H100_BW
    crossover = int(b[np.argmax(cost > memory_only + 1e-15)])
    assert crossover == pytest.approx(H100_FLOPS / H100_BW, rel=0.01)  # ~295 tokens
    assert np.all(np.diff(cost[crossover - 1:]) > 0)  # linear growth above it
    default = qwen8b(cuda_graph_buckets="none")
    assert default.crossover_tokens == pytest.approx(H100_FLOPS * 0.5 / (H100_BW * 0.8), rel=0.001)


def test_buckets_make_roofline_steps_in_the_compute_bound_region():
    cm = qwen8b()  # vLLM default sizes: ..., 256, 272, 288, ...
    assert cm.verify_s(257) == cm.verify_s(272) < cm.verify_s(273) == cm.verify_s(288)
    none = qwen8b(cuda_graph_buckets="none")
    assert cm.verify_s(272) == none.verify_s(272)
    assert none.verify_s(257) < none.verify_s(272)
    assert cm.verify_s(1000) == none.verify_s(1000)  # linear above the largest bucket (512)
    custom = qwen8b(cuda_graph_buckets=[1, 600])
    assert custom.verify_s(2) == custom.verify_s(600) > none.verify_s(2)  # 2 tokens run the 600-token graph


@pytest.mark.parametrize("calibration", ["none", "auto"])
def test_vectorised_verify_equals_scalar_calls(calibration):
    """Bit for bit: the engine prices blocks of steps with arrays and single steps with scalars or short arrays."""
    cm = qwen8b() if calibration == "none" else build_roofline(
        RooflineHardware(kind="roofline", gpu="h100-sxm", model="qwen3-8b"))
    rng = np.random.default_rng(0)
    b = rng.integers(0, 3000, size=(6, 40))
    c = rng.uniform(0, 2e6, size=(6, 1))
    r = rng.integers(1, 200, size=(6, 1))
    vec = cm.verify_s(b, c, r)
    scalar = [[cm.verify_s(int(x), float(ci), int(ri)) for x in row] for row, ci, ri in zip(b, c[:, 0], r[:, 0])]
    assert vec.shape == (6, 40)
    assert np.array_equal(vec, np.array(scalar))
    assert cm.verify_s(np.array([[0, 1]]))[0, 0] == 0.0
    assert cm.step_s(64, 1e5, 16) == cm.verify_s(64, 1e5, 16)


def test_mixed_step_adds_prefill_flops_and_equals_verify_without_prefill():
    cm = qwen8b()
    assert cm.step_s(64, 1e5, 16) == cm.verify_s(64, 1e5, 16)
    chunk, pairs = 8192, 8192 * 4096.0
    body = 2 * L * (ATTN + MLP) * chunk + 4 * L * HEADS * D * pairs  # prefill: no LM head
    # the chunk's last token is sampled (its first output token)
    assert cm.prefill_s(chunk) == pytest.approx(body / (H100_FLOPS * 0.5) + SAMPLE_BYTES / (H100_BW * 0.8) + 5e-4,
                                                rel=1e-12)
    assert cm.step_s(0, 0.0, 0, chunk, pairs) == cm.prefill_s(chunk, pairs)
    assert cm.step_s(64, 0.0, 16, 256, 256 * 128.0) > cm.step_s(64, 0.0, 16)


@pytest.mark.parametrize("calibration", ["none", "auto"])
def test_every_verified_position_samples_the_whole_vocabulary(calibration):
    """Below the corner the weights' read is the same for 1 or 8 tokens (no buckets, no context): the 7 more
    positions add 7 logit rows of 151,936 entries x 16 bytes at the elementwise rate (the constant roofline: its
    one bandwidth), and a mixed step samples its decode tokens and the chunk's last token, not the chunk."""
    if calibration == "none":
        cm, rate = qwen8b(cuda_graph_buckets="none"), H100_BW * 0.8
        assert cm.verify_s(8) - cm.verify_s(1) == pytest.approx(7 * SAMPLE_BYTES / rate, rel=1e-9)
    else:
        cm = build_roofline(RooflineHardware(kind="roofline", gpu="h100-sxm", model="qwen3-8b",
                                             cuda_graph_buckets="none"))
        rate = cm.device.elem_bytes_per_s
        assert cm._sample_token_s == pytest.approx(SAMPLE_BYTES / rate, rel=1e-12)
        # calibrated: the GEMMs' knee grows a little with tokens too; the sampler is the part that scales the vocab
        assert cm._sample_token_s * 256 * 4 > 2e-4  # 64 users x 4 positions: more than 0.2 ms on an H100
    with_chunk = cm.step_s(16, 0.0, 16, 512, 512 * 256.0) - cm.step_s(16, 0.0, 16, 511, 511 * 256.0)
    one_more_row = cm.step_s(17, 0.0, 17, 511, 511 * 256.0) - cm.step_s(16, 0.0, 16, 511, 511 * 256.0)
    assert one_more_row > cm._sample_token_s > 0.0
    assert with_chunk < one_more_row  # a prefill token adds no logit row


def test_kv_cache_tokens_from_memory_minus_weights():
    cm = qwen8b(activation_reserve_bytes=2 * 10**9)
    budget = 0.9 * 80 * GIB - TOTAL_BYTES - 2 * 10**9
    assert cm.kv_cache_tokens() == int(budget // 147_456) // 16 * 16
    default = qwen8b()
    assert 350_000 < default.kv_cache_tokens() < 420_000  # ~56 GB of KV at 147 KB per token
    assert qwen8b(gpu="h200").kv_cache_tokens() > 2 * default.kv_cache_tokens()


def test_tensor_parallel_splits_bytes_and_adds_all_reduce():
    tp = build_roofline(RooflineHardware(kind="roofline", gpu="h100-sxm", model="llama-3-70b", tensor_parallel=4,
                                         calibration="none"))
    m = MODELS["llama-3-70b"]
    read = m.read_params * 2 / 4
    allreduce = 2 * 80 * (1e-5 + 8192 * 2 * (2 * 3 / 4) / (450e9 * 0.7))  # 160 ring all-reduces of one token
    # the sampler runs on one GPU over the whole gathered vocabulary (128,256 entries): not split 4 ways
    sampler = 128_256 * 16 / (H100_BW * 0.8)
    assert tp.verify_s(1) == pytest.approx(read / (H100_BW * 0.8) + allreduce + sampler + 5e-4, rel=1e-12)
    assert tp.kv_bytes_per_token == 2 * 80 * 2 * 128 * 2  # 2 of the 8 KV heads per GPU
    assert tp.kv_cache_tokens() > 100_000
    assert 0.010 < tp.verify_s(1) < 0.020


def test_model_that_does_not_fit_is_an_input_error():
    with pytest.raises(InputError) as err:
        build_roofline(RooflineHardware(kind="roofline", gpu="h100-sxm", model="llama-3-70b"), file="s.yaml")
    assert err.value.field == "hardware.tensor_parallel" and err.value.file == "s.yaml"
    assert "does not fit" in str(err.value) and "tensor_parallel 2, 4, 8" in str(err.value)
    with pytest.raises(InputError, match="do not split 3 ways"):
        build_roofline(RooflineHardware(kind="roofline", gpu="h200", model="llama-3-70b", tensor_parallel=3))
    with pytest.raises(InputError, match="beyond one 8-GPU"):
        build_roofline(RooflineHardware(kind="roofline", gpu="h200", model="qwen3-8b", tensor_parallel=16))


@pytest.mark.parametrize("field,value", [("gpu", "h300"), ("model", "qwen3-9b")])
def test_unknown_gpu_or_model_names_the_field_and_choices(field, value, tmp_path):
    cfg = RooflineHardware(**{"kind": "roofline", "gpu": "h100-sxm", "model": "qwen3-8b", field: value})
    with pytest.raises(InputError) as err:
        build_cost_model(cfg, base_dir=tmp_path, file="scenario.yaml")
    assert err.value.field == f"hardware.{field}" and err.value.value == value
    assert ("h100-sxm" if field == "gpu" else "qwen3-8b") in err.value.valid


def test_aliases_and_hugging_face_ids():
    cm = build_roofline(RooflineHardware(kind="roofline", gpu="H100", model="Qwen/Qwen3-8B"))
    assert cm.name == "h100-sxm_qwen3-8b"


def test_describe_is_json_able():
    import json

    info = qwen8b().describe()
    assert json.loads(json.dumps(info))["derived"]["kv_bytes_per_token_per_gpu"] == 147_456
    assert info["parameters"]["bw_efficiency"] == 0.8


def test_scalar_calls_are_cheap():
    cm = qwen8b()
    n = 20_000
    start = time.perf_counter()
    for i in range(n):
        cm.verify_s(100 + (i & 63), 50_000.0, 20)
        cm.draft_s("dspark", 7, 20, 50_000.0)
        cm.step_s(64, 50_000.0, 16, 512, 512 * 700.0)
    per_call_us = (time.perf_counter() - start) / (3 * n) * 1e6
    assert per_call_us < 25  # a few microseconds on a laptop; generous for a shared CI core
