"""Roofline drafter cost shapes: AR linear in gamma, parallel flat at small R, DSpark's head share, papers' sanity."""

from __future__ import annotations

import pytest

from simlab.config.hardware import RooflineHardware
from simlab.hardware.roofline_build import build_roofline
from simlab.hardware.specs import MODELS


def model(**params):
    return build_roofline(RooflineHardware(kind="roofline", gpu="h100-sxm", model="qwen3-8b", **params))


@pytest.mark.parametrize("method", ["eagle3", "mtp"])
def test_autoregressive_cost_is_linear_in_gamma(method):
    cm = model()
    costs = [cm.draft_s(method, g, 16, 16 * 2048) for g in range(1, 9)]
    steps = [b - a for a, b in zip(costs, costs[1:])]
    assert steps[0] > 0
    assert all(s == pytest.approx(steps[0], rel=1e-12) for s in steps)


def test_eagle3_step_is_one_layer_with_a_32k_head_read_from_memory():
    cm = model(kernel_launch_s=0.0, calibration="none")  # the constant-efficiency closed form
    m = MODELS["qwen3-8b"]
    h = m.hidden_size
    qkv = (m.num_heads + 2 * m.num_kv_heads) * m.head_dim
    params = m.attention_params_per_layer + m.mlp_params_per_layer + h * qkv + 32000 * h + m.norm_params_per_layer
    assert cm.drafter.autoregressive_step_s("eagle3", 1, 0.0) == pytest.approx(params * 2 / (3.35e12 * 0.8), rel=1e-12)
    # MTP uses the full-vocabulary LM head: dearer per step
    assert cm.drafter.autoregressive_step_s("mtp", 1) > 2 * cm.drafter.autoregressive_step_s("eagle3", 1)


def test_parallel_block_is_nearly_flat_in_gamma_at_small_batch():
    cm = model(calibration="none")  # the constant roofline: flat up to its corner
    for requests in (1, 4):
        context = requests * 1024
        short, long = cm.draft_s("dflash", 1, requests, context), cm.draft_s("dflash", 16, requests, context)
        assert long == pytest.approx(short, rel=0.05)
    # ... but grows with gamma once the block is compute-bound
    assert cm.draft_s("dflash", 16, 128) > 1.5 * cm.draft_s("dflash", 7, 128)


def test_calibrated_parallel_block_rises_smoothly_but_reads_its_weights_once_at_small_batch():
    cm = model()
    for requests in (1, 4):
        context = requests * 1024
        costs = [cm.draft_s("dflash", g, requests, context) for g in range(1, 17)]
        assert all(b > a for a, b in zip(costs, costs[1:]))  # the knee: every extra token costs something
        assert costs[-1] < 2 * costs[0]  # 16x the tokens, far less than 2x the time: memory-bound
    assert cm.draft_s("dflash", 16, 128) > 1.5 * cm.draft_s("dflash", 7, 128)


@pytest.mark.parametrize("requests", [1, 4, 16])
@pytest.mark.parametrize("gamma", [7, 16])
def test_dflash_block_costs_less_than_eight_eagle3_steps(requests, gamma):
    cm = model()
    context = requests * 1024.0
    # both rounds with the stack's host time (once a round, and per drafter forward)
    eight_steps = cm.draft_s("eagle3", 8, requests, context)
    assert cm.draft_s("dflash", gamma, requests, context) < eight_steps
    assert cm.drafter.parallel_block_s(gamma * requests, requests, context) < 8 * cm.drafter.autoregressive_step_s(
        "eagle3", requests, context)  # and the GPU's part alone


@pytest.mark.parametrize("context_per_request", [512, 1024, 2048, 4096])
def test_dspark_sequential_head_adds_a_small_share_of_a_round_at_batch_128(context_per_request):
    cm = model()
    requests, gamma = 128, 7
    context = requests * context_per_request
    head = cm.draft_s("dspark", gamma, requests, context) - cm.draft_s("dflash", gamma, requests, context)
    assert head == pytest.approx(gamma * cm.drafter.head_step_s(requests), rel=1e-12)
    round_s = cm.draft_s("dspark", gamma, requests, context) + cm.verify_s(requests * (1 + gamma), context, requests)
    assert 0.002 <= head / round_s <= 0.013  # DSpark paper: 0.2-1.3 %


def test_draft_kv_reads_grow_with_context():
    cm = model()
    assert cm.draft_s("eagle3", 7, 128, 128 * 8192) > cm.draft_s("eagle3", 7, 128, 0)
    assert cm.draft_s("dflash", 7, 128, 128 * 8192) > cm.draft_s("dflash", 7, 128, 0)
    more_layers = model(draft_layers=8)
    assert more_layers.draft_s("dflash", 7, 1) > cm.draft_s("dflash", 7, 1)


def test_none_and_degenerate_calls_cost_nothing():
    cm = model()
    assert cm.draft_s("none", 7, 64) == 0.0
    assert cm.draft_s("dspark", 0, 64) == 0.0
    assert cm.draft_s("eagle3", 7, 0) == 0.0
    with pytest.raises(ValueError):
        cm.draft_s("lookahead", 3, 1)
