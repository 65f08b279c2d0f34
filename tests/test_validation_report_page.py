"""The validation folder's report.html: every arm's rows, the figure, and nothing wider than the window.

The fixture is the validation.json of a heavy-load `simlab validate scenarios/validate_heavy.yaml` run on this
project's VM (2026-12-01)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from simlab.real.validate.report_html import write_validation_report

FIXTURE = Path(__file__).parent / "fixtures" / "validation" / "validation.json"


@pytest.fixture()
def page(tmp_path) -> Path:
    shutil.copy(FIXTURE, tmp_path / "validation.json")
    return write_validation_report(tmp_path)


def test_page_has_every_arm_and_the_figure(page):
    text = page.read_text(encoding="utf-8")
    for arm in ("fixed", "hardware_aware", "async_topk"):
        assert f"<td>{arm}</td>" in text
    assert "data:image/png;base64," in text and "<h2>settings</h2>" in text
    assert (page.parent / "validation.png").read_bytes().startswith(b"\x89PNG")


def _chromium() -> str | None:
    return next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)


WIDTH_CHECK = """<script>window.addEventListener('load', () => {
  const out = document.createElement('div'); out.id = 'width-check';
  const root = document.documentElement;
  out.textContent = 'scroll=' + root.scrollWidth + ' client=' + root.clientWidth;
  document.body.appendChild(out);
});</script>"""


@pytest.mark.skipif(_chromium() is None, reason="Chromium is not installed (apt-get install -y chromium; "
                                                "CI's .ci/run installs it)")
def test_nothing_runs_off_the_page_in_a_browser(page, tmp_path):
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", WIDTH_CHECK + "</body>"), encoding="utf-8")
    result = subprocess.run(
        [_chromium(), "--headless", "--disable-gpu", "--no-sandbox", f"--user-data-dir={tmp_path / 'profile'}",
         "--window-size=1024,800", "--virtual-time-budget=10000", "--dump-dom", probe.as_uri()],
        capture_output=True, text=True, timeout=180)
    match = re.search(r"scroll=(\d+) client=(\d+)", result.stdout)
    assert match, result.stderr[-2000:]
    scroll, client = map(int, match.groups())
    assert scroll <= client, f"the page is {scroll} px wide in a {client} px window"
