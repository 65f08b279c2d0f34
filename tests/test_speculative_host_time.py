"""The serving stack's host time of speculative decoding (stage 5 of the fit, simlab.calibration.stages.speculative):
paid once per round and once per drafter forward, fitted on runs at several draft lengths, and shipped."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simlab.config.hardware import RooflineHardware
from simlab.calibration.stages.serving import ServingRecord
from simlab.calibration.stages.speculative import fit_host_time, predict_speculative
from simlab.hardware.device import RooflineParams
from simlab.hardware.export import ExportSettings, _roofline_table
from simlab.hardware.roofline_build import build_roofline

ROUND_S, FORWARD_S = 8e-4, 6e-5


def roofline(**fields):
    base = {"kind": "roofline", "gpu": "h200", "model": "llama-3.1-8b", "calibration": "none",
            "cuda_graph_buckets": "none"}
    return build_roofline(RooflineHardware(**{**base, **fields}))


@pytest.mark.parametrize("method", ["eagle3", "mtp", "dflash", "dspark"])
def test_the_round_overhead_is_paid_once_per_round_whatever_the_draft_length(method):
    plain, host = roofline(), roofline(spec_round_overhead_s=ROUND_S, draft_forward_overhead_s=FORWARD_S)
    forwards = {"eagle3": lambda g: g, "mtp": lambda g: g, "dflash": lambda g: 1, "dspark": lambda g: 1}[method]
    for gamma in (1, 3, 7):
        for requests in (1, 16, 128):
            extra = host.draft_s(method, gamma, requests, requests * 500.0) - plain.draft_s(
                method, gamma, requests, requests * 500.0)
            assert extra == pytest.approx(ROUND_S + forwards(gamma) * FORWARD_S, rel=1e-9)
    assert host.draft_s(method, 0, 8) == 0.0 and host.draft_s(method, 3, 0) == 0.0  # no round, no host time


def test_a_tree_round_pays_the_round_overhead_once_and_one_forward_per_depth():
    plain, host = roofline(), roofline(spec_round_overhead_s=ROUND_S, draft_forward_overhead_s=FORWARD_S)
    for depth, topk in ((1, 1), (4, 4), (6, 8)):
        extra = host.tree_draft_s("eagle3", depth, topk, 8, 4000.0) - plain.tree_draft_s("eagle3", depth, topk, 8,
                                                                                           4000.0)
        assert extra == pytest.approx(ROUND_S + depth * FORWARD_S, rel=1e-9)


def test_an_exported_table_charges_the_host_time_to_its_drafter_curves():
    cm = roofline(spec_round_overhead_s=ROUND_S, draft_forward_overhead_s=FORWARD_S)
    settings = ExportSettings()
    table = _roofline_table(cm, settings, generator="test", date="2026-12-02")
    gamma, per_request = settings.draft_gamma, settings.draft_context_per_request
    block = table["draft"]["parallel"]["step_s"][0]  # one request's block of gamma tokens
    assert block == pytest.approx(cm.drafter.parallel_block_s(gamma, 1, per_request) + ROUND_S + FORWARD_S,
                                  rel=1e-5)  # the table holds 6 digits
    per_position = table["draft"]["autoregressive"]["step_s"][0]
    assert per_position * gamma == pytest.approx(cm.draft_s("eagle3", gamma, 1, per_request), rel=1e-5)


def test_the_field_is_left_out_of_a_scenarios_dump_unless_given():
    plain = RooflineHardware(kind="roofline", gpu="h200", model="qwen3-8b")
    assert "spec_round_overhead_s" not in plain.model_dump()
    given = RooflineHardware(kind="roofline", gpu="h200", model="qwen3-8b", spec_round_overhead_s=1e-3)
    assert given.model_dump()["spec_round_overhead_s"] == 1e-3


def _record(gamma: int, tau: float, throughput: float = 1.0) -> ServingRecord:
    return ServingRecord(id=f"r{gamma}-{tau}", source="synthetic", engine="sglang", gpu="h200", tensor_parallel=1,
                         model="llama-3.1-8b", precision="bf16", kv_precision="bf16", input_tokens=256,
                         output_tokens=512, concurrency=1, num_prompts=64, max_num_seqs=1024, max_batch_tokens=8192,
                         mean_tpot_ms=None, output_throughput_tok_s=throughput, url="-", spec_method="eagle3",
                         num_draft_tokens=gamma, acceptance_length=tau)


def test_the_fit_recovers_the_host_times_that_made_the_runs():
    """Runs predicted with known host times at draft lengths 3, 5 and 7 and three acceptance lengths each: the
    fit gives those times back (the two are told apart by the draft length)."""
    base = RooflineParams(calibration="none")
    truth = replace(base, spec_round_overhead_s=ROUND_S, draft_forward_overhead_s=FORWARD_S)
    records = []
    for gamma in (3, 5, 7):
        for tau in (2.0, 3.0, gamma * 0.8):
            made = predict_speculative(_record(gamma, tau), truth)["output_throughput_tok_s"]
            records.append(_record(gamma, tau, made))
    values, errors, rms = fit_host_time(records, {"h200": base})
    assert values["spec_round_overhead_s"] == pytest.approx(ROUND_S, rel=1e-4)
    assert values["draft_forward_overhead_s"] == pytest.approx(FORWARD_S, rel=1e-3)
    assert rms < 1e-6


def test_the_shipped_stacks_carry_the_fitted_host_time():
    from simlab.hardware.calibration import fitted_values, load_fitted

    fit = load_fitted()["speculative"]
    assert len(fit["sglang"]["fitted_on"]) >= 6 and fit["vllm"]["borrowed"] == "sglang"
    for stack in ("sglang", "vllm"):
        values = fitted_values("h100-sxm", stack)
        assert values["spec_round_overhead_s"] == fit[stack]["spec_round_overhead_s"] > 0
        assert values["draft_forward_overhead_s"] == fit[stack]["draft_forward_overhead_s"] >= 0
    cm = build_roofline(RooflineHardware(kind="roofline", gpu="b200", model="qwen3-8b", stack="sglang"))
    assert cm.params.spec_round_overhead_s == fit["sglang"]["spec_round_overhead_s"]
    # a scenario's own value wins over the fit's
    mine = build_roofline(RooflineHardware(kind="roofline", gpu="b200", model="qwen3-8b", stack="sglang",
                                           spec_round_overhead_s=0.0))
    assert mine.params.spec_round_overhead_s == 0.0
    assert np.isclose(cm.draft_s("dflash", 15, 1) - mine.draft_s("dflash", 15, 1),
                      fit["sglang"]["spec_round_overhead_s"], rtol=1e-9)
