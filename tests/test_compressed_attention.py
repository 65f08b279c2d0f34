"""DeepSeek-V4 in the roofline (simlab.hardware.compressed_attention): parameter counts against DeepSeek's stated
sizes, the KV layout worked by hand (and DeepSeek's published 9.62 GiB a sequence at 1M tokens), the decode read's
linear and capped parts, the window's reservation out of the KV budget, MXFP4 experts, the drafter's sliding
window, scalar and array costs bit for bit, the errors, and a scenario run end to end."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from simlab.common.errors import InputError
from simlab.config.hardware import RooflineHardware
from simlab.hardware.device import KV_BLOCK_TOKENS, PROFILE_SAMPLED_ROWS, RooflineParams
from simlab.hardware.precision import WEIGHT_BYTES
from simlab.hardware.roofline import RooflineCostModel
from simlab.hardware.roofline_build import build_roofline
from simlab.hardware.specs import GIB, get_gpu, get_model

from tests.helpers import simulate

REPO = Path(__file__).resolve().parents[1]
FLASH_ENTRY_FP8 = 448 + 64 * 2 + 448 // 64 + 1  # vLLM's FP8 entry: no-rope FP8, rope bf16, scales, one pad byte
INDEX_KEY_FP8 = 128 + 4


def v4(model="deepseek-v4-flash", calibration="none", **fields):
    base = {"kind": "roofline", "gpu": "h200", "model": model, "calibration": calibration, "precision": "fp8",
            "kv_precision": "fp8", "tensor_parallel": 8, "cuda_graph_buckets": "none"}
    return build_roofline(RooflineHardware(**{**base, **fields}))


@pytest.mark.parametrize("name,total,active", [
    ("deepseek-v4-flash", (283.5e9, 284.5e9), (12.5e9, 13.5e9)),  # "284B total, 13B activated"
    ("deepseek-v4-pro", (1.55e12, 1.65e12), (48.5e9, 49.5e9)),  # "1.6T total, 49B activated"
])
def test_parameter_counts_round_to_deepseeks_stated_sizes(name, total, active):
    """The counts (without the MTP module, and the active ones without the embedding's row lookup, as for V3's
    37B) fall in the interval each stated figure rounds from."""
    model = get_model(name)
    assert total[0] <= model.total_params < total[1]
    assert active[0] <= model.active_params < active[1]


def test_the_kv_layout_worked_by_hand():
    flash, pro = get_model("deepseek-v4-flash"), get_model("deepseek-v4-pro")
    assert FLASH_ENTRY_FP8 == 584
    # 21 CSA layers hold an entry and an indexer key every 4 tokens, 20 HCA layers an entry every 128
    assert flash.kv_bytes_per_token(None, 1) == 21 * (584 + 132) / 4 + 20 * 584 / 128 == 3850.25
    # bf16: 1,024-byte entries and 256-byte indexer keys; DeepSeek states 9.62 GiB a V4-Pro sequence at 1M tokens
    assert pro.kv_bytes_per_token(None, 2) == 30 * (1024 + 256) / 4 + 31 * 1024 / 128 == 9848
    assert round(pro.kv_bytes_per_token(None, 2) * 2**20 / GIB, 2) == 9.62
    # a decode query reads, linearly in its context, only the indexer keys and the HCA entries
    assert flash.kv_read_bytes_per_context_token(None, 1) == 21 * 132 / 4 + 20 * 584 / 128


def test_the_decode_read_grows_with_the_window_and_top_k_then_only_linearly():
    """One request, memory-bound: the step's slope in context is every layer's window entry, CSA's selected
    entry every 4 tokens and the linear part below the window; past 4 x top-k (2,048 tokens) only the linear
    part remains."""
    cm = v4()
    bw = cm.device.bytes_per_s
    linear = 21 * INDEX_KEY_FP8 / 4 + 20 * FLASH_ENTRY_FP8 / 128
    short = (cm.verify_s(1, 64, 1) - cm.verify_s(1, 32, 1)) / 32
    assert short == pytest.approx((linear + 43 * 584 + 21 * 584 / 4) / bw, rel=1e-9)
    long = (cm.verify_s(1, 40_000, 1) - cm.verify_s(1, 20_000, 1)) / 20_000
    assert long == pytest.approx(linear / bw, rel=1e-9)
    # between window and top-k: CSA's selected entries still grow
    middle = (cm.verify_s(1, 1_024, 1) - cm.verify_s(1, 512, 1)) / 512
    assert middle == pytest.approx((linear + 21 * 584 / 4) / bw, rel=1e-9)


def test_the_window_is_reserved_per_sequence_out_of_the_kv_budget():
    cm = v4()
    model = cm.model
    window = 43 * 128 * FLASH_ENTRY_FP8
    usable = cm.params.gpu_memory_utilization * cm.gpu.memory_bytes
    budget = usable - cm.weight_bytes_per_gpu - cm.activation_reserve_bytes() - PROFILE_SAMPLED_ROWS * window
    tokens = int(budget // model.kv_bytes_per_token(1, 1)) // KV_BLOCK_TOKENS * KV_BLOCK_TOKENS
    assert cm.kv_cache_tokens() == tokens


def test_mxfp4_experts_take_their_own_bytes_and_the_rest_stays_fp8():
    fp8, mx = v4(), v4(expert_precision="mxfp4")
    routed = get_model("deepseek-v4-flash").routed_expert_params
    assert WEIGHT_BYTES["mxfp4"] == 0.5 + 1 / 32
    assert fp8.weight_bytes - mx.weight_bytes == pytest.approx(routed * (1 - 0.53125), rel=1e-12)
    assert mx.weight_read_bytes == fp8.weight_read_bytes  # attention, shared experts and routers: still FP8
    assert mx.verify_s(64, 64 * 4000, 64) < fp8.verify_s(64, 64 * 4000, 64)
    # DeepSeek-V4-Pro fits 8 H200s only with its experts in MXFP4
    with pytest.raises(InputError):
        v4("deepseek-v4-pro")
    assert (v4("deepseek-v4-pro", expert_precision="mxfp4").kv_cache_tokens() or 0) > 0


def test_expert_precision_on_a_dense_model_names_the_field():
    with pytest.raises(InputError) as info:
        build_roofline(RooflineHardware(kind="roofline", gpu="h200", model="qwen3-8b", expert_precision="mxfp4"))
    assert info.value.field == "hardware.expert_precision" and info.value.value == "mxfp4"


def test_the_mtp_layer_attends_a_window_so_its_cost_stops_growing_with_context():
    cm = v4(calibration="auto", stack="sglang")
    at = [cm.draft_s("mtp", 1, 32, 32 * c) for c in (64, 128, 1_000, 100_000)]
    assert at[0] < at[1] == at[2] == at[3]


@pytest.mark.parametrize("calibration", ["none", "auto"])
@pytest.mark.parametrize("fields", [{}, {"tensor_parallel": 1, "expert_parallel": 8, "expert_precision": "mxfp4"}])
def test_scalar_and_array_costs_agree_bit_for_bit(calibration, fields):
    cm = v4(calibration=calibration, stack="sglang", **fields)
    tokens = np.array([1.0, 6.0, 64.0, 320.0, 2048.0])
    requests = np.array([1.0, 6.0, 16.0, 64.0, 256.0])
    context = requests * np.array([10.0, 100.0, 1_500.0, 8_000.0, 200_000.0])
    array = cm.verify_s(tokens, context, requests)
    assert [float(x) for x in array] == [cm.verify_s(float(b), float(c), float(r))
                                         for b, c, r in zip(tokens, context, requests)]


def test_prefill_attention_is_far_below_full_attentions():
    """A 32k-token prompt: V4's attention FLOPs per prompt token are capped (window, top-k) plus the indexer's and
    HCA's linear part, so the prefill grows nearly linearly where MLA's grows with the square."""
    cm = v4()
    short, long = cm.prefill_s(4096), cm.prefill_s(32768)
    assert long / short < 8 * 1.2  # 8x the tokens, at most 20 % more than linear
    params = RooflineParams(precision="fp8", kv_precision="fp8")
    full = RooflineCostModel(get_gpu("h200"), get_model("deepseek-v3"), tensor_parallel=8, params=params)
    assert full.prefill_s(32768) / full.prefill_s(4096) > long / short


def test_the_shipped_v4_flash_scenario_runs_and_dspark_beats_mtp_1():
    path = REPO / "scenarios" / "deepseek-v4-flash.yaml"
    hardware = yaml.safe_load(path.read_text(encoding="utf-8"))["hardware"]
    assert hardware["model"] == "deepseek-v4-flash" and hardware["expert_precision"] == "mxfp4"
    outcomes = simulate(path)
    speed = {name: o.metrics["output_throughput"] for name, o in outcomes.items()}
    assert speed["dspark-5"] > speed["mtp-1"] > speed["no-spec"]


def test_an_exported_v4_table_keeps_the_rooflines_kv_per_token(tmp_path):
    """A table exported from a V4 roofline moves the same KV per token as the roofline (disaggregation's
    transfer), and its drafter layers, on a sliding window, none per token."""
    from simlab.hardware.export import table_dict, write_table
    from simlab.hardware.profiles import load_profile

    cm = v4(calibration="auto", stack="sglang")
    path = tmp_path / "v4.yaml"
    write_table(path, table_dict(cm, generator="test", date="2026-12-02"))
    table = load_profile(path)
    assert table.kv_transfer_bytes_per_token() == cm.kv_transfer_bytes_per_token()
    assert table.draft_kv_bytes_per_token("mtp") == cm.draft_kv_bytes_per_token("mtp") == 0.0
