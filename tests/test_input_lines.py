"""Inputs a newcomer gets wrong stop the run with exit 2 and one line naming the line or field: CSV rows with
extra or missing fields, arrivals out of order (unless ``sort: true``), a typo in a field name (named first),
values shown as the plain numbers the file holds; and a header that already names the standard columns needs
no ``columns:`` map."""

from __future__ import annotations

import json

import pytest

from helpers import run_cli, write_scenario

HEADER = "arrival,prompt_tokens,output_tokens\n"


def scenario(workload: dict) -> dict:
    return {
        "name": "inputs",
        "seed": 1,
        "workload": workload,
        "hardware": "h100-sxm_qwen3-8b",
        "engine": {"max_num_seqs": 8, "max_batch_tokens": 2048},
        "acceptance": {"kind": "iid", "alpha": 0.7},
        "arms": [{"name": "plain", "method": "none"}],
    }


def run_trace(tmp_path, text: str, name: str = "t.csv", **extra):
    (tmp_path / name).write_text(text)
    path = write_scenario(tmp_path, scenario({"kind": "trace", "path": name, **extra}))
    return run_cli("run", str(path), "--out", str(tmp_path / "out"), "-q", "--no-plot")


def one_line_error(code: int, err: str) -> str:
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("rows, line, says", [
    ("0,10,5\n1,10,5,7\n2,12,5\n", 3, "'1,10,5,7': 4 fields, more than the header's 3"),
    ("0,10,5\n1,10\n2,12,5\n", 3, "'1,10': 2 fields, fewer than the header's 3"),
    ("0,10,5\n\n1,11,5\n\n2,12,5,\n", 6, "4 fields, more than the header's 3"),  # blank lines still counted
])
def test_rows_with_extra_or_missing_fields_name_their_line(tmp_path, rows, line, says):
    err = one_line_error(*run_trace(tmp_path, HEADER + rows)[::2])
    assert f"t.csv: line {line}: " in err and says in err
    assert "every row has the header's 3 fields (arrival, prompt_tokens, output_tokens)" in err
    assert not (tmp_path / "out").exists()


def test_arrivals_out_of_order_name_the_line_unless_sorted(tmp_path):
    rows = "0,10,5\n3,11,5\n2.5,12,5\n4,13,5\n"
    err = one_line_error(*run_trace(tmp_path, HEADER + rows)[::2])
    assert "t.csv: line 4, column arrival: 2.5: arrives 0.5 s before the request of line 3" in err
    assert "workload.sort: true" in err
    code, _, err = run_trace(tmp_path, HEADER + rows, sort=True)
    assert code == 0, err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["workload"]["sorted_on_read"] is True


def test_jsonl_out_of_order_names_the_line(tmp_path):
    lines = ['{"arrival": 1.0, "prompt_tokens": 3, "output_tokens": 4}', "",
             '{"arrival": 0.5, "prompt_tokens": 5, "output_tokens": 6}']
    err = one_line_error(*run_trace(tmp_path, "\n".join(lines) + "\n", name="t.jsonl")[::2])
    assert "t.jsonl: line 3, column arrival: 0.5" in err


@pytest.mark.parametrize("name, text", [
    ("t.csv", HEADER + "0,10,5\n1.5,11,6\n"),
    ("t.jsonl", '{"arrival": 0, "prompt_tokens": 10, "output_tokens": 5}\n'
                '{"arrival": 1.5, "prompt_tokens": 11, "output_tokens": 6, "extra": "ignored"}\n'),
])
def test_standard_columns_need_no_map(tmp_path, name, text):
    code, _, err = run_trace(tmp_path, text, name=name)
    assert code == 0, err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["workload"]["num_requests"] == 2 and summary["workload"]["duration_s"] == 1.5
    assert summary["arms"]["plain"]["completed"] == 2


def test_values_are_shown_as_plain_numbers(tmp_path):
    err = one_line_error(*run_trace(tmp_path, HEADER + "0,10,5\n1,-600,5\n")[::2])
    assert "line 3, column prompt_tokens: -600: must be at least 1" in err and "np." not in err


@pytest.mark.parametrize("typo, field, meant", [
    ("num_request", "workload.num_request", "num_requests"),
    ("rat", "workload.rat", "rate"),
])
def test_an_unknown_field_is_named_first(tmp_path, typo, field, meant):
    workload = {"kind": "poisson", "rate": 5.0, "num_requests": 20, "prompt_tokens": 100, "output_tokens": 20}
    workload[typo] = workload.pop(meant)
    path = write_scenario(tmp_path, scenario(workload))
    err = one_line_error(*run_cli("run", str(path), "--out", str(tmp_path / "out"), "-q")[::2])
    assert f"{path.name}: {field}: " in err
    assert f"unknown field (did you mean {meant}?)" in err
    assert err.index("unknown field") < err.index("valid:")
