"""Users see trouble: overloaded arms are flagged (stderr and summary.json), piped runs print progress lines,
``--version`` answers, and every name ``simlab profiles list`` / ``traces list`` prints works as a bare name."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from helpers import run_cli, write_scenario

from simlab.progress import LineProgress
from simlab.results.overload import in_system, overload_warnings, queue_area_s
from simlab.runner import run_scenario


def load(rate: float, *, num_requests: int = 600, max_num_seqs: int = 64) -> dict:
    return {
        "name": f"rate-{rate:g}",
        "seed": 5,
        "workload": {"kind": "poisson", "rate": rate, "num_requests": num_requests,
                     "prompt_tokens": {"dist": "lognormal", "mean": 1000, "sigma": 0.6, "max": 6000},
                     "output_tokens": {"dist": "lognormal", "mean": 250, "sigma": 0.6, "max": 1500}},
        "hardware": "h100-sxm_qwen3-8b",
        "engine": {"max_num_seqs": max_num_seqs, "max_batch_tokens": 8192},
        "acceptance": {"kind": "preset", "name": "qwen3-8b"},
        "arms": [{"name": "no-spec", "method": "none"},
                 {"name": "dspark-hw", "method": "dspark", "gamma": 7, "scheduler": {"kind": "hardware_aware"}}],
    }


# ------------------------------------------------------------------------------------------ the criteria, exactly
def test_queue_area_is_the_time_beyond_the_slots():
    # one slot; three requests at t = 0 served one after another for 1 s each: FIFO waits 0, 1, 2 s
    arrival, finish = np.zeros(3), np.array([1.0, 2.0, 3.0])
    assert queue_area_s(arrival, finish, np.zeros(3, dtype=int), 1) == pytest.approx(3.0)
    # two replicas with one slot each, two requests on each: replica 0 waits 1 s, replica 1 waits 2 s
    arrival, finish = np.zeros(4), np.array([1.0, 2.0, 2.0, 4.0])
    assert queue_area_s(arrival, finish, np.array([0, 0, 1, 1]), 1) == pytest.approx(3.0)
    assert queue_area_s(arrival, finish, np.array([0, 0, 1, 1]), 2) == 0.0


def test_growth_warning_fires_when_completions_fall_behind_arrivals():
    # arrivals at 10/s for 100 s; a server that completes 8/s (FIFO, one after another) falls behind by 2/s
    arrival = np.arange(1000) / 10.0
    finish = np.empty(1000)
    done = 0.0
    for i, a in enumerate(arrival):
        done = max(done, a) + 0.125
        finish[i] = done
    first_token = finish - 0.1
    warnings = overload_warnings(arrival, first_token, finish, np.zeros(1000, dtype=int), max_num_seqs=1,
                                 open_loop=True)
    assert warnings[0].startswith("overloaded: the queue was still growing")
    start = 99.9 - 99.9 / 4
    grown = in_system(arrival, finish, 99.9) - in_system(arrival, finish, start)
    assert f"{grown:,} more were in the system" in warnings[0]
    assert "TTFT dominated by queueing" in warnings[1]
    # the same server at 5/s keeps up: no warning
    slow = np.arange(500) / 5.0
    assert overload_warnings(slow, slow + 0.1, slow + 0.125, np.zeros(500, dtype=int), max_num_seqs=1,
                             open_loop=True) == []


def test_a_closed_loop_is_never_called_growing():
    arrival = np.arange(1000) / 10.0
    finish = arrival + 50.0  # would look like growth over the last quarter
    assert overload_warnings(arrival, arrival + 0.01, finish, np.zeros(1000, dtype=int), max_num_seqs=10_000,
                             open_loop=False) == []


# ------------------------------------------------------------------------------------------ on simulated runs
@pytest.fixture(scope="module")
def overloaded():
    return run_scenario(load(60.0), plot=False)


def test_an_overloaded_run_warns_for_every_arm(overloaded):
    for name, metrics in overloaded.arms.items():
        assert metrics["median_ttft_ms"] > 5_000, name
        kinds = [w.split(":")[0] for w in metrics["warnings"]]
        assert kinds == ["overloaded", "TTFT dominated by queueing"], (name, metrics["warnings"])


def test_the_queueing_bound_never_exceeds_the_mean_ttft(overloaded):
    requests = overloaded.requests
    for name, arm in requests.groupby("arm"):
        bound_s = queue_area_s(arm.arrival_s.to_numpy(), arm.finish_s.to_numpy(), arm.replica.to_numpy(), 64)
        mean_ttft_s = float((arm.first_token_s - arm.arrival_s).mean())
        assert 0.5 * mean_ttft_s <= bound_s / len(arm) <= mean_ttft_s, name


def test_a_comfortable_run_has_no_warning():
    results = run_scenario(load(2.0, num_requests=200), plot=False)
    for name, metrics in results.arms.items():
        assert metrics["warnings"] == [], (name, metrics["warnings"])
        assert metrics["median_ttft_ms"] < 200


def test_the_command_line_prints_warnings_and_summary_keeps_them(tmp_path):
    path = write_scenario(tmp_path, load(60.0, num_requests=300))
    code, out, err = run_cli("run", str(path), "--out", str(tmp_path / "out"), "--no-plot", "--jobs", "1")
    assert code == 0, err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    for name, metrics in summary["arms"].items():
        assert metrics["warnings"], name
        for warning in metrics["warnings"]:
            assert f"warning: {name}: {warning}\n" in err
    assert "no-spec" in out


# ------------------------------------------------------------------------------------------ progress and version
def test_piped_runs_print_progress_lines(tmp_path):
    data = load(5.0, num_requests=1024)  # the engine reports every 256 finished requests
    data["workload"].update(prompt_tokens=100, output_tokens=20)
    data["acceptance"] = {"kind": "iid", "alpha": 0.7}
    data["arms"][1]["scheduler"] = {"kind": "fixed"}
    path = write_scenario(tmp_path, data)
    code, _, err = run_cli("run", str(path), "--out", str(tmp_path / "out"), "--no-plot", "--jobs", "1")
    assert code == 0, err
    lines = err.splitlines()
    assert lines[0] == "simulating 2 arms x 1,024 requests"
    for arm in ("no-spec", "dspark-hw"):
        for share, done in ((25, "256"), (50, "512"), (75, "768"), (100, "1,024")):
            assert any(line.startswith(f"{arm}: {share}% ({done}/1,024 requests, ") for line in lines), (arm, lines)
    code, _, err = run_cli("run", str(path), "--out", str(tmp_path / "out"), "--no-plot", "-q")
    assert code == 0 and err == ""


def test_progress_lines_keep_a_long_run_audible():
    clock = iter(np.arange(0.0, 1000.0, 7.0))
    stream = io.StringIO()
    progress = LineProgress(stream, every_s=30.0, clock=lambda: float(next(clock)))
    progress.start(["a", "b"], 1000)
    for done in range(1, 11):  # a slow arm: 1 % per update, 7 s apart
        progress.update(0, done)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "simulating 2 arms x 1,000 requests"
    assert [line for line in lines[1:] if not line.endswith("a 1%, b 0%") and "a " in line]
    assert len(lines) >= 3 and all(": a " in line for line in lines[1:])


def test_version():
    from simlab import __version__

    code, out, _ = run_cli("--version")
    assert code == 0 and out == f"simlab {__version__}\n"


# ------------------------------------------------------------------------------------------ names list prints
def _first_column(text: str) -> list[str]:
    """The first table's first-column cells, header left out (rich's boxed and plain table styles)."""
    names, started = [], False
    for line in text.splitlines():
        if started and (line.startswith("└") or not line.strip()):
            break
        if line.startswith(("├", "┡", "─")):
            started = True
            continue
        cell = line.split("│")[1] if line.startswith("│") else line
        if started and cell.strip() and not line.startswith(" " * 4):
            names.append(cell.split()[0])
    return names


def test_every_listed_profile_name_works_as_hardware(tmp_path):
    from simlab.config.loading import load_scenario
    from simlab.hardware import build_cost_model, shipped_profiles
    from simlab.hardware.cli import resolve_source

    code, out, _ = run_cli("profiles", "list")
    names = _first_column(out)
    assert code == 0 and names == list(shipped_profiles())
    dotted = [name for name in names if "." in name]
    assert "h100-sxm_llama-3.1-8b" in dotted  # the case that once failed
    for name in names:
        data = load(5.0, num_requests=5)
        data["hardware"] = name
        loaded = load_scenario(write_scenario(tmp_path, data))
        assert build_cost_model(loaded.scenario.hardware, base_dir=tmp_path, file=loaded.file).name == name
    for name in dotted:
        assert resolve_source(name).name == name
        code, _, err = run_cli("profiles", "export", name, "--out", str(tmp_path / "exported.yaml"))
        assert code == 0, err


def test_every_listed_trace_name_works_as_path(tmp_path):
    from simlab.config.loading import load_scenario
    from simlab.workload import build_workload, shipped_traces

    code, out, _ = run_cli("traces", "list")
    names = _first_column(out)
    assert code == 0 and sorted(names) == sorted(shipped_traces())
    for name in names:
        data = load(5.0)
        data["workload"] = {"kind": "trace", "path": name, "max_requests": 10}
        loaded = load_scenario(write_scenario(tmp_path, data))
        workload = build_workload(loaded.scenario.workload, base_dir=tmp_path, seed=0, file=loaded.file)
        assert workload.source["trace"] == name and len(workload.requests) == 10
        code, _, err = run_cli("traces", "info", name)
        assert code == 0, err


def test_a_shipped_name_with_a_dot_wins_over_a_file_extension(tmp_path):
    from simlab.hardware.profiles import find_profile, shipped_profiles

    name = "h100-sxm_llama-3.1-8b"
    assert find_profile(name, base_dir=tmp_path, file=None) == shipped_profiles()[name]
    (tmp_path / "mine.1-8b").write_text("kind: table\n")
    assert find_profile("mine.1-8b", base_dir=tmp_path, file=None) == tmp_path / "mine.1-8b"


def test_without_torch_the_real_mode_tests_are_reported_as_skipped():
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    modules = sorted((repo / "tests" / "real").glob("test_*.py"))
    code = ("import sys; sys.modules['torch'] = None; import pytest; "
            "sys.exit(pytest.main(['tests/real', '-rs', '-p', 'no:cacheprovider']))")
    done = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 5), done.stdout + done.stderr  # 5: pytest ran no test (each module skipped)
    assert f"{len(modules)} skipped" in done.stdout and "error" not in done.stdout.lower()
    assert "real mode needs torch: pip install" in done.stdout
