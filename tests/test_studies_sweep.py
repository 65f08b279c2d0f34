"""Sweeps: grid x zip expansion, results independent of the executor and its workers, resume, failures
recorded, and a sweep killed mid-way losing only the points in flight."""

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from helpers import run_cli, write_scenario
from studies_scenarios import small_sweep_scenario

from simlab.common.outputs import read_manifest
from simlab.studies.grid import data_sha256, read_sweep
from simlab.studies.progress import StudyProgress
from simlab.studies.sweep import run_sweep

REPO = Path(__file__).resolve().parents[1]
GRID = {"grid": {"workload.concurrency": [1, 6]}, "zip": {"arms[1].gamma": [2, 4], "workload.num_requests": [24, 36]}}


class Counting(StudyProgress):
    def start(self, total, *, skipped=0, label="points"):
        self.total, self.skipped = total, skipped


def read_rows(path: Path) -> list[dict]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_grid_times_zip_in_order_with_ids_from_the_resolved_scenario(tmp_path):
    data = small_sweep_scenario(GRID)
    sweep = read_sweep(data, file=tmp_path / "s.yaml")
    assert sweep.fields == ("workload.concurrency", "arms[1].gamma", "workload.num_requests")
    assert [tuple(p.values.values()) for p in sweep.points] == [(1, 2, 24), (1, 4, 36), (6, 2, 24), (6, 4, 36)]
    assert len({p.id for p in sweep.points}) == 4 and all(len(p.id) == 12 for p in sweep.points)
    # the id hashes the validated point: another spelling of the same scenario has the same id
    respelt = small_sweep_scenario(GRID)
    respelt["workload"]["prompt_tokens"] = {"dist": "constant", "value": 64}
    assert [p.id for p in read_sweep(respelt, file=tmp_path / "s.yaml").points] == [p.id for p in sweep.points]
    from simlab.config.loading import scenario_from_data

    first = scenario_from_data(sweep.points[0].data, file=tmp_path / "s.yaml").scenario.model_dump(mode="json")
    assert sweep.points[0].id == data_sha256(first)[:12]
    assert sweep.points[0].data["arms"][1]["gamma"] == 2 and "sweep" not in sweep.points[0].data


def test_local_pools_and_dask_write_identical_sweep_csv(tmp_path):
    pytest.importorskip("distributed", reason="the dask extra is not installed (pip install 'simlab[dask]')")
    path = write_scenario(tmp_path, small_sweep_scenario(GRID))
    runs = {"local-1": dict(executor="local", workers=1), "local-2": dict(executor="local", workers=2),
            "dask-2": dict(executor="dask", workers=2)}
    texts = {}
    for name, options in runs.items():
        outcome = run_sweep(path, tmp_path / name, report=False, **options)
        assert outcome.num_failed == 0 and outcome.num_run == 4
        texts[name] = {f: (tmp_path / name / f).read_bytes() for f in ("sweep.csv", "positions.csv")}
    assert texts["local-1"] == texts["local-2"] == texts["dask-2"]
    rows = read_rows(tmp_path / "local-1" / "sweep.csv")
    assert len(rows) == 4 * 3
    assert list(rows[0])[:6] == ["point", "workload.concurrency", "arms[1].gamma", "workload.num_requests", "arm",
                                 "error"]
    assert "sim_wall_s" not in rows[0] and "output_throughput_per_gpu" in rows[0]
    timing = read_rows(tmp_path / "dask-2" / "timing.csv")
    assert len(timing) == 12 and all(float(r["sim_wall_s"]) > 0 for r in timing)
    # each point folder is a results folder as `simlab run` writes it
    point = tmp_path / "local-2" / "points" / rows[0]["point"]
    assert read_manifest(point)["kind"] == "run"
    assert {"summary.json", "requests.csv", "steps.csv.gz"} <= {p.name for p in point.iterdir()}
    summary = json.loads((point / "summary.json").read_text())
    assert repr(summary["arms"]["no-spec"]["output_throughput"]) == rows[0]["output_throughput"]


