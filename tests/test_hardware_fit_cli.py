"""``simlab profiles fit``: measurements -> a table profile with the knee's smoothing and a stated residual."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml
from helpers import run_cli

from simlab.config.hardware import RooflineHardware
from simlab.hardware import load_profile
from simlab.hardware.knee import knee
from simlab.hardware.roofline_build import build_roofline
from simlab.calibration.userfit import fit_profile, read_measurements

NOISE = 0.02  # log noise on synthetic measurements
Z = 4.0


def write_csv(path, rows, header="kind,batch_tokens,context_tokens,step_ms"):
    path.write_text(header + "\n" + "\n".join(",".join(str(v) for v in row) for row in rows) + "\n")
    return path


def roofline_rows():
    """Verify, drafter and prefill measurements taken from the calibrated H100 roofline (exactly)."""
    cm = build_roofline(RooflineHardware(kind="roofline", gpu="h100-sxm", model="qwen3-8b", cuda_graph_buckets="none"))
    rows = [("verify", b, c, cm.verify_s(b, c, max(1, b / 4)) * 1e3)
            for b in (1, 4, 16, 64, 256, 1024, 4096) for c in (0, 65536, 1048576)]
    rows += [
        ("draft_parallel", 7 * r, "", cm.drafter.parallel_block_s(7 * r, r, 1024 * r) * 1e3)
        for r in (1, 4, 16, 64, 256)
    ]
    rows += [("draft_head", r, "", cm.drafter.head_step_s(r) * 1e3) for r in (1, 8)]
    rows += [("prefill", p, "", cm.prefill_s(p) * 1e3) for p in (512, 2048)]
    return rows


def test_fit_writes_a_loadable_table_within_its_stated_residual(tmp_path):
    rows = roofline_rows()
    csv, out = write_csv(tmp_path / "m.csv", rows), tmp_path / "mine.yaml"
    code, stdout, err = run_cli("profiles", "fit", str(csv), "--out", str(out))
    assert code == 0, err
    assert out.read_text().startswith("# written by simlab profiles fit\n")
    table = load_profile(out)
    provenance = table.config.provenance
    verify = next(r for r in provenance["residuals"] if r["curve"] == "verify")
    # the smooth user fit follows the calibrated roofline's 21 points within 2.5 % (2.2 % measured on 2026-12-01)
    assert verify["points"] == 21 and verify["max_abs_rel_error"] < 0.025 and "residual median" in stdout
    for kind, b, c, ms in rows:
        if kind == "verify":  # measured sizes are grid points and the fit is affine in context: no interpolation
            # the stated residual has 3 significant digits: half a unit of its last digit is 5e-5 here
            assert abs(table.verify_s(b, c) / (ms * 1e-3) - 1) <= verify["max_abs_rel_error"] + 5e-5
    assert table.config.verify.context_tokens == [0, 1048576]
    assert table.draft_s("dspark", 7, 4) > table.draft_s("dflash", 7, 4) > 0
    assert provenance["input"]["rows"] == len(rows) and provenance["measured"] is True
    # a rerun may replace the file it wrote
    assert run_cli("profiles", "fit", str(csv), "--out", str(out))[0] == 0


def test_fit_recovers_the_knee_from_noisy_measurements(tmp_path):
    truth = {"fixed_s": 6e-3, "per_token_s": 2.5e-5, "knee_width": 1.5, "per_context_token_s": 4e-8}
    rng = np.random.default_rng(11)
    rows = []
    for b in (1, 2, 4, 8, 16, 32, 64, 128, 192, 256, 384, 512, 768, 1024, 2048, 4096):
        for c in (0, 100_000, 400_000):
            t = knee(truth["fixed_s"], truth["per_token_s"] * b, truth["knee_width"]) + truth["per_context_token_s"] * c
            rows.append(("verify", b, c, t * 1e3 * math.exp(rng.normal(0.0, NOISE))))
    data = fit_profile(read_measurements(write_csv(tmp_path / "m.csv", rows)), name="x")
    fit = data["provenance"]["fit"]["verify"]
    # the residuals estimate the noise put on (median |x| of a normal is 0.6745 sigma; 48 points) ...
    residual = next(r for r in data["provenance"]["residuals"] if r["curve"] == "verify")
    assert residual["median_abs_rel_error"] == pytest.approx(0.6745 * NOISE, rel=0.35)
    # ... so the stated standard errors, from that residual variance, bound the recovered parameters
    for name, value in truth.items():
        assert abs(fit[name] - value) <= Z * fit["standard_errors"][name], (name, fit[name], value)


@pytest.mark.parametrize("content,needle", [
    (None, "no such measurements file"),
    ("", "not a readable CSV"),
    ("batch_tokens,step_ms\n1,6.0\n", "context_tokens: missing column"),
    ("batch_tokens,context_tokens,step_ms\n", "holds no measurements"),
    ("batch_tokens,context_tokens,step_ms\n1,0,fast\n", "line 2, step_ms: 'fast': not a number"),
    ("batch_tokens,context_tokens,step_ms\n1,0,6\n0,0,7\n", "line 3, batch_tokens: '0': out of range"),
    ("batch_tokens,context_tokens,step_ms\n1,-5,6\n", "line 2, context_tokens: '-5': out of range"),
    ("batch_tokens,context_tokens,step_ms\n1,,6\n", "line 2, context_tokens: '': not a number"),
    ("kind,batch_tokens,context_tokens,step_ms\nverfy,1,0,6\n", "line 2, kind: 'verfy': unknown kind"),
    ("batch_tokens,context_tokens,step_ms\n1,0,6\n2,0,6.1\n", "batch_tokens: 2: needs verify rows at 3"),
])
def test_malformed_measurements_exit_2_with_one_line_and_write_nothing(tmp_path, content, needle):
    csv = tmp_path / "m.csv"
    if content is not None:
        csv.write_text(content)
    out = tmp_path / "out.yaml"
    code, stdout, err = run_cli("profiles", "fit", str(csv), "--out", str(out))
    assert code == 2 and not out.exists()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(csv) in lines[0] and needle in lines[0], err


def test_fit_never_replaces_a_file_simlab_did_not_write(tmp_path):
    csv = write_csv(tmp_path / "m.csv", roofline_rows())
    mine = tmp_path / "notes.yaml"
    mine.write_text("my notes\n")
    code, _, err = run_cli("profiles", "fit", str(csv), "--out", str(mine))
    assert code == 2 and mine.read_text() == "my notes\n" and "simlab replaces only files it wrote" in err
    code, _, err = run_cli("profiles", "fit", str(csv), "--out", str(csv))
    assert code == 2 and "is an input of this command" in err


def test_few_draft_sizes_are_kept_as_measured_and_no_prefill_is_said(tmp_path):
    rows = [("verify", b, 0, 6 + b / 100) for b in (1, 64, 512, 4096)] + [("draft_parallel", 7, "", 2.0),
                                                                           ("draft_parallel", 14, "", 1.9)]
    data = fit_profile(read_measurements(write_csv(tmp_path / "m.csv", rows)), name="x")
    assert data["draft"]["parallel"] == {"batch_tokens": [7, 14], "step_s": [0.002, 0.002]}  # running maximum
    assert "no prefill rows" in data["provenance"]["fit"]["prefill"]
    assert "context_tokens" not in data["verify"]
    assert yaml.safe_load(yaml.safe_dump(data))["kind"] == "table"
