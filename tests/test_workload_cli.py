"""`simlab traces list|info` as a typer sub-app."""

import json

import pytest
import typer
from typer.testing import CliRunner

from simlab.common.errors import InputError
from simlab.common.resources import shipped_dir
from simlab.workload.cli import traces_app

app = typer.Typer()
app.add_typer(traces_app, name="traces")
runner = CliRunner()


def test_list_shows_every_shipped_trace_with_stats():
    result = runner.invoke(app, ["traces", "list"], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    for name in ("azure-conv-2023", "azure-code-2023", "mooncake-conv-2025", "mooncake-synthetic-2025"):
        assert name in result.output
    assert "19,366" in result.output and "12,031" in result.output
    assert "CC-BY-4.0" in result.output and "Apache-2.0" in result.output


def test_info_json_of_a_shipped_trace():
    result = runner.invoke(app, ["traces", "info", "azure-conv-2023", "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    assert info["num_requests"] == 19_366 and info["format"] == "azure" and info["licence"] == "CC-BY-4.0"
    assert round(info["mean_prompt_tokens"]) == 1155 and round(info["mean_output_tokens"]) == 211
    assert info["rate_per_s"] == pytest.approx((19_366 - 1) / info["duration_s"])


def test_info_of_a_generic_file_with_columns():
    path = shipped_dir("traces") / "samples" / "requests.csv"
    args = ["traces", "info", str(path), "--arrival", "sent_ms", "--prompt", "prompt_len", "--output", "output_len",
            "--arrival-unit", "ms", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    assert info["num_requests"] == 12 and info["duration_s"] == pytest.approx(6.105)


def test_info_table():
    result = runner.invoke(app, ["traces", "info", "mooncake-synthetic-2025"], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    assert "3,993" in result.output and "Apache-2.0" in result.output


@pytest.mark.parametrize(
    "args, field",
    [(["no-such-trace"], "NAME_OR_PATH"), (["azure-conv-2023", "--format", "parquet"], "--format"),
     (["azure-conv-2023", "--arrival", "t"], "--prompt, --output")],
)
def test_info_errors_propagate_as_input_errors(args, field):
    result = runner.invoke(app, ["traces", "info", *args])
    assert isinstance(result.exception, InputError), result.output
    assert result.exception.field == field
