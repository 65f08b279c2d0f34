"""The runnable examples in docs/acceptance.md load, and their acceptance configs build and cover their arms."""

import re
from pathlib import Path

import pytest
import yaml

from simlab.acceptance import build_acceptance, check_coverage
from simlab.config import Scenario

DOC = Path(__file__).resolve().parent.parent / "docs" / "acceptance.md"
EXAMPLES = [b for b in re.findall(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S) if b.startswith("name:")]


def test_there_is_an_example_for_each_kind():
    kinds = {yaml.safe_load(b)["acceptance"]["kind"] for b in EXAMPLES}
    assert kinds == {"iid", "positional", "preset"}


@pytest.mark.parametrize("text", EXAMPLES, ids=lambda t: t.splitlines()[0])
def test_example_builds_and_covers_its_arms(text):
    scenario = Scenario.model_validate(yaml.safe_load(text))
    spec = build_acceptance(scenario.acceptance, file=DOC)
    domains = list(scenario.workload.domains)
    check_coverage(spec, [(a.method, a.draft_len) for a in scenario.arms if a.draft_len], domains, file=DOC)
