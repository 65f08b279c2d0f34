"""The opening of every sweep and what-if page: the question, what was simulated (model, GPUs, engine, load,
SLO) and the answer computed from the results, also first in sweep.json / whatif.json and last on stdout."""

import json
from pathlib import Path

import pytest
from helpers import run_cli, write_scenario
from studies_scenarios import linear_scenario, small_sweep_scenario

from simlab.studies.study_setting import load_text, scenario_setting
from simlab.studies.study_warnings import moe_notice, study_warnings
from simlab.studies.sweep_data import read_sweep_folder
from simlab.studies.sweep_verdict import sweep_verdict
from simlab.studies.whatif_verdict import whatif_verdict

REPO = Path(__file__).resolve().parents[1]
ARMS = {"no-spec": ("none", "none", 0), "fixed-3": ("dspark", "fixed", 3), "hw": ("dspark", "hardware_aware", 7),
        "oracle": ("dspark", "oracle", 7)}


def _sweep(folder: Path, values: dict, levels: tuple = ()) -> Path:
    """A sweep folder over concurrency 1, 8 and 64 with the given (load, arm) -> (tok/s/GPU, user tok/s)."""
    loads = sorted({load for load, _ in values})
    setting = {"model": "qwen3-8b", "moe": False, "gpu": "h100-sxm", "gpus_per_replica": 1, "stack": "vllm",
               "release": "0.34.0", "replicas": 1, "workload": "closed_loop", "arrival_rate_rps": None, "slo": {}}
    points = [{"id": f"p{load}", "values": {"workload.concurrency": load}, "setting": {**setting, "users": load}}
              for load in loads]
    doc = {"name": "synthetic", "fields": ["workload.concurrency"], "points": points, "arms": list(ARMS),
           "arm_kinds": {a: {"method": m, "scheduler": s, "gamma": g} for a, (m, s, g) in ARMS.items()},
           "scenario_sha256": "0" * 64, "load": None, "scenario": {"sweep": {"grid": {}}},
           "sla_user_tok_s": list(levels)}
    folder.mkdir()
    (folder / "sweep.json").write_text(json.dumps(doc))
    lines = ["point,workload.concurrency,arm,error,output_throughput_per_gpu,median_user_tok_s"]
    lines += [f"p{load},{load},{arm},,{thr!r},{user!r}" for (load, arm), (thr, user) in values.items()]
    (folder / "sweep.csv").write_text("\n".join(lines) + "\n")
    return folder


def test_the_sweep_verdict_names_the_winners_and_where_speculation_stops_paying(tmp_path):
    values = {}
    for load, base, fixed, hw, oracle in ((1, 100.0, 150.0, 180.0, 300.0), (8, 400.0, 500.0, 460.0, 900.0),
                                          (64, 1000.0, 900.0, 1005.0, 2000.0)):
        for arm, thr in zip(ARMS, (base, fixed, hw, oracle)):
            values[(load, arm)] = (thr, thr / load)
    text = sweep_verdict(read_sweep_folder(_sweep(tmp_path / "s", values)))
    # the oracle knows outcomes: never the winner; hw wins at 1 user by 80 %, fixed-3 nothing at 64 users
    assert text.startswith("At 1 user, hw gives the most output tokens/s per GPU, 180, +80% over no-spec")
    assert "at 64 users, hw gives the most output tokens/s per GPU, 1,005, +0.5% over no-spec" in text
    assert "From 64 users on, no arm beats no-spec's output tokens/s per GPU by more than 1%" in text
    assert "oracle" not in text


def test_the_sweep_verdict_says_where_a_per_user_speed_sla_stops_being_reachable(tmp_path):
    values = {}
    for load, base, fixed, hw, oracle in ((1, 100.0, 150.0, 180.0, 300.0), (8, 400.0, 500.0, 460.0, 900.0),
                                          (64, 1000.0, 900.0, 1005.0, 2000.0)):
        for arm, thr in zip(ARMS, (base, fixed, hw, oracle)):
            values[(load, arm)] = (thr, thr / load)  # user tok/s: 100 for no-spec at 1 user, 62.5 fixed-3 at 8
    text = sweep_verdict(read_sweep_folder(_sweep(tmp_path / "s", values, levels=(50, 150, 500))))
    assert ("The fastest per-user speed SLA some arm meets is ≥ 150 tokens/s per user, where hw gives the most, "
            "180 tokens/s per GPU (no-spec does not reach it)") in text
    assert ("Over the per-user speed SLAs no-spec meets (≥ 50 tokens/s per user) the best arm (fixed-3) gives +25% "
            "tokens/s per GPU over no-spec") in text
    assert "No arm reaches ≥ 500 tokens/s per user" in text


