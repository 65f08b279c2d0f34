"""The contract's three scenario files run unchanged (copies in tests/contract/, traces by shipped name) and
write the results folder with every promised key and column."""

import json

import pandas as pd
import pytest

from helpers import CONTRACT_DIR, run_cli

LATENCY = [f"{stat}_{name}_ms" for name in ("ttft", "tpot", "itl", "e2el") for stat in ("mean", "median", "p90", "p99")]
METRICS = [
    "completed", "duration_s", "request_throughput", "output_throughput", "total_token_throughput",
    "request_goodput", "median_user_tok_s", "spec_decode_acceptance_length", "spec_decode_acceptance_rate",
    "spec_decode_per_position_acceptance_rates", "mean_verify_tokens_per_step", "mean_batch_requests", "sim_wall_s",
] + LATENCY
REQUEST_COLUMNS = ["arm", "id", "arrival_s", "prompt_tokens", "output_tokens", "domain", "first_token_s",
                   "finish_s", "steps"]
STEP_COLUMNS = ["arm", "t_s", "num_requests", "batch_tokens", "verify_tokens", "accepted_tokens", "step_s"]


@pytest.mark.parametrize("name", ["closed_loop.yaml", "inline.yaml", "full.yaml"])
def test_contract_file_runs_and_writes_the_promised_results(tmp_path, name):
    out = tmp_path / "results"
    code, stdout, stderr = run_cli("run", str(CONTRACT_DIR / name), "--out", str(out), "--no-plot")
    assert code == 0, stderr
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) >= {"scenario", "arms"}
    arm_names = [arm.get("name") for arm in summary["scenario"]["arms"]]
    assert list(summary["arms"]) == arm_names
    for arm, metrics in summary["arms"].items():
        missing = [key for key in METRICS if key not in metrics]
        assert not missing, (arm, missing)
        assert metrics["completed"] > 0
        assert (metrics["request_goodput"] is None) == (summary["scenario"]["slo"] is None)
    requests = pd.read_csv(out / "requests.csv")
    steps = pd.read_csv(out / "steps.csv.gz")
    assert list(requests.columns[: len(REQUEST_COLUMNS)]) == REQUEST_COLUMNS
    assert set(STEP_COLUMNS) <= set(steps.columns)
    assert set(requests.arm) == set(arm_names) == set(steps.arm)
    assert arm_names[0] in stdout  # the comparison table
