"""Every command that writes, pointed at a user's file, a folder of the user's files, the scenario's folder or
``.``, exits 2 with one line and leaves every byte in place; pointed at its own earlier output it replaces it.
(The torch commands, ``profile`` and ``real train``/``eval``, are in tests/real/test_out_safety_real.py.)"""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import pytest
from helpers import run_cli, tree_digest, user_project

from simlab.common import outputs

REPO = Path(__file__).resolve().parents[1]
TINY = {
    "name": "tiny",
    "seed": 3,
    "workload": {"kind": "poisson", "rate": 20.0, "num_requests": 60, "prompt_tokens": 200, "output_tokens": 30},
    "hardware": "h100-sxm_qwen3-8b",
    "engine": {"max_num_seqs": 16, "max_batch_tokens": 2048},
    "acceptance": {"kind": "iid", "alpha": 0.7},
    "slo": {"ttft_ms": 500, "tpot_ms": 20},
    "arms": [{"name": "plain", "method": "none"},
             {"name": "dspark", "method": "dspark", "gamma": 5, "scheduler": {"kind": "fixed"}}],
}


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A user's project folder (the current folder) with a scenario, an audit file and a run's results."""
    paths = user_project(tmp_path / "proj", TINY)
    shutil.copy(REPO / "scenarios" / "audit_appendix_a.yaml", paths["folder"] / "audit.yaml")
    paths["audit"] = paths["folder"] / "audit.yaml"
    monkeypatch.chdir(paths["folder"])
    code, _, err = run_cli("run", "tiny.yaml", "--out", "results/tiny", "-q")
    assert code == 0, err
    paths["results"] = paths["folder"] / "results" / "tiny"
    return paths


COMMANDS = {  # command line with OUT where the target goes
    "run": ["run", "tiny.yaml", "-q", "--no-plot", "--out", "OUT"],
    "report": ["report", "results/tiny", "--out", "OUT"],
    "audit": ["audit", "audit.yaml", "--out", "OUT"],
    "profiles export": ["profiles", "export", "h100-sxm_qwen3-8b", "--out", "OUT"],
    "profiles export sps": ["profiles", "export", "h100-sxm_qwen3-8b", "--format", "sglang-sps", "--out", "OUT"],
}
TARGETS = {  # what stands at the target
    "a user file": "notes.txt",
    "a user PNG": "figure.png",
    "a user JSON": "mine.json",
    "a user YAML": "mine.yaml",
    "a folder of user files": "sub",
    "the scenario's folder": str(Path("..") / "proj"),
    "the current folder": ".",
    "the scenario itself": "tiny.yaml",
}


def _command(name: str, target: str) -> list[str]:
    return [target if part == "OUT" else part for part in COMMANDS[name]]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("command", COMMANDS)
def test_refused_with_one_line_and_every_byte_in_place(project, command, target):
    before = tree_digest(project["folder"].parent)
    code, out, err = run_cli(*_command(command, TARGETS[target]))
    assert code == 2, (out, err)
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert "--out" in err
    assert tree_digest(project["folder"].parent) == before


def test_the_issue_cases(tmp_path, monkeypatch):
    """`simlab run proj/tiny2.yaml --out proj` and `--out tiny.yaml` once deleted the user's work."""
    paths = user_project(tmp_path / "proj", TINY)
    monkeypatch.chdir(tmp_path)
    before = tree_digest(tmp_path)
    for out in ("proj", "proj/tiny.yaml", ".", "proj/sub", "/proc/xyz"):
        code, _, err = run_cli("run", str(paths["scenario"].relative_to(tmp_path)), "--out", out, "-q")
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, (out, err)
    assert tree_digest(tmp_path) == before


def _replace_twice(project, command: str, out: str, check) -> None:
    for attempt in range(2):
        code, _, err = run_cli(*_command(command, out))
        assert code == 0, err
        check(Path(out))
    parent = Path(out).resolve().parent
    stray = [p.name for p in parent.iterdir() if p.name.startswith(".")]
    assert stray == []


def test_run_replaces_its_own_results_folder(project):
    code, _, err = run_cli("run", "tiny.yaml", "-q", "--no-plot", "--seed", "11", "--out", "results/tiny")
    assert code == 0, err
    summary = json.loads((project["results"] / "summary.json").read_text())
    assert summary["scenario"]["seed"] == 11
    assert sorted(p.name for p in project["results"].iterdir()) == ["manifest.json", "requests.csv", "steps.csv.gz",
                                                                   "summary.json"]
    assert sorted(p.name for p in project["results"].parent.iterdir()) == ["tiny"]


def test_report_replaces_its_own_figure(project):
    figure = project["results"] / "report.png"
    assert figure.is_file()
    figure.write_bytes(b"stale")  # a broken earlier figure is not simlab's ...
    code, _, err = run_cli("report", "results/tiny")
    assert code == 2 and "report.png" in err
    assert figure.read_bytes() == b"stale"  # ... and is left alone
    figure.unlink()
    for _ in range(2):
        code, out, err = run_cli("report", "results/tiny")
        assert code == 0, err
        assert figure.read_bytes().startswith(b"\x89PNG") and outputs.is_simlab_file(figure)
    assert "dspark" in out
    _replace_twice(project, "report", "figures/tiny.png", lambda p: outputs.is_simlab_file(p))


def test_report_refuses_to_write_over_its_inputs(project):
    before = tree_digest(project["folder"])
    for out in ("results/tiny/summary.json", "results/tiny/requests.csv", "results/tiny"):
        code, _, err = run_cli("report", "results/tiny", "--out", out)
        assert code == 2, (out, err)
    assert tree_digest(project["folder"]) == before


def test_audit_replaces_its_own_json(project):
    _replace_twice(project, "audit", "audit.json",
                   lambda p: json.loads(p.read_text())["generator"] == "simlab audit")


def test_profiles_export_replaces_its_own_files(project):
    _replace_twice(project, "profiles export", "h100.yaml",
                   lambda p: p.read_text().startswith("# written by simlab profiles export\n"))
    _replace_twice(project, "profiles export sps", "sps.json",
                   lambda p: set(json.loads(p.read_text())) == {"sample_batch_tokens", "sample_steps_per_sec",
                                                              "max_batch_tokens"})


def test_an_sps_table_edited_by_hand_is_not_replaced(project):
    code, _, err = run_cli(*_command("profiles export sps", "sps.json"))
    assert code == 0, err
    edited = Path("sps.json").read_text().replace("\n}", ', "note": "mine"\n}')
    Path("sps.json").write_text(edited)
    code, _, err = run_cli(*_command("profiles export sps", "sps.json"))
    assert code == 2 and Path("sps.json").read_text() == edited


def test_a_disk_error_while_writing_is_one_line(project, monkeypatch):
    def full(staging, out_dir):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(outputs, "_swap_in", full)
    before = tree_digest(project["folder"])
    code, _, err = run_cli("run", "tiny.yaml", "-q", "--no-plot", "--out", "results/tiny")
    assert code == 1 and err.count("\n") == 1 and "No space left on device" in err and "Traceback" not in err
    assert tree_digest(project["folder"]) == before


def test_a_failing_single_file_write_is_one_line(project, monkeypatch):
    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(outputs.os, "fsync", full)
    for command, out in (("audit", "audit.json"), ("profiles export", "h100.yaml"), ("report", "r.png")):
        before = tree_digest(project["folder"])
        code, _, err = run_cli(*_command(command, out))
        assert code == 1 and err.count("\n") == 1 and "No space left on device" in err, (command, err)
        assert tree_digest(project["folder"]) == before
