"""The fast `simlab validate` of CI, on the shipped pair: it runs end to end in a few minutes, writes what the
contract says, and every bounded error is within its test bound (the 5 % target, or what the run's sample size
can resolve: 4 standard errors of sampling noise, docs/validation.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

pytest.importorskip("torch")
pytest.importorskip("simlab.acceptance.fitting", reason="needs simlab acceptance fit's fitter")

from simlab.real.pair import default_pair_dir  # noqa: E402
from simlab.results.records import REQUEST_COLUMNS, STEP_COLUMNS  # noqa: E402
from tests.helpers import run_cli  # noqa: E402

SCENARIO = Path(__file__).parent / "validate_ci.yaml"
pytestmark = pytest.mark.skipif(not (default_pair_dir() / "target" / "config.json").exists(), reason="no shipped pair")


@pytest.fixture(scope="module")
def validated(tmp_path_factory):
    out = tmp_path_factory.mktemp("validate") / "ci"
    code, stdout, stderr = run_cli("validate", str(SCENARIO), "--out", str(out), "--check", "--quiet")
    return code, out, stderr


def test_every_error_is_within_its_bound(validated):
    code, out, stderr = validated
    document = json.loads((out / "validation.json").read_text())
    assert code == 0, (stderr, {arm: {k: (p["error"][k], p["bounds"][k]) for k in p["bounds"]}
                                for arm, p in document["arms"].items()})
    assert set(document["arms"]) == {"fixed", "hardware_aware", "async_topk"}
    for arm, part in document["arms"].items():
        assert part["within_bounds"], arm
        for key, target in part["target"].items():
            assert target == 0.05
            assert part["bounds"][key] == pytest.approx(max(0.05, 4 * part["noise"][key]))
            assert part["noise"][key] > 0  # sampling noise is estimated, never taken as nil
        positions = part["error"]["spec_decode_per_position_acceptance_rates"]
        assert len(positions) == 7 and positions[0] is not None


def test_the_folder_holds_the_real_run_the_fits_and_the_figure(validated):
    _, out, _ = validated
    real = out / "real"
    assert list(pd.read_csv(real / "requests.csv").columns) == list(REQUEST_COLUMNS)
    assert list(pd.read_csv(real / "steps.csv.gz").columns) == list(STEP_COLUMNS)
    assert set(pd.read_csv(real / "rounds.csv.gz")["arm"]) == {"fixed", "hardware_aware", "async_topk"}
    summary = json.loads((real / "summary.json").read_text())
    assert summary["mode"] == "real" and set(summary["arms"]) == {"fixed", "hardware_aware", "async_topk"}
    assert (out / "calibration" / "rounds.csv.gz").is_file()
    fitted = yaml.safe_load((out / "acceptance.yaml").read_text())
    assert fitted["kind"] == "positional" and len(fitted["methods"]["dspark"]["code"]) == 7
    for arm in ("fixed", "hardware_aware", "async_topk"):
        profile = yaml.safe_load((out / "profiles" / f"{arm}.yaml").read_text())
        assert profile["kind"] == "table" and profile["provenance"]["generator"] == "simlab validate"
    assert (out / "validation.png").read_bytes().startswith(b"\x89PNG")
    code, _, err = run_cli("report", str(real))
    assert code == 0, err
    code, _, err = run_cli("report", str(out))  # the validation folder: real against simulated
    assert code == 0, err
    page = (out / "report.html").read_text()
    assert "real against simulated" in page and "data:image/png;base64," in page
