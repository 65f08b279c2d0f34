"""``simlab calibrate``: STS lowers the ECE of miscalibrated confidences, keeps each position's order and puts each
temperature on its own position; the JSON is SGLang's and simlab's, with a reliability diagram beside it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import run_cli
from scipy.special import expit

from simlab.acceptance.calibration import apply_sts
from simlab.acceptance.logs.parsed import AcceptanceLog, Rounds
from simlab.acceptance.metrics import ece
from simlab.acceptance.sts_file import calibrate_rounds
from simlab.common.outputs import is_simlab_file

DISTORTION = np.array([2.0, 0.6, 1.6])  # raw head = sigmoid(distortion * true logit): over-, under-, over-confident


def miscalibrated(n: int, seed: int, verified: np.ndarray | None = None):
    """Rounds whose true conditional acceptance is known, with a head miscalibrated by a temperature per position."""
    rng = np.random.default_rng(seed)
    x = rng.normal(1.0, 1.5, (n, 3))
    true = expit(x)
    accepted = np.logical_and.accumulate(rng.random((n, 3)) < true, axis=1).sum(axis=1)
    verified = np.full(n, 3) if verified is None else verified
    accepted = np.minimum(accepted, verified)
    rounds = Rounds(np.full(n, "dspark", dtype=object), np.full(n, "*", dtype=object), np.full(n, -1),
                    np.arange(n).astype(object), np.zeros(n, dtype=np.int64), np.full(n, 3), verified, accepted,
                    expit(DISTORTION * x))
    return AcceptanceLog.from_rounds("sglang-sts", ["synthetic"], rounds), true


def test_sts_lowers_ece_to_the_sampling_floor_and_finds_each_position_temperature():
    log, true = miscalibrated(20000, seed=0)
    result = calibrate_rounds(log, holdout=0.5, seed=1)
    rows = np.random.default_rng(1).permutation(20000)[:10000]  # the held-out rows calibrate_rounds scored
    survival = np.arange(3)[None, :] < log.rounds.accepted[rows, None]
    # the ECE a perfectly calibrated predictor gets on these rows: the floor set by the sample size
    floor = [ece(np.cumprod(true[rows], axis=1)[:, j], survival[:, j]) for j in range(3)]
    for j in range(3):
        assert result.ece_after[j] < 2 * floor[j], (j, result.ece_after, floor)
        assert result.ece_before[j] > 2 * floor[j], (j, result.ece_before, floor)
    t = result.temperatures
    assert t[0] > 1.4 and t[1] < 0.8 and t[2] > 1.2  # each distortion found at its own position
    # calibration in the large per position, within binomial error of the held-out survival rate
    conf = log.rounds.conf[rows]
    calibrated = np.cumprod(apply_sts(conf, np.array(t)), axis=1)
    for j in range(3):
        p = survival[:, j].mean()
        assert abs(calibrated[:, j].mean() - p) <= 4 * np.sqrt(p * (1 - p) / len(rows))


def test_sts_keeps_the_order_of_samples_at_every_position():
    log, _ = miscalibrated(3000, seed=2)
    result = calibrate_rounds(log, holdout=0.0)
    conf = log.rounds.conf
    calibrated = apply_sts(conf, np.array(result.temperatures))
    for j in range(3):
        order = np.argsort(conf[:, j], kind="stable")
        assert np.all(np.diff(calibrated[order, j]) >= 0)
    assert result.auc == pytest.approx([
        _auc_reached(conf, log.rounds.accepted, j) for j in range(3)])


def _auc_reached(conf, accepted, j):
    from simlab.acceptance.metrics import auc

    reached = accepted >= j
    return auc(conf[reached, j], accepted[reached] > j)


def test_rounds_count_only_where_verified():
    verified = np.where(np.arange(4000) % 2 == 0, 3, 1)
    log, _ = miscalibrated(4000, seed=3, verified=verified)
    result = calibrate_rounds(log, holdout=0.0)
    assert result.num_scored == [4000, 2000, 2000]


def test_calibrate_command_writes_sglang_json_and_a_reliability_diagram(tmp_path):
    torch = pytest.importorskip("torch")
    log, _ = miscalibrated(2000, seed=4)
    logits = torch.tensor(np.log(log.rounds.conf / (1 - log.rounds.conf)))
    mask = torch.tensor(np.arange(3)[None, :] < log.rounds.accepted[:, None])
    shards = tmp_path / "shards"
    shards.mkdir()
    torch.save({"logits": logits[:1000], "prefix_mask": mask[:1000]}, shards / "a.pt")
    torch.save({"logits": logits[1000:], "prefix_mask": mask[1000:]}, shards / "b.pt")
    out = tmp_path / "sts.json"
    code, stdout, stderr = run_cli("calibrate", str(shards), "--out", str(out))
    assert code == 0, stderr
    doc = json.loads(out.read_text())
    assert {"temperatures", "ece_before", "ece_after", "num_samples", "dataset"} <= set(doc)
    assert doc["generator"].startswith("simlab") and doc["dataset"] == "shards" and doc["num_samples"] == 2000
    assert len(doc["temperatures"]) == 3 and all(t > 0 for t in doc["temperatures"])
    png = tmp_path / "sts.png"
    assert png.read_bytes().startswith(b"\x89PNG") and is_simlab_file(png) and is_simlab_file(out)
    assert "temperatures" in stdout
    code, _, stderr = run_cli("calibrate", str(shards), "--out", str(out), "-q")  # its own files: replaced
    assert code == 0, stderr


def test_calibrate_refuses_formats_without_confidences_and_foreign_outputs(tmp_path):
    fixtures = Path(__file__).parent / "fixtures" / "acceptance_logs"
    code, _, stderr = run_cli("calibrate", str(fixtures / "vllm_metrics.prom"), "--format", "vllm-metrics",
                              "--out", str(tmp_path / "s.json"))
    assert code == 2 and "carries no confidences" in stderr
    (tmp_path / "s.png").write_text("mine")
    code, _, stderr = run_cli("calibrate", str(fixtures / "rounds.csv"), "--format", "csv",
                              "--out", str(tmp_path / "s.json"))
    assert code == 2 and "s.png" in stderr and (tmp_path / "s.png").read_text() == "mine"
    code, _, stderr = run_cli("calibrate", str(fixtures / "rounds.csv"), "--format", "csv",
                              "--out", str(tmp_path / "t.json"))
    assert code == 2 and "at least 20 rounds" in stderr
