"""Errors are for people: a bad trace or workload names the file, the line/field, the value and what is valid."""

from pathlib import Path

import pytest

from simlab.common.errors import InputError
from simlab.common.schema_errors import validate
from simlab.config.base import StrictModel
from simlab.config.workload import WorkloadConfig
from simlab.workload import build_workload

SCENARIO = "scenarios/my.yaml"
GENERIC = {"arrival": "t", "prompt_tokens": "p", "output_tokens": "o"}


class _Holder(StrictModel):
    workload: WorkloadConfig


def build(spec: dict, base_dir: Path, seed: int = 0):
    cfg = validate(_Holder, {"workload": spec}, file=SCENARIO).workload
    return build_workload(cfg, base_dir=base_dir, seed=seed, file=SCENARIO)


def trace_error(tmp_path: Path, name: str, text: str, **spec) -> InputError:
    (tmp_path / name).write_text(text)
    with pytest.raises(InputError) as info:
        build({"kind": "trace", "path": name, **spec}, tmp_path)
    return info.value


@pytest.mark.parametrize(
    "rows, line, column, value, problem",
    [
        ("2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:47.0,12,abc\n", 3, "GeneratedTokens", "abc",
         "not a number"),
        ("2023-11-16 18:15:46.6805900,374,44\n\n2023-11-16 18:15:47.0,-3,5\n", 4, "ContextTokens", -3,
         "must be at least 1"),
        ("2023-11-16 18:15:46.6805900,374,0\n", 2, "GeneratedTokens", 0, "must be at least 1"),
        ("2023-11-16 18:15:46.6805900,374,12.5\n", 2, "GeneratedTokens", 12.5, "not a whole number"),
        ("2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:47.0,,5\n", 3, "ContextTokens", "", "empty"),
        ("2023-11-16 18:15:46.6805900,374,44\nyesterday,12,5\n", 3, "TIMESTAMP", "yesterday", "not a date-time"),
    ],
)
def test_malformed_azure_rows_name_line_and_column(tmp_path, rows, line, column, value, problem):
    error = trace_error(tmp_path, "bad.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n" + rows)
    assert error.file == str(tmp_path / "bad.csv")
    assert error.field == f"line {line}, column {column}"
    assert error.value == value and problem in error.problem
    assert error.valid
    assert f"line {line}, column {column}" in str(error)


def test_azure_format_without_its_columns(tmp_path):
    error = trace_error(tmp_path, "bad.csv", "TIMESTAMP,ContextTokens\n2023-11-16 18:15:46,3\n", format="azure")
    assert error.file == str(tmp_path / "bad.csv") and "GeneratedTokens" in error.problem
    assert error.field.startswith("line 1")


@pytest.mark.parametrize(
    "lines, line, column, problem",
    [
        (['{"timestamp": 0, "input_length": 5, "output_length": 2}',
          '{"timestamp": 9, "input_length": 5}'], 2, "output_length", "missing"),
        (['{"timestamp": 0, "input_length": 5, "output_length": 2}', "",
          '{"timestamp": 9, "input_length": "many", "output_length": 1}'], 3, "input_length", "not a number"),
        (['{"timestamp": 0, "input_length": 5, "output_length": 2}',
          '{"timestamp": 9, "input_length": 5, "output_length": true}'], 2, "output_length", "not a number"),
        (['{"timestamp": 0, "input_length": 5, "output_length": 2}',
          '{"timestamp": null, "input_length": 5, "output_length": 3}'], 2, "timestamp", "empty"),
    ],
)
def test_malformed_mooncake_rows_name_line_and_column(tmp_path, lines, line, column, problem):
    error = trace_error(tmp_path, "bad.jsonl", "\n".join(lines) + "\n", format="mooncake")
    assert error.file == str(tmp_path / "bad.jsonl")
    assert error.field == f"line {line}, column {column}" and problem in error.problem


def test_invalid_json_line(tmp_path):
    text = '{"timestamp": 0, "input_length": 5, "output_length": 2}\n{"timestamp": 1, oops}\n'
    error = trace_error(tmp_path, "bad.jsonl", text, format="mooncake")
    assert error.field == "line 2" and "not valid JSON" in error.problem


