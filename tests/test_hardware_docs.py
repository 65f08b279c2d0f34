"""The tables docs show are the ones the scripts print from the shipped fit and profiles."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))

import calibrate_hardware as calibrate  # noqa: E402
import gpu_profile  # noqa: E402


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
