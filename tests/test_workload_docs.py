"""Every YAML example in docs/workload.md validates and builds (so the documentation stays runnable)."""

import json
import re
from pathlib import Path

import pytest
import yaml

from simlab.common.schema_errors import validate
from simlab.config import Scenario
from simlab.config.base import StrictModel
from simlab.config.workload import WorkloadConfig
from simlab.workload import build_workload

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "workload.md"
BLOCKS = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), flags=re.S) if DOC.is_file() else []


class _Holder(StrictModel):
    workload: WorkloadConfig


def test_docs_have_examples_of_every_kind_and_dist():
    kinds = {yaml.safe_load(block)["workload"]["kind"] for block in BLOCKS}
    assert kinds == {"trace", "poisson", "gamma", "closed_loop"}
    text = "\n".join(BLOCKS)
    for dist in ("constant", "uniform", "lognormal", "exponential", "empirical"):
        assert f"dist: {dist}" in text


@pytest.mark.parametrize("block", BLOCKS, ids=[f"example{i}" for i in range(len(BLOCKS))])
def test_example_builds(block):
    data = yaml.safe_load(block)
    if "arms" in data:
        validate(Scenario, data, file=DOC)
    cfg = validate(_Holder, {"workload": data["workload"]}, file=DOC).workload
    workload = build_workload(cfg, base_dir=REPO, seed=data.get("seed", 0), file=DOC)
    assert len(workload.requests) > 0
    assert json.loads(json.dumps(workload.source)) == workload.source  # the source description is JSON-able