def test_missing_trace_names_field_where_looked_and_shipped_names(tmp_path):
    error = trace_error(tmp_path, "other.csv", "x\n", path="nowhere/trace.csv")
    assert error.file == SCENARIO and error.field == "workload.path"
    assert str((tmp_path / "nowhere" / "trace.csv").resolve()) in error.problem
    assert "azure-conv-2023" in error.valid and "mooncake-synthetic-2025" in error.valid


def test_unknown_shipped_name(tmp_path):
    with pytest.raises(InputError) as info:
        build({"kind": "trace", "path": "azure-conv-2042"}, tmp_path)
    assert info.value.field == "workload.path" and info.value.value == "azure-conv-2042"
    assert "azure-conv-2023" in info.value.valid


def test_unknown_mapped_column_names_the_setting(tmp_path):
    error = trace_error(tmp_path, "t.csv", "t,p,out\n0,1,1\n", columns=GENERIC)
    assert error.file == SCENARIO and error.field == "workload.columns.output_tokens"
    assert error.value == "o" and "t, p, out" in error.valid


def test_unknown_domain_column(tmp_path):
    error = trace_error(tmp_path, "t.csv", "t,p,o\n0,1,1\n", columns=GENERIC, domain_column="task")
    assert error.file == SCENARIO and error.field == "workload.domain_column" and error.value == "task"


def test_generic_trace_without_mapping(tmp_path):
    error = trace_error(tmp_path, "t.csv", "t,p,o\n0,1,1\n")
    assert error.field == "workload.columns" and "t, p, o" in error.valid


def test_empty_trace(tmp_path):
    error = trace_error(tmp_path, "t.csv", "t,p,o\n", columns=GENERIC)
    assert error.file == str(tmp_path / "t.csv") and "no requests" in error.problem
    error = trace_error(tmp_path, "e.csv", "", columns=GENERIC)
    assert error.file == SCENARIO and error.field == "workload.columns.arrival"


def test_empty_domain_label(tmp_path):
    error = trace_error(tmp_path, "t.csv", "t,p,o,d\n0,1,1,chat\n1,1,1,\n", columns={**GENERIC, "domain": "d"})
    assert error.field == "line 3, column d" and "empty" in error.problem


def test_missing_empirical_trace(tmp_path):
    spec = {"kind": "poisson", "rate": 1.0, "num_requests": 5, "output_tokens": 5,
            "prompt_tokens": {"dist": "empirical", "trace": "missing.csv", "column": "prompt"}}
    with pytest.raises(InputError) as info:
        build(spec, tmp_path)
    assert info.value.file == SCENARIO and info.value.field == "workload.prompt_tokens.trace"


@pytest.mark.parametrize(
    "spec, field, text",
    [
        ({"kind": "poisson", "rate": 1, "num_requests": 5, "prompt_tokens": {"dist": "uniform", "low": 9, "high": 3},
          "output_tokens": 5}, "workload.prompt_tokens", "must be >= low"),
        ({"kind": "poisson", "rate": 1, "num_requests": 5, "prompt_tokens": 5, "output_tokens": 5, "domains": {}},
         "workload.domains", "at least one domain"),
        ({"kind": "poisson", "rate": 1, "num_requests": 5, "prompt_tokens": 5, "output_tokens": 5,
          "domains": {"chat": 0}}, "workload.domains.chat", "greater than 0"),
        ({"kind": "trace", "path": "x.csv", "domains": {"a": 1}, "domain_column": "d"}, "workload", "not both"),
        ({"kind": "trace", "path": "x.csv", "format": "azure", "columns": GENERIC}, "workload", "format csv or jsonl"),
        ({"kind": "closed_loop", "concurrency": 4, "num_requests": 8, "output_tokens": 5,
          "prompt_tokens": {"dist": "lognormal", "mean": 9, "sigma": 1, "min": 10, "max": 5}},
         "workload.prompt_tokens", "must be >= min"),
        ({"kind": "trace", "path": "x.csv", "time_scale": 0}, "workload.time_scale", "greater than 0"),
        ({"kind": "gamma", "rate": 1, "num_requests": 5, "prompt_tokens": 5, "output_tokens": 5},
         "workload.cv", "required"),
    ],
)
def test_bad_workload_config(tmp_path, spec, field, text):
    with pytest.raises(InputError) as info:
        build(spec, tmp_path)
    assert info.value.file == SCENARIO and info.value.field == field, str(info.value)
    assert text in str(info.value)

