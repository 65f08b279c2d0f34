"""The audit command: exact reading of YAML decimals, JSON and table output, and bad files -> exit 2."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from simlab.audit import audit_command, load_audit, main
from simlab.common.errors import InputError

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "audit_appendix_a.yaml"
BASE = yaml.safe_load(SCENARIO.read_text())


def write(tmp_path: Path, data, name: str = "audit.yaml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data), encoding="utf-8")
    return path


def edited(**changes):
    data = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        node = data
        *parents, last = dotted.split("__")
        for part in parents:
            node = node[part]
        if value is ...:
            del node[last]
        else:
            node[last] = value
    return data


def test_yaml_decimals_are_exact(tmp_path):
    data = edited(draft__start={"A": 0.1, "B": 0.2, "C": 0.7}, vocab=["A", "B", "C"])
    for table in ("target", "draft"):
        data[table]["after"] = {s: {"A": "1/3", "B": "1/3", "C": "1/3"} for s in "ABC"}
    data["target"]["start"] = {"A": 0.25, "B": 0.25, "C": 0.5}
    data["confidence"]["after"] = {"A": 0.9, "B": 0.0, "C": 0.5}
    problem = load_audit(write(tmp_path, data))
    assert problem.draft.start == (Fraction(1, 10), Fraction(2, 10), Fraction(7, 10))
    assert problem.target.after[2] == (Fraction(1, 3),) * 3


def test_rows_within_tolerance_are_rescaled_exactly(tmp_path):
    data = edited(target__start={"A": 0.3333333, "B": 0.6666666})
    problem = load_audit(write(tmp_path, data))
    assert sum(problem.target.start) == 1
    assert problem.target.start[0] == Fraction(3333333, 9999999)


def test_cli_writes_json_and_prints_table(tmp_path, capsys):
    out = tmp_path / "result.json"
    assert main([str(SCENARIO), "--out", str(out)]) == 0
    document = json.loads(out.read_text())
    assert document["generator"] == "simlab audit"
    document = document["schedulers"]
    assert list(document) == [
        "fixed", "threshold(threshold=0.5)", "hardware_aware", "async_topk(lag_steps=1)", "retrospective"
    ]
    assert document["retrospective"]["distribution"] == {"A": 0.6, "B": 0.4}
    assert document["retrospective"]["tv"] == 0.1
    assert document["retrospective"]["exact"] == {"distribution": {"A": "3/5", "B": "2/5"}, "tv": "1/10"}
    assert document["hardware_aware"]["tv"] == 0.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json"]  # no temporary file left behind
    printed = capsys.readouterr().out
    assert "retrospective" in printed and "1/10" in printed
    assert printed.count("yes") == 4 and printed.count(" no ") == 1


def test_multi_character_symbols_are_joined_with_spaces(tmp_path):
    text = (
        SCENARIO.read_text()
        .replace("A", "yes_tok")
        .replace("B", "no_tok")
        .replace("num_output_tokens: 1", "num_output_tokens: 2")
    )
    out = tmp_path / "o.json"
    assert main([str(write(tmp_path, text)), "--out", str(out)]) == 0
    assert "yes_tok no_tok" in json.loads(out.read_text())["schedulers"]["fixed"]["distribution"]


def test_mounted_command_lets_input_errors_propagate(tmp_path):
    app = typer.Typer()
    app.command("audit")(audit_command)
    app.command("other")(lambda: None)
    ok = CliRunner().invoke(app, ["audit", str(SCENARIO)])
    assert ok.exit_code == 0, ok.output
    bad = CliRunner().invoke(app, ["audit", str(write(tmp_path, edited(gamma=0)))])
    assert isinstance(bad.exception, InputError)


BAD_FILES = [
    (edited(target__start={"A": 1.5, "B": 0.5}), "target.start.A", "outside [0, 1]"),
    (edited(draft__start={"A": 0.5, "B": 0.4}), "draft.start", "sum to 0.9"),
    (edited(target__start={"A": "one half", "B": 0.5}), "target.start.A", "not a number"),
    (edited(target__after__A={"A": 0.5, "C": 0.5}), "target.after.A.C", "unknown symbol"),
    (edited(draft__after={"A": {"A": 1.0}}), "draft.after", "no row for symbol 'B'"),
    (edited(confidence__after={"A": 0.9}), "confidence.after", "no value for symbol 'B'"),
    (edited(confidence__start=1.2), "confidence.start", "1.2"),
    (edited(sps={0: 1.0, 1: 1.0}), "sps[0]", "greater than 0"),
    (edited(sps={2: 0.5, 3: 0.45}), "sps", "B = 1"),
    (edited(schedulers=["fixed", "bogus"]), "schedulers[1].kind", "not a known kind"),
    (
        edited(schedulers=[{"kind": "async_topk", "lag_steps": 0}]),
        "schedulers[0].lag_steps",
        "greater than or equal to 1",
    ),
    (edited(schedulers=["fixed", {"kind": "fixed"}]), "schedulers[1]", "listed twice"),
    (edited(gamma=...), "gamma", "missing"),
    (edited(vocab=["A", "A"]), "vocab", "listed twice"),
    (edited(prior_confidence=[0.5]), "prior_confidence", "gamma = 2"),
    (
        edited(gamma=6, num_output_tokens=8, schedulers=[{"kind": "async_topk", "lag_steps": 3}]),
        "num_output_tokens",
        "too large",
    ),
    (edited(colour="blue"), "colour", "unknown field"),
    ("vocab: [A, B\n", None, "not valid YAML"),
    ("- just\n- a list\n", None, "must be a mapping"),
]


@pytest.mark.parametrize("data,field,problem", BAD_FILES)
def test_bad_files_exit_2_naming_the_field(tmp_path, capsys, data, field, problem):
    path = write(tmp_path, data)
    assert main([str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and problem in err
    if field is not None:
        assert f": {field}:" in err
    assert "Traceback" not in err


def test_missing_file_exits_2(tmp_path, capsys):
    assert main([str(tmp_path / "nope.yaml")]) == 2
    assert "no such audit file" in capsys.readouterr().err


def test_out_in_missing_folder_is_created(tmp_path):
    assert main([str(SCENARIO), "--out", str(tmp_path / "no" / "where.json")]) == 0
    assert json.loads((tmp_path / "no" / "where.json").read_text())["generator"] == "simlab audit"


def test_out_below_a_file_exits_2(tmp_path, capsys):
    (tmp_path / "notes").write_text("mine\n")
    assert main([str(SCENARIO), "--out", str(tmp_path / "notes" / "where.json")]) == 2
    captured = capsys.readouterr()
    assert "--out" in captured.err and captured.out == ""  # refused before enumerating
    assert (tmp_path / "notes").read_text() == "mine\n"


def test_module_entry_point_exit_status(tmp_path):
    bad = write(tmp_path, edited(draft__start={"A": 0.5, "B": 0.4}))
    done = subprocess.run([sys.executable, "-m", "simlab.audit", str(bad)], capture_output=True, text=True)
    assert done.returncode == 2
    assert "draft.start" in done.stderr and "Traceback" not in done.stderr
