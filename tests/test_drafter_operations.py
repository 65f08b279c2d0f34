"""Drafters as operations (simlab.hardware.drafter_operations): each method's forwards from the target's own layer
operations, priced by the kernel curves, with the calibrated roofline's host times."""

from __future__ import annotations

from pathlib import Path

import pytest

from simlab.config.hardware import OperationsHardware, RooflineHardware
from simlab.hardware import build_cost_model
from simlab.hardware.drafter_operations import DRAFT_BATCH_TOKENS, drafter_curves, layer_s
from simlab.hardware.kernel_curves import load_curves
from simlab.hardware.operations import decode_operations, price
from simlab.hardware.specs import GPUS, get_model


def test_a_drafter_layer_is_the_mean_of_the_targets_layers_at_no_context():
    model, curves = get_model("qwen3-8b"), load_curves(GPUS["h100-sxm"])
    parts = price(decode_operations(model, num_requests=16, context_per_request=0.0), curves)
    assert layer_s(model, curves, 16, 1, "bf16") == pytest.approx(
        (parts["total"] - parts["lm_head"] - parts["sampler"]) / 36, rel=1e-12)


def test_each_methods_curve_adds_its_own_pieces_and_the_host_times():
    model, curves = get_model("qwen3-8b"), load_curves(GPUS["h100-sxm"])

    class Params:
        draft_forward_overhead_s, spec_round_overhead_s, draft_layers, eagle3_draft_vocab = 1e-4, 5e-4, 5, 32000

    out = drafter_curves(model, curves, Params)
    assert out["autoregressive"]["batch_tokens"] == list(DRAFT_BATCH_TOKENS)
    layer = layer_s(model, curves, 8, 1, "bf16")
    i = DRAFT_BATCH_TOKENS.index(8)
    # a DFlash block of 8 tokens: 5 layers, the 5h -> h fusion, the full LM head and sampling, one forward and one
    # round of host time
    block = out["parallel"]["step_s"][i]
    assert block > 5 * layer + 1e-4 + 5e-4 and block < 5 * layer + 1e-4 + 5e-4 + 1e-3
    # an EAGLE-3 step: one layer with its 32k head (less than a DFlash block of the same tokens)
    step = out["autoregressive"]["step_s"][i]
    assert layer + 1e-4 < step < block
    assert out["autoregressive_round"]["step_s"][i] > 5e-4  # the fusion and the round's host time
    heads = out["sequential_head"]["step_s"]
    assert all(b >= a for a, b in zip(heads, heads[1:]))  # the rank-256 head grows with its rows


def test_kind_operations_drafters_are_operations_near_the_rooflines():
    """On Qwen3-8B on an H100 the operations' drafters are within 15 % of the calibrated roofline's (both read no
    context here), with the same host times."""
    ops = build_cost_model(OperationsHardware(kind="operations", gpu="h100-sxm", model="qwen3-8b"),
                           base_dir=Path("."), file=None)
    roofline = build_cost_model(RooflineHardware(kind="roofline", gpu="h100-sxm", model="qwen3-8b"),
                                base_dir=Path("."), file=None)
    assert "drafter_operations" in ops.describe()["provenance"]["drafter"]
    for method, gamma in (("eagle3", 3), ("dflash", 7), ("dspark", 7)):
        for requests in (1, 8, 64):
            assert ops.draft_s(method, gamma, requests) == pytest.approx(roofline.draft_s(method, gamma, requests),
                                                                         rel=0.15)
    # a mixture of experts' drafter layer routes its tokens to the experts they select: DFlash's block of 7 x 64
    # tokens reads more experts than one of 7
    moe = build_cost_model(OperationsHardware(kind="operations", gpu="h100-sxm", model="qwen3-30b-a3b"),
                           base_dir=Path("."), file=None)
    assert moe.draft_s("dflash", 7, 64) > moe.draft_s("dflash", 7, 1)


def test_the_weakly_specified_runs_say_what_their_sources_leave_out():
    """hw_profiles/calibration/weak_engine_runs.csv: every row names its source and locator and what is unstated,
    on a model and GPU simlab knows (docs/operations.md replays them under every reading)."""
    import pandas as pd

    from simlab.hardware.specs import get_gpu

    runs = pd.read_csv(Path(__file__).resolve().parents[1] / "hw_profiles" / "calibration"
                       / "weak_engine_runs.csv", comment="#")
    assert len(runs) == 6 and runs.concurrency.between(16, 127).all()
    for row in runs.itertuples():
        assert row.unstated and row.url.startswith("https://") and row.locator
        get_model(row.model)
        for gpu in ("a100-40g", "a100-80g") if row.gpu == "a100" else (row.gpu,):
            get_gpu(gpu)


