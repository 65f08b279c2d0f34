"""The ``simlab real`` sub-app: importable without torch, commands run on the shipped pair."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("torch")
from typer.testing import CliRunner  # noqa: E402

from simlab.real.cli import real_app  # noqa: E402
from simlab.real.pair import default_pair_dir  # noqa: E402

HAS_PAIR = (default_pair_dir() / "target" / "config.json").exists()


def test_cli_module_does_not_import_torch():
    code = "import sys, simlab, simlab.real, simlab.real.cli, simlab.real.config; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_info_lists_presets():
    result = CliRunner().invoke(real_app, ["info"])
    assert result.exit_code == 0 and "qwen3-8b" in result.output and "8190.74 M" in result.output


def test_bad_scheduler_is_an_input_error():
    result = CliRunner().invoke(real_app, ["generate", "--scheduler", "nope", "--pair", str(default_pair_dir())])
    assert result.exit_code == 2


def test_missing_pair_is_an_input_error(tmp_path):
    result = CliRunner().invoke(real_app, ["generate", "--pair", str(tmp_path)])
    assert result.exit_code == 2 and "no trained pair" in result.output


@pytest.mark.skipif(not HAS_PAIR, reason="no shipped pair")
def test_generate_and_eval_on_the_shipped_pair(tmp_path):
    runner = CliRunner()
    result = runner.invoke(real_app, ["generate", "--prompt", "def ", "--gamma", "7", "--max-new-tokens", "40"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("def ") and "tau" in result.output
    result = runner.invoke(real_app, ["eval", "--num-prompts", "4", "--max-new-tokens", "24", "--max-num-seqs", "2",
                                      "--scheduler", "hardware_aware", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output[result.output.index("{"): result.output.rindex("}") + 1])
    assert summary["tau"] >= 1.0 and summary["num_rounds"] > 0
    assert {p.name for p in tmp_path.iterdir()} == {"requests.csv", "steps.csv", "request_steps.csv", "manifest.json"}
