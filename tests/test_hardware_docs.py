"""The tables docs show are the ones the scripts print from the shipped fit and profiles."""

from __future__ import annotations

from pathlib import Path

import yaml

from simlab.calibration import refit as calibrate
from simlab.real.profiler import gpu_run as gpu_profile

REPO = Path(__file__).resolve().parent.parent


def test_hardware_doc_shows_the_shipped_fit():
    fitted = yaml.safe_load(calibrate.FITTED.read_text(encoding="utf-8"))
    doc = "\n".join((REPO / "docs" / page).read_text(encoding="utf-8") for page in ("roofline.md", "calibration.md"))
    for table in calibrate.markdown(fitted).split("\n\n"):
        assert table in doc, ("docs/roofline.md or docs/calibration.md is stale: paste "
                              "`python scripts/calibrate_hardware.py --markdown`")


def test_profiling_doc_shows_the_comparison_script_output():
    doc = (REPO / "docs" / "profiling.md").read_text(encoding="utf-8")
    assert gpu_profile.comparison(gpu_profile.DEFAULT_OUT) in doc, (
        "docs/profiling.md is stale: paste `python scripts/gpu_profile.py --compare`")
