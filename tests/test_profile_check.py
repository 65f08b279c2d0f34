"""``simlab profiles check``: the stated error against public engine measurements is recomputed from the data set
and must not drift from hw_profiles/calibration/engine_error.yaml (which docs/calibration.md shows)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from simlab.calibration.profile_check import (
    ERROR_FILE,
    check_records,
    error_table,
    fitted_ids,
    load_records,
    num_simulated_requests,
    record_scenario,
)

REPO = Path(__file__).resolve().parents[1]
STATED = REPO / "hw_profiles" / "calibration" / ERROR_FILE


@pytest.fixture(scope="module")
def rows():
    return check_records(load_records())


def test_every_record_has_its_source_and_a_simulable_setting():
    records = load_records()
    assert len(records) >= 15 and len({r.id for r in records}) == len(records)
    for r in records:
        assert r.url.startswith("https://") and r.source
        assert r.mean_tpot_ms is not None or r.output_throughput_tok_s is not None
    scenario = record_scenario(records[0])
    assert scenario["workload"]["kind"] == "closed_loop"
    assert scenario["workload"]["concurrency"] == records[0].concurrency
    assert scenario["hardware"]["stack"] == records[0].engine
    assert num_simulated_requests(records[0]) == min(records[0].num_prompts, max(4 * records[0].concurrency, 64))


def test_the_recomputed_error_is_the_stated_one(rows):
    stated = yaml.safe_load(STATED.read_text(encoding="utf-8"))
    by_key = {(e["id"], e["metric"]): e for e in stated["records"]}
    assert len(by_key) == len(rows), "engine_error.yaml is stale: run python scripts/calibrate_hardware.py"
    for row in rows:
        entry = by_key[(row.record.id, row.metric)]
        assert entry["role"] == row.role and entry["measured"] == row.measured
        assert row.simulated == pytest.approx(entry["simulated"], rel=1e-5), row.record.id
    assert error_table(rows) == stated["summary"]


def test_the_leave_one_source_out_error_is_the_stated_one():
    from simlab.calibration.profile_check import leave_one_source_out

    stated = yaml.safe_load(STATED.read_text(encoding="utf-8"))["leave_one_source_out"]
    assert leave_one_source_out() == stated
    assert {e["left_out"] for e in stated} >= {"gpustack-perflab-qwen3-8b-h100-latency", "vllm-blog-fp8-kvcache"}


def test_fitted_and_held_out_records_are_those_the_fit_says(rows):
    used = fitted_ids()
    assert used and all((row.role == "fitted") == (row.record.id in used) for row in rows)
    held_out = {row.record.source for row in rows if row.role == "held out"}
    # sources never fitted on: every one of their rows is held out
    for source in ("vllm-pr-16937", "sglang-docs-spec", "gpustack-perflab-qwen3-32b-h100"):
        assert source in held_out
        assert all(row.role == "held out" for row in rows if row.record.source == source)


def test_the_command_prints_every_record_and_the_summary_and_exits_0():
    run = subprocess.run([sys.executable, "-m", "simlab", "profiles", "check"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "gpustack-perflab-qwen3-8b" in run.stdout and "held out" in run.stdout and "fitted" in run.stdout
    assert "Error per GPU x stack x precision" in run.stdout


def test_the_command_checks_a_named_profile_on_its_own_records_and_rejects_an_unknown_name():
    named = subprocess.run([sys.executable, "-m", "simlab", "profiles", "check", "h100-sxm_qwen3-8b", "-q"],
                           capture_output=True, text=True)
    assert named.returncode == 0, named.stderr
    assert "h100-sxm" in named.stdout and "vllm" in named.stdout
    none = subprocess.run([sys.executable, "-m", "simlab", "profiles", "check", "a100-80g_qwen3-4b"],
                          capture_output=True, text=True)
    assert none.returncode == 0 and "its error is unknown" in none.stdout
    bad = subprocess.run([sys.executable, "-m", "simlab", "profiles", "check", "h100-sxm_nope"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "NAME" in bad.stderr and "Traceback" not in bad.stderr


def test_records_are_replayed_with_paged_kv_that_preempts_when_it_fills():
    """The engines page their KV and preempt; a saturation run whose KV fills up preempts in the replay too, and
    the same run with prompt and output reserved at admission never does."""
    from simlab.runner import run_scenario

    record = next(r for r in load_records() if r.id.endswith("qwen3-32b-bf16-kvbf16-2000x100-c500"))
    scenario = record_scenario(record)
    assert scenario["engine"]["kv_policy"] == "paged"
    paged = next(iter(run_scenario(scenario, plot=False).arms.values()))
    scenario["engine"]["kv_policy"] = "reserve"
    reserved = next(iter(run_scenario(scenario, plot=False).arms.values()))
    assert paged["num_preemptions"] > 0 and reserved["num_preemptions"] == 0
    assert paged["mean_tpot_ms"] > reserved["mean_tpot_ms"]  # recomputed prompts lengthen the steps