def test_a_rerun_skips_finished_points_and_leaves_their_folders_alone(tmp_path):
    path = write_scenario(tmp_path, small_sweep_scenario({"grid": {"workload.concurrency": [1, 3, 6]}}))
    out = tmp_path / "sweep"
    run_sweep(path, out, workers=2, report=False)
    before = (out / "sweep.csv").read_bytes()
    folders = sorted((out / "points").iterdir())
    stamps = {f.name: ((f / "summary.json").stat().st_ino, (f / "summary.json").stat().st_mtime_ns) for f in folders}
    # as if the sweep had been killed while this point was in flight
    import shutil

    shutil.rmtree(folders[1])
    progress = Counting()
    outcome = run_sweep(path, out, workers=2, report=False, progress=progress)
    assert (progress.total, progress.skipped) == (1, 2)
    assert (outcome.num_run, outcome.num_skipped) == (1, 2)
    assert (out / "sweep.csv").read_bytes() == before
    for folder in (folders[0], folders[2]):
        summary = folder / "summary.json"
        assert (summary.stat().st_ino, summary.stat().st_mtime_ns) == stamps[folder.name]
    progress = Counting()
    run_sweep(path, out, workers=1, report=False, progress=progress)
    assert (progress.total, progress.skipped) == (0, 3)


def test_a_failing_point_is_recorded_and_the_others_run(tmp_path):
    data = small_sweep_scenario({"grid": {"engine.kv_cache_tokens": [50, 100000], "workload.concurrency": [2]}})
    path = write_scenario(tmp_path, data)
    out = tmp_path / "sweep"
    code, _, stderr = run_cli("sweep", str(path), "--out", str(out), "--workers", "2", "--no-report", "-q")
    assert code == 1
    assert "1 point(s) failed" in stderr and "engine.kv_cache_tokens" in stderr
    rows = read_rows(out / "sweep.csv")
    failed = [r for r in rows if r["error"]]
    assert [r["arm"] for r in failed] == ["no-spec", "dflash-3", "dflash-hw"]
    assert all("but the cache holds 50" in r["error"] and r["completed"] == "" for r in failed)
    ran = [r for r in rows if not r["error"]]
    assert len(ran) == 3 and all(int(r["completed"]) == 40 for r in ran)
    assert (out / "failed" / f"{failed[0]['point']}.txt").is_file()
    assert not (out / "points" / failed[0]["point"]).exists()


