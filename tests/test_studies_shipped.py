"""The shipped studies: every scenarios/studies/*.yaml has a committed report in reports/<study>/, made from
the scenario as it is now (its hash), with numbers the code still gives (one cheap point, or for a what-if one
probe, simulated again in-process and compared with the committed CSV row exactly). When this fails, rerun
`python scripts/make_reports.py STUDY` and commit reports/."""

import json
from pathlib import Path

import pytest

from simlab.studies.grid import load_sweep
from simlab.studies.shipped import STUDIES, check_report

REPO = Path(__file__).resolve().parents[1]


def test_every_shipped_study_is_listed_and_documented():
    root = REPO / "scenarios" / "studies"
    files = sorted(p.relative_to(root).with_suffix("").as_posix() for p in root.rglob("*.yaml"))
    assert files == sorted(s.name for s in STUDIES)
    docs = (REPO / "docs" / "shipped-studies.md").read_text(encoding="utf-8")
    for item in STUDIES:
        assert f"### {item.name}" in docs, f"docs/shipped-studies.md has no paragraph on {item.name}"
        assert f"reports/{item.name}/" in docs


@pytest.mark.parametrize("name", [s.name for s in STUDIES if s.kind == "sweep"])
def test_sweep_studies_are_valid_sweeps(name):
    sweep = load_sweep(REPO / "scenarios" / "studies" / f"{name}.yaml")
    assert len(sweep.points) >= 4


@pytest.mark.parametrize("item", STUDIES, ids=lambda s: s.name)
def test_committed_report_is_current(item):
    problems = check_report(item, REPO)
    assert not problems, "; ".join(problems) + f" (rerun: python scripts/make_reports.py {item.name})"
    study = json.loads((REPO / "reports" / item.name / "study.json").read_text())
    assert study["command"] == item.command and study["scenario"] == item.scenario
    page = (REPO / "reports" / item.name / "report.html").read_text(encoding="utf-8")
    assert study["scenario_sha256"] in page and "data:image/png;base64," in page