def test_the_sweep_verdict_changes_with_the_results(tmp_path):
    values = {(load, arm): (thr, 10.0) for load in (1, 8, 64)
              for arm, thr in zip(ARMS, (100.0, 90.0, 95.0, 99.0))}
    text = sweep_verdict(read_sweep_folder(_sweep(tmp_path / "s", values)))
    assert "no-spec gives the most" in text
    assert "No arm beats no-spec's output tokens/s per GPU by more than 1% at any load" in text


def test_a_scenario_setting_gives_the_arrival_rate_of_a_scaled_trace():
    data = {**linear_scenario(), "workload": {"kind": "trace", "path": "azure-conv-2023", "time_scale": 0.1,
                                              "max_requests": 500}}
    slower = {**data, "workload": {**data["workload"], "time_scale": 0.2}}
    fast, slow = (scenario_setting(d, REPO / "scenarios" / "x.yaml") for d in (data, slower))
    assert fast["arrival_rate_rps"] == pytest.approx(2 * slow["arrival_rate_rps"], rel=1e-3)  # half the gaps
    assert fast["users"] is None and "requests/s arriving" in load_text([fast, slow])


def test_moe_pages_say_so_and_carry_the_gain_caution():
    assert moe_notice(["qwen3-8b"]) is None
    assert "mixture of experts" in moe_notice(["deepseek-v3"])
    warnings = study_warnings([{"model": "deepseek-v3"}], {"mtp-1": {"method": "mtp"}})
    assert len(warnings) == 2 and "upper bound" in warnings[1]
    assert len(study_warnings([{"model": "deepseek-v3"}], {"no-spec": {"method": "none"}})) == 1


def test_whatif_verdict_names_the_fewest_replicas():
    doc = {"sla": {"p90_tpot_ms": ["<=", 15]}, "vary": "engine.replicas", "find": "smallest", "range": [1, 16],
           "baseline": "no-spec",
           "arms": {"no-spec": {"load": 9, "metrics": {"num_gpus": 9}, "at_bound": False, "gain_vs_baseline": 0.0},
                    "dspark": {"load": 6, "metrics": {"num_gpus": 6}, "at_bound": False, "gain_vs_baseline": 0.5},
                    "eagle": {"load": None, "metrics": None, "at_bound": False, "gain_vs_baseline": None}}}
    text = whatif_verdict(doc)
    assert text.startswith("dspark needs the fewest: engine.replicas 6, 6 GPUs; no-spec needs engine.replicas 9")
    assert "eagle meets it nowhere in the range" in text


def test_sweep_and_whatif_print_their_verdict_last_and_store_it_first(tmp_path):
    sweep_file = write_scenario(tmp_path, small_sweep_scenario({"grid": {"workload.concurrency": [1, 4]}}))
    code, stdout, stderr = run_cli("sweep", str(sweep_file), "--out", str(tmp_path / "sw"), "-w", "1", "-q")
    assert code == 0, stderr
    doc = json.loads((tmp_path / "sw" / "sweep.json").read_text())
    assert list(doc)[0] == "verdict" and stdout.strip().splitlines()[-1] == doc["verdict"]
    page = (tmp_path / "sw" / "report.html").read_text()
    assert page.index(doc["verdict"].split(",")[0]) < page.index("<img")
    scenario = write_scenario(tmp_path, linear_scenario(), name="linear.yaml")
    code, stdout, stderr = run_cli("whatif", str(scenario), "--sla", "p90_tpot_ms<=30.25", "--vary",
                                   "workload.concurrency", "--high", "32", "--out", str(tmp_path / "wi"), "-w", "1")
    assert code == 0, stderr
    doc = json.loads((tmp_path / "wi" / "whatif.json").read_text())
    assert list(doc)[0] == "verdict" and stdout.strip().splitlines()[-1] == doc["verdict"]
