"""report.html for a run, a sweep and a what-if: self-contained, its images shown by a real browser (headless
Chromium), and the tables' numbers (gains, SLA levels, Pareto fronts) right."""

import base64
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import run_cli, write_scenario
from studies_scenarios import linear_scenario, small_sweep_scenario

from simlab.common.outputs import is_simlab_file
from simlab.runner import run_scenario
from simlab.studies.figures import pareto_mask
from simlab.studies.gains import gain_table, sla_table
from simlab.studies.sweep import run_sweep
from simlab.studies.sweep_data import read_sweep_folder
from simlab.studies.whatif import prepare_whatif, run_whatif

IMG = re.compile(r'<img alt="[^"]*" src="data:image/png;base64,([A-Za-z0-9+/=]+)">')


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A run, a sweep (two facets) and a what-if folder, each with its report."""
    root = tmp_path_factory.mktemp("reports")
    run_dir = root / "run"
    run_scenario(linear_scenario(num_requests=40), out=run_dir, command="simlab run linear.yaml")
    sweep_file = write_scenario(root, small_sweep_scenario(
        {"grid": {"engine.replicas": [1, 2], "workload.concurrency": [1, 4, 8]}, "sla_user_tok_s": [100, 200]}))
    run_sweep(sweep_file, root / "sweep", workers=2, report=True, command="simlab sweep small.yaml")
    question = prepare_whatif(write_scenario(root, linear_scenario(), name="linear.yaml"), sla="p90_tpot_ms<=30.25",
                              vary="workload.concurrency", high=128)
    run_whatif(question, root / "whatif", workers=2, command="simlab whatif linear.yaml ...")
    return {"run": run_dir, "sweep": root / "sweep", "whatif": root / "whatif"}


def images_of(page: Path) -> list[bytes]:
    return [base64.b64decode(data) for data in IMG.findall(page.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("kind, expected", [
    ("run", ["report.png"]),
    ("sweep", ["report-pareto.png", "report-latency.png", "report-goodput.png", "report-acceptance.png",
               "report-verify.png"]),
    ("whatif", ["report-pareto.png", "report-sla.png"]),
])
def test_reports_are_self_contained_and_embed_their_pngs(folders, kind, expected):
    folder = folders[kind]
    if kind == "run":
        code, stdout, stderr = run_cli("report", str(folder))
        assert code == 0, stderr
        assert "no-spec" in stdout  # the comparison table is printed, as before
    page = folder / "report.html"
    text = page.read_text(encoding="utf-8")
    assert is_simlab_file(page)
    assert "<script" not in text and "<link" not in text and "http://" not in text and "https://" not in text
    embedded = images_of(page)
    assert embedded == [(folder / name).read_bytes() for name in expected]
    assert all(is_simlab_file(folder / name) or kind == "run" for name in expected)
    assert "scenario SHA-256 <code>" in text and "made by <code>simlab " in text


def test_sweep_report_tables(folders):
    text = (folders["sweep"] / "report.html").read_text(encoding="utf-8")
    assert "Gain at each load" in text and "at a per-user speed SLA" in text
    assert "replicas=2" in text  # a facet per replica count
    assert "0 points failed" in text


def test_report_of_a_folder_that_is_not_a_result_is_exit_2(tmp_path):
    code, _, stderr = run_cli("report", str(tmp_path))
    assert code == 2 and "is not a results folder" in stderr
    assert not (tmp_path / "report.html").exists()


def _chromium() -> str | None:
    return next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)


CHECK = """<script>window.addEventListener('load', () => {
  const images = Array.from(document.images);
  const shown = images.filter(i => i.complete && i.naturalWidth > 0 && i.naturalHeight > 0).length;
  const out = document.createElement('pre'); out.id = 'image-check';
  out.textContent = 'images=' + images.length + ' shown=' + shown; document.body.appendChild(out);
});</script>"""


@pytest.mark.skipif(_chromium() is None, reason="Chromium is not installed (apt-get install -y chromium; "
                                                "CI's .ci/run installs it)")
@pytest.mark.parametrize("kind", ["run", "sweep", "whatif"])
def test_chromium_shows_every_image(folders, kind, tmp_path):
    folder = folders[kind]
    if kind == "run":
        run_cli("report", str(folder))
    page = (folder / "report.html").read_text(encoding="utf-8")
    probe = tmp_path / "page.html"  # the page as shipped, plus a script that counts the images the browser drew
    probe.write_text(page.replace("</body>", CHECK + "</body>"), encoding="utf-8")
    result = subprocess.run(
        [_chromium(), "--headless", "--disable-gpu", "--no-sandbox", f"--user-data-dir={tmp_path / 'profile'}",
         "--virtual-time-budget=10000", "--dump-dom", probe.as_uri()],
        capture_output=True, text=True, timeout=180)
    match = re.search(r"images=(\d+) shown=(\d+)", result.stdout)
    assert match, result.stderr[-2000:]
    count, shown = map(int, match.groups())
    assert count == len(images_of(folder / "report.html")) >= 1
    assert shown == count


def test_pareto_mask():
    x = np.array([1.0, 2.0, 3.0, 2.0, 1.0, np.nan])
    y = np.array([5.0, 4.0, 1.0, 3.0, 5.0, 9.0])
    # (2,3) is beaten by (2,4); the two (1,5) tie and neither beats the other; NaN is never on the front
    assert pareto_mask(x, y).tolist() == [True, True, True, False, True, False]


def _synthetic_sweep(folder: Path) -> None:
    """Two loads, four arms, numbers chosen so every gain is known."""
    arms = {"no-spec": ("none", "none", 0), "fixed-3": ("dspark", "fixed", 3), "fixed-5": ("dspark", "fixed", 5),
            "hw": ("dspark", "hardware_aware", 7)}
    # (load, arm) -> (tok/s/GPU, user tok/s)
    values = {(8, "no-spec"): (100.0, 50.0), (8, "fixed-3"): (180.0, 90.0), (8, "fixed-5"): (200.0, 100.0),
              (8, "hw"): (220.0, 110.0), (64, "no-spec"): (400.0, 20.0), (64, "fixed-3"): (440.0, 22.0),
              (64, "fixed-5"): (380.0, 24.0), (64, "hw"): (484.0, 26.0)}
    points = [{"id": f"p{load}", "values": {"workload.concurrency": load}} for load in (8, 64)]
    doc = {"name": "synthetic", "fields": ["workload.concurrency"], "points": points, "arms": list(arms),
           "arm_kinds": {a: {"method": m, "scheduler": s, "gamma": g} for a, (m, s, g) in arms.items()},
           "scenario_sha256": "0" * 64, "load": None, "scenario": {"sweep": {"grid": {}}}}
    (folder / "sweep.json").write_text(json.dumps(doc))
    lines = ["point,workload.concurrency,arm,error,output_throughput_per_gpu,median_user_tok_s"]
    lines += [f"p{load},{load},{arm},,{thr!r},{user!r}" for (load, arm), (thr, user) in values.items()]
    (folder / "sweep.csv").write_text("\n".join(lines) + "\n")


def test_gain_table_against_no_spec_and_the_best_fixed_gamma_arm(tmp_path):
    _synthetic_sweep(tmp_path)
    table = gain_table(read_sweep_folder(tmp_path)).set_index(["load", "arm"])
    hw8, hw64 = table.loc[(8, "hw")], table.loc[(64, "hw")]
    assert hw8["vs_no_spec"] == pytest.approx(1.2) and hw8["best_fixed"] == "fixed-5"
    assert hw8["vs_best_fixed"] == pytest.approx(0.1)
    assert hw64["best_fixed"] == "fixed-3" and hw64["vs_best_fixed"] == pytest.approx(0.1)  # 484 / 440
    assert hw64["best_fixed_user"] == "fixed-5" and hw64["user_vs_best_fixed"] == pytest.approx(26 / 24 - 1)
    assert table.loc[(64, "no-spec"), "vs_no_spec"] == 0.0


def test_sla_table_picks_each_arms_best_point_meeting_the_level(tmp_path):
    _synthetic_sweep(tmp_path)
    table = sla_table(read_sweep_folder(tmp_path), [21.0, 60.0, 105.0], baseline="fixed-3").set_index(["level", "arm"])
    # at 21 tok/s/user: no-spec meets only at load 8 (50); fixed-3 at 64 (22 >= 21, 440 tok/s/GPU)
    assert table.loc[(21.0, "no-spec"), "output_throughput_per_gpu"] == 100.0
    assert table.loc[(21.0, "fixed-3"), "load"] == 64
    assert table.loc[(21.0, "hw"), "vs_baseline"] == pytest.approx(484 / 440 - 1)
    assert table.loc[(60.0, "hw"), "vs_baseline"] == pytest.approx(220 / 180 - 1)
    assert pd.isna(table.loc[(60.0, "no-spec"), "load"])
    assert table.loc[(105.0, "hw"), "output_throughput_per_gpu"] == 220.0
    assert pd.isna(table.loc[(105.0, "hw"), "vs_baseline"])  # fixed-3 never reaches 105 tok/s/user
