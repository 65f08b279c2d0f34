"""The runnable examples in docs/acceptance-logs.md run as written (from the repository root)."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest
import yaml

from helpers import run_cli

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "acceptance-logs.md").read_text(encoding="utf-8")
COMMANDS = [line[2:] for block in re.findall(r"```console\n(.*?)```", DOC, re.S) for line in block.splitlines()
            if line.startswith("$ simlab") and "..." not in line and "[" not in line]
FIXTURE_COMMANDS = [c for c in COMMANDS if "tests/fixtures" in c]
PYTHON = re.findall(r"```python\n(.*?)```", DOC, re.S)


def _run(command: str, cwd: Path):
    args = shlex.split(command)[1:]
    args = [str(ROOT / a) if a.startswith("tests/fixtures") else a for a in args]
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return run_cli(*args)
    finally:
        os.chdir(old)


@pytest.mark.parametrize(
    "command", FIXTURE_COMMANDS, ids=lambda c: shlex.split(c)[shlex.split(c).index("--format") + 1]
)
def test_fixture_example_runs(tmp_path, command):
    if "sglang-sts" in command:
        pytest.importorskip("torch")
    code, _, stderr = _run(command, tmp_path)
    assert code == 0, stderr
    out = shlex.split(command)[shlex.split(command).index("--out") + 1]
    assert yaml.safe_load((tmp_path / out).read_text())["kind"] == "positional"


def test_every_format_has_an_example():
    formats = {shlex.split(c)[shlex.split(c).index("--format") + 1] for c in FIXTURE_COMMANDS}
    assert formats == {"simlab", "vllm-metrics", "deepspec", "sglang-sts", "specdecode-bench", "csv"}


def test_library_example(tmp_path):
    old = os.getcwd()
    os.chdir(ROOT)
    try:
        namespace: dict = {}
        exec(PYTHON[-1], namespace)
        assert namespace["fitted"].curves == {"eagle3": {"*": [0.6875, 0.681818, 0.6]}}
    finally:
        os.chdir(old)


@pytest.mark.slow
def test_demo_example_fits_and_calibrates(tmp_path):
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        exec(PYTHON[0], {})
    finally:
        os.chdir(old)
    for command in [c for c in COMMANDS if "demo-run" in c]:
        code, _, stderr = _run(command, tmp_path)
        assert code == 0, stderr
    fitted = yaml.safe_load((tmp_path / "demo-fit.yaml").read_text())
    assert set(fitted["confidence"]) == {"noise_logit_sd", "bias_logit"}
    assert (tmp_path / "demo-sts.json").is_file() and (tmp_path / "demo-sts.png").is_file()
