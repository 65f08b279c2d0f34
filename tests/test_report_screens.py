"""Every shipped report page, and one made now, read at a glance in a real browser (headless Chromium) at 1,024
and 1,600 px wide: no horizontal scrolling (the document is no wider than the window) and every image drawn.
A script that measures the page goes into a temporary copy; the shipped file is never changed."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import write_scenario
from studies_scenarios import small_sweep_scenario

from simlab.studies.sweep import run_sweep

REPO = Path(__file__).resolve().parents[1]
SHIPPED = sorted(REPO.glob("reports/**/report.html"))
WIDTHS_PX = (1024, 1600)
MEASURE = """<script>window.addEventListener('load', () => {
  const images = Array.from(document.images);
  const drawn = images.filter(i => i.complete && i.naturalWidth > 0 && i.naturalHeight > 0).length;
  const out = document.createElement('pre'); out.id = 'check';
  out.textContent = 'scroll=' + document.documentElement.scrollWidth + ' inner=' + window.innerWidth +
    ' images=' + images.length + ' drawn=' + drawn;
  document.body.appendChild(out);
});</script>"""


def chromium() -> str | None:
    return next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)


def measure(page: Path, width_px: int, work: Path) -> dict[str, int]:
    """The page's scroll width, the window's inner width, its images and those drawn, at ``width_px``."""
    probe = work / f"{page.parent.name}-{width_px}.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    result = subprocess.run(
        [chromium(), "--headless", "--disable-gpu", "--no-sandbox", f"--user-data-dir={work / 'profile'}",
         f"--window-size={width_px},900", "--hide-scrollbars", "--virtual-time-budget=5000", "--dump-dom",
         probe.as_uri()], capture_output=True, text=True, timeout=180)
    match = re.search(r"scroll=(\d+) inner=(\d+) images=(\d+) drawn=(\d+)", result.stdout)
    assert match, result.stderr[-2000:]
    return dict(zip(("scroll", "inner", "images", "drawn"), map(int, match.groups())))


@pytest.fixture(scope="module")
def fresh_page(tmp_path_factory) -> Path:
    """A small sweep's report, made now with the code as it is."""
    root = tmp_path_factory.mktemp("fresh")
    scenario = write_scenario(root, small_sweep_scenario(
        {"grid": {"engine.replicas": [1, 2], "workload.concurrency": [1, 4, 8]}, "sla_user_tok_s": [100, 200]}))
    run_sweep(scenario, root / "sweep", workers=1, report=True, command="simlab sweep small.yaml")
    return root / "sweep" / "report.html"


def test_every_study_ships_a_page():
    assert len(SHIPPED) >= 11  # seven studies and four plans (simlab/studies/shipped.py)


@pytest.mark.skipif(chromium() is None, reason="Chromium is not installed (apt-get install -y chromium; "
                                                "the page check needs a real browser)")
@pytest.mark.parametrize("width_px", WIDTHS_PX)
@pytest.mark.parametrize("page", [*SHIPPED, "fresh"], ids=lambda p: p if p == "fresh" else
                         str(p.parent.relative_to(REPO / "reports")))
def test_a_page_fits_the_window_and_draws_every_image(page, width_px, fresh_page, tmp_path):
    path = fresh_page if page == "fresh" else page
    seen = measure(path, width_px, tmp_path)
    assert seen["scroll"] <= seen["inner"], f"{path} scrolls sideways at {width_px} px: {seen}"
    assert seen["images"] >= 1 and seen["drawn"] == seen["images"], f"{path}: {seen}"
