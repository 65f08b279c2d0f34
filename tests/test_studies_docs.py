"""docs/studies.md: its sweep example is a valid sweep of the size it says, and its commands exist."""

import re
from pathlib import Path

import yaml

from helpers import run_cli
from simlab.studies.grid import read_sweep

DOC = Path(__file__).resolve().parents[1] / "docs" / "studies.md"


def test_the_sweep_example_expands_to_the_points_it_describes(tmp_path):
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    example = next(yaml.safe_load(b) for b in blocks if "sweep:" in b)
    sweep = read_sweep(example, file=tmp_path / "example.yaml")
    assert len(sweep.points) == 12  # "This is 2 x 2 x 3 = 12 points"
    assert sweep.fields == ("hardware", "arms[1].gamma", "workload.concurrency", "workload.num_requests")


def test_the_commands_are_there():
    for command in ("sweep", "whatif", "report"):
        code, stdout, _ = run_cli(command, "--help")
        assert code == 0 and "Usage" in stdout