def test_a_tables_drafter_adds_its_forwards_attention_over_the_drafting_requests_context():
    """``context_token_s`` on a table's draft curve: an autoregressive drafter pays it once a drafted position (a
    tree once a depth), a parallel block once a round; on kind: operations it is the drafter layers' KV read, near
    what the calibrated roofline's drafters add for the same context."""
    from helpers import flat_table

    from simlab.config.hardware import TableHardware
    from simlab.hardware.table import TableCostModel

    data = flat_table(0.01, autoregressive_s=0.001, parallel_s=0.002, head_s=0.0005)
    data["draft"]["autoregressive"]["context_token_s"] = 1e-9
    data["draft"]["parallel"]["context_token_s"] = 5e-9
    cost = TableCostModel(TableHardware(**data))
    assert cost.draft_s("eagle3", 3, 8, 80_000.0) == pytest.approx(3 * 0.001 + 3 * 1e-9 * 80_000, rel=1e-12)
    assert cost.draft_s("dflash", 7, 8, 80_000.0) == pytest.approx(0.002 + 5e-9 * 80_000, rel=1e-12)
    assert cost.draft_s("dspark", 7, 8, 80_000.0) == pytest.approx(0.002 + 7 * 0.0005 + 5e-9 * 80_000, rel=1e-12)
    assert cost.tree_draft_s("eagle3", 4, 2, 8, 80_000.0) == pytest.approx(
        0.001 + 3 * 0.001 + 4 * 1e-9 * 80_000, rel=1e-12)
    ops = build_cost_model(OperationsHardware(kind="operations", gpu="h100-sxm", model="qwen3-8b"),
                           base_dir=Path("."), file=None)
    roofline = build_cost_model(RooflineHardware(kind="roofline", gpu="h100-sxm", model="qwen3-8b"),
                                base_dir=Path("."), file=None)
    for method, gamma in (("eagle3", 3), ("dflash", 7)):
        added = ops.draft_s(method, gamma, 64, 64 * 8000.0) - ops.draft_s(method, gamma, 64, 0.0)
        assert added == pytest.approx(roofline.draft_s(method, gamma, 64, 64 * 8000.0)
                                      - roofline.draft_s(method, gamma, 64, 0.0), rel=0.15)


def test_mtp_takes_its_own_step_where_a_table_gives_one():
    """A table's ``mtp`` and ``mtp_round`` curves price MTP (the model's layer, its 2h -> h projection and the full
    LM head); without them MTP reads EAGLE-3's autoregressive curves. kind: operations writes them: near the
    calibrated roofline's MTP, where EAGLE-3's step (a 32k-vocabulary head) was a third below it at 512 requests."""
    from helpers import flat_table

    from simlab.config.hardware import TableHardware
    from simlab.hardware.table import TableCostModel

    data = flat_table(0.01, autoregressive_s=0.001)
    data["draft"]["autoregressive_round"] = {"step_s": 0.0002}
    plain = TableCostModel(TableHardware(**data))
    assert plain.draft_s("mtp", 2, 8) == pytest.approx(plain.draft_s("eagle3", 2, 8), rel=1e-12)
    data["draft"]["mtp"] = {"step_s": 0.003, "context_token_s": 1e-9}
    data["draft"]["mtp_round"] = {"step_s": 0.0005}
    own = TableCostModel(TableHardware(**data))
    assert own.draft_s("mtp", 2, 8, 1000.0) == pytest.approx(2 * 0.003 + 0.0005 + 2 * 1e-9 * 1000, rel=1e-12)
    assert own.draft_s("eagle3", 2, 8) == pytest.approx(2 * 0.001 + 0.0002, rel=1e-12)
    assert own.draft_context("mtp") == (1e-9, True)
    ops = build_cost_model(OperationsHardware(kind="operations", gpu="h100-sxm", model="qwen3-8b"),
                           base_dir=Path("."), file=None)
    roofline = build_cost_model(RooflineHardware(kind="roofline", gpu="h100-sxm", model="qwen3-8b"),
                                base_dir=Path("."), file=None)
    for requests in (1, 64, 512):
        assert ops.draft_s("mtp", 1, requests) == pytest.approx(roofline.draft_s("mtp", 1, requests), rel=0.1)
    assert ops.draft_s("eagle3", 1, 512) < 0.7 * roofline.draft_s("mtp", 1, 512)
