"""Mixture-of-experts targets and MLA in the roofline: cases worked by hand, a brute-force count of the experts a
batch touches, the published sizes, and the errors."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

from simlab.common.errors import InputError
from simlab.config.hardware import RooflineHardware
from simlab.hardware.roofline_build import build_roofline
from simlab.hardware.specs import expected_experts, get_gpu, get_model


def plain(model: str, **fields):
    return build_roofline(RooflineHardware(**{"kind": "roofline", "gpu": "h100-sxm", "model": model,
                                              "calibration": "none", "cuda_graph_buckets": "none", **fields}))


def test_the_expected_distinct_experts_is_the_brute_force_count():
    """Every way 3 tokens can each pick 2 of 6 experts, counted: the mean number of distinct experts equals
    E (1 - (1 - k/E)^B) exactly."""
    experts, k, tokens = 6, 2, 3
    choices = list(itertools.combinations(range(experts), k))
    total = sum(len(set().union(*picks)) for picks in itertools.product(choices, repeat=tokens))
    mean = Fraction(total, len(choices) ** tokens)
    assert float(mean) == pytest.approx(expected_experts(tokens, experts, k), rel=1e-12)
    assert expected_experts(1, 128, 8) == 8.0  # one token: exactly its k experts
    assert expected_experts(4096, 128, 8) == pytest.approx(128.0, rel=1e-9)  # a large batch: all of them
    assert np.all(np.diff(expected_experts(np.arange(1, 300), 128, 8)) > 0)


def test_one_token_reads_exactly_the_active_parameters():
    model = get_model("qwen3-30b-a3b")
    cm = plain("qwen3-30b-a3b")
    bandwidth = get_gpu("h100-sxm").hbm_bytes_per_s * cm.params.bw_efficiency
    # the always-read part (attention, routers, norms, LM head) plus k of the E experts of every MoE layer
    assert model.read_params + model.active_routed_params == model.active_params
    sampler = model.vocab_size * 16 / bandwidth  # each position's pass over the vocabulary (16 bytes an entry)
    assert cm.verify_s(1) - cm.params.step_overhead_s - sampler == pytest.approx(2 * model.active_params / bandwidth,
                                                                                 rel=1e-12)
    # B tokens read the expected distinct experts' weights
    for tokens in (8, 64):
        routed = model.routed_expert_params * expected_experts(tokens, 128, 8) / 128
        memory = 2 * (model.read_params + routed) / bandwidth
        compute = 2 * (model.body_matmul_params + model.lm_head_params) * tokens / (
            get_gpu("h100-sxm").bf16_flop_per_s * cm.params.flop_efficiency)
        assert cm.verify_s(tokens, 0.0, tokens) - cm.params.step_overhead_s - tokens * sampler == pytest.approx(
            max(memory, compute), rel=1e-12)


def test_an_moe_step_rises_with_batch_far_faster_than_a_dense_one():
    moe, dense = plain("qwen3-30b-a3b"), plain("qwen3-4b")
    assert moe.verify_s(64) / moe.verify_s(1) > 3 * dense.verify_s(64) / dense.verify_s(1)
    calibrated = build_roofline(RooflineHardware(kind="roofline", gpu="h100-sxm", model="qwen3-30b-a3b"))
    b = np.arange(1, 1025, dtype=float)
    assert np.all(np.diff(calibrated.verify_s(b, np.zeros(b.shape), b)) >= 0)  # monotone in the batch


def test_the_shipped_mixtures_have_their_published_sizes():
    """Total and activated sizes as the model cards give them (to their rounding): 30.5B / 3.3B, 235B / 22B,
    671B / 37B (DeepSeek-V3 without its MTP module); activated counts include the embedding row lookup."""
    sizes = {"qwen3-30b-a3b": (30.5, 3.3, 0.06), "qwen3-235b-a22b": (235, 22, 0.5), "deepseek-v3": (671, 37, 0.7)}
    for name, (total_b, active_b, rounding) in sizes.items():
        m = get_model(name)
        embedding = m.vocab_size * m.hidden_size
        assert m.total_params / 1e9 == pytest.approx(total_b, abs=rounding), name
        assert (m.active_params + embedding) / 1e9 == pytest.approx(active_b, abs=rounding), name
    deepseek = get_model("deepseek-v3")
    assert deepseek.is_mla and deepseek.kv_bytes_per_token() == 61 * (512 + 64) * 2 == 70_272
    assert get_model("deepseek-ai/DeepSeek-V3") is deepseek


def test_mla_keeps_its_latent_on_every_gpu_and_deepseek_needs_fp8_on_eight_h200s():
    cm = build_roofline(RooflineHardware(kind="roofline", gpu="h200", model="deepseek-v3", tensor_parallel=8,
                                         precision="fp8"))
    assert cm.kv_bytes_per_token == 70_272  # the latent is replicated, not split
    assert cm.kv_cache_tokens() > 0
    with pytest.raises(InputError) as err:
        build_roofline(RooflineHardware(kind="roofline", gpu="h200", model="deepseek-v3", tensor_parallel=8),
                       file="s.yaml")
    assert err.value.field == "hardware.tensor_parallel" and "precision fp8" in str(err.value)
    with pytest.raises(InputError) as err:
        build_roofline(RooflineHardware(kind="roofline", gpu="h100-sxm", model="qwen3-30b-a3b", tensor_parallel=3))
    assert "768-wide experts do not split 3 ways" in str(err.value) and "tensor_parallel 1, 2, 4, 8" in str(err.value)


def test_deepseeks_mtp_layer_is_an_moe_layer_in_the_targets_precision():
    """MTP-1 on DeepSeek-V3: the drafter is the model's own MoE layer, so its read grows with the requests it
    drafts for (the experts they route to), and in FP8 its matmul weights take one byte."""
    from simlab.hardware.specs import BF16_BYTES

    cm = build_roofline(RooflineHardware(kind="roofline", gpu="h200", model="deepseek-v3", tensor_parallel=8,
                                         precision="fp8", calibration="none"))
    shape = cm.drafter.mtp_step
    model = cm.model
    assert shape.routed_bytes == model.num_experts * model.expert_params * 1 / 8  # every expert, FP8, split 8 ways
    # the rest of the layer: its projections, attention, router and shared expert (the chosen experts are read
    # from routed_bytes, as many as its tokens touch)
    chosen = model.experts_per_token * model.expert_params
    assert shape.weight_bytes == ((2 * model.hidden_size ** 2 + model.mlp_params_per_layer - chosen
                                   + model.attention_params_per_layer) * 1
                                  + (model.lm_head_params + model.norm_params_per_layer) * BF16_BYTES) / 8
    one_token = cm.drafter.autoregressive_step_s("mtp", 1)
    assert one_token == pytest.approx(cm.device.forward_parts_s(
        shape.weight_bytes + shape.routed_bytes * model.experts_per_token / model.num_experts, 0.0, 0.0,
        shape.flops_per_token, 0.0, 1, shape.num_allreduces, model.hidden_size, shape.kernels), rel=1e-12)
    one, many = cm.draft_s("mtp", 1, 1), cm.draft_s("mtp", 1, 256)
    assert many > 2 * one  # 256 requests touch nearly all 256 experts; one request reads 8
    dense = build_roofline(RooflineHardware(kind="roofline", gpu="h100-sxm", model="qwen3-8b"))
    assert dense.drafter.mtp_step.routed_bytes == 0.0