def test_a_killed_sweep_loses_only_the_points_in_flight(tmp_path):
    path = write_scenario(tmp_path, small_sweep_scenario({"grid": {"workload.concurrency": [1, 2, 3, 4, 5, 6]}}))
    reference = run_sweep(path, tmp_path / "reference", workers=1, report=False)
    assert reference.num_failed == 0
    out = tmp_path / "killed"
    command = [sys.executable, "-m", "simlab", "sweep", str(path), "--out", str(out), "--workers", "1",
               "--no-report", "-q"]
    process = subprocess.Popen(command, cwd=tmp_path, start_new_session=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:
            points = out / "points"
            if points.is_dir() and len([p for p in points.iterdir() if not p.name.startswith(".")]) >= 2:
                break
            time.sleep(0.05)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    finished = [p for p in (out / "points").iterdir() if not p.name.startswith(".")]
    assert 2 <= len(finished) < 6, "the sweep ended before it could be killed mid-way"
    assert all(read_manifest(p)["kind"] == "run" for p in finished)  # no half-written point folder is visible
    progress = Counting()
    run_sweep(path, out, workers=2, report=False, progress=progress)
    assert progress.skipped == len(finished) and progress.total == 6 - len(finished)
    assert (out / "sweep.csv").read_bytes() == (tmp_path / "reference" / "sweep.csv").read_bytes()


def test_simlab_run_on_a_sweep_file_points_to_simlab_sweep(tmp_path):
    path = write_scenario(tmp_path, small_sweep_scenario(GRID))
    code, _, stderr = run_cli("run", str(path), "--out", str(tmp_path / "out"))
    assert code == 2
    assert stderr.strip().count("\n") == 0
    assert "sweep:" in stderr and f"simlab sweep {path}" in stderr
    assert not (tmp_path / "out").exists()


SWEEP_ERRORS = [
    ({"grid": {"workload.concurency": [1, 2]}}, "sweep.grid: 'workload.concurency': workload has no field"),
    ({"zip": {"workload.concurrency": [1, 2], "workload.num_requests": [10]}}, "sweep.zip: lists of unequal length"),
    ({"grid": {"workload.concurrency": []}}, "is an empty list"),
    ({"grid": {"workload.concurrency": [1]}, "baseline": "mtp-1"}, "sweep.baseline: 'mtp-1': is not an arm"),
    ({"grid": {"workload.concurrency": [0]}}, "workload.concurrency: 0: input should be greater than 0"),
    ({"grid": {"workload.concurrency": [2, 2]}}, "points 1 and 2 are the same scenario"),
    ({"grid": {"arms[9].gamma": [2]}}, "arms has 3 items"),
    ({}, "sweep: varies nothing"),
    ({"grid": {"workload.concurrency": [1]}, "load": "engine.replicas"}, "sweep.load: 'engine.replicas'"),
]


@pytest.mark.parametrize("sweep, message", SWEEP_ERRORS)
def test_bad_sweeps_exit_2_with_one_line_and_write_nothing(tmp_path, sweep, message):
    path = write_scenario(tmp_path, small_sweep_scenario(sweep))
    out = tmp_path / "out"
    code, stdout, stderr = run_cli("sweep", str(path), "--out", str(out))
    assert code == 2, stderr
    assert stderr.startswith("error: ") and stderr.strip().count("\n") == 0
    assert message in stderr
    assert not out.exists()


def test_bad_executor_options_exit_2_and_write_nothing(tmp_path, monkeypatch):
    path = write_scenario(tmp_path, small_sweep_scenario({"grid": {"workload.concurrency": [1]}}))
    out = tmp_path / "out"
    for args, message in ((["--executor", "slurm"], "--executor: 'slurm': is not an executor"),
                          (["--address", "tcp://x:1"], "--address: 'tcp://x:1': is for --executor dask"),
                          (["--workers", "0"], "--workers: 0: must be at least 1")):
        code, _, stderr = run_cli("sweep", str(path), "--out", str(out), *args)
        assert code == 2 and message in stderr and stderr.strip().count("\n") == 0, stderr
        assert not out.exists()
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if the dask extra were not installed
    code, _, stderr = run_cli("sweep", str(path), "--out", str(out), "--executor", "dask")
    assert code == 2 and "pip install 'simlab[dask]'" in stderr
    assert not out.exists()


def test_sweep_json_records_the_scenario_and_its_hash(tmp_path):
    data = small_sweep_scenario({"grid": {"workload.concurrency": [1, 2]}, "baseline": "dflash-3",
                                 "sla_user_tok_s": [50]})
    path = write_scenario(tmp_path, data)
    run_sweep(path, tmp_path / "out", workers=1, report=False, command="simlab sweep s.yaml")
    doc = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert doc["scenario_sha256"] == data_sha256(yaml.safe_load(path.read_text()))
    assert doc["command"] == "simlab sweep s.yaml" and doc["baseline"] == "dflash-3"
    assert doc["arm_kinds"]["dflash-hw"] == {"method": "dflash", "scheduler": "hardware_aware", "gamma": 5}
    assert [p["values"] for p in doc["points"]] == [{"workload.concurrency": 1}, {"workload.concurrency": 2}]


def test_every_command_that_runs_work_checks_its_executor_options_in_one_place(tmp_path):
    """sweep, whatif and plan refuse --workers beside --address (a running scheduler sizes itself) before anything
    runs or is written: one check (studies.executors.check_executor_options) serves the three."""
    path = write_scenario(tmp_path, small_sweep_scenario({"grid": {"workload.concurrency": [1]}}))
    plan = Path(__file__).parent / "contract" / "plan.yaml"
    out = tmp_path / "out"
    for command in (["sweep", str(path)], ["whatif", str(path), "--sla", "p90_tpot_ms<=50", "--vary",
                                           "workload.concurrency"], ["plan", str(plan)]):
        code, _, stderr = run_cli(*command, "--out", str(out), "--executor", "dask", "--address", "tcp://x:1",
                                  "--workers", "2")
        assert code == 2 and "--workers: 2: sets the size of a LocalCluster" in stderr, (command, stderr)
        assert not out.exists()
