"""``acceptance:`` may be a path to a fitted file (relative to the scenario file) or a shipped preset's name, as
``hardware:`` may be; a scenario using a file written by ``simlab acceptance fit`` runs end to end."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import run_cli, write_scenario
from scipy.special import logit

import simlab
from simlab.acceptance import build_acceptance
from simlab.acceptance.fitting.document import fitted_document, fitted_yaml
from simlab.acceptance.fitting.fit import fit_log
from simlab.acceptance.logs.parsed import AcceptanceLog
from simlab.acceptance.synthetic import simulate_rounds
from simlab.config.acceptance import PositionalAcceptance
from simlab.config.loading import load_scenario

FIXTURES = Path(__file__).parent / "fixtures" / "acceptance_logs"


def scenario(acceptance, **extra) -> dict:
    return {
        "name": "fitted-acceptance",
        "seed": 3,
        "workload": {"kind": "closed_loop", "concurrency": 8, "num_requests": 48,
                     "prompt_tokens": {"dist": "constant", "value": 128},
                     "output_tokens": {"dist": "constant", "value": 48}, "domains": {"chat": 0.5, "math": 0.5}},
        "hardware": "h100-sxm_qwen3-8b",
        "acceptance": acceptance,
        "arms": [{"name": "fixed", "method": "dspark", "gamma": 5, "scheduler": {"kind": "fixed"}},
                 {"name": "hw", "method": "dspark", "gamma": 5, "scheduler": {"kind": "hardware_aware"}}],
        **extra,
    }


@pytest.fixture(scope="module")
def fitted_file(tmp_path_factory) -> Path:
    """A file as `simlab acceptance fit` writes it, from a log with per-request rounds and confidences."""
    truth = PositionalAcceptance.model_validate({
        "kind": "positional", "methods": {"dspark": {"chat": [0.8, 0.75, 0.7, 0.66, 0.62],
                                                     "math": [0.9, 0.86, 0.82, 0.8, 0.76]}},
        "heterogeneity": {"request_logit_sd": 0.6, "step_logit_sd": 0.6, "step_correlation": 0.5,
                          "token_logit_sd": 0.5},
        "confidence": {"noise_logit_sd": 0.7, "bias_logit": 0.3}})
    rounds = simulate_rounds(build_acceptance(truth, file=None), "dspark", {"chat": 0.5, "math": 0.5}, 5, 12, 40,
                             seed=4)
    log = AcceptanceLog.from_rounds("simlab", ["synthetic"], rounds)
    fitted = fit_log(log)
    assert fitted.latent is not None and fitted.confidence is not None
    path = tmp_path_factory.mktemp("fits") / "fits" / "dspark.yaml"
    path.parent.mkdir()
    path.write_text(fitted_yaml(fitted_document(fitted, log)), encoding="utf-8")
    return path


def test_fitted_file_loads_as_positional_acceptance(fitted_file):
    text = fitted_file.read_text()
    assert text.startswith("# written by simlab acceptance fit")
    data = yaml.safe_load(text)
    cfg = PositionalAcceptance.model_validate(data)
    assert set(cfg.methods["dspark"]) == {"chat", "math"}
    measured = data["provenance"]["measured"]["dspark"]["chat"]
    assert len(measured["ci95_low"]) == len(measured["reached"]) == len(cfg.methods["dspark"]["chat"])
    assert set(data["provenance"]["fit"]["parameters"]) == {
        "request_logit_sd", "step_logit_sd", "step_correlation", "token_logit_sd", "bias_logit", "noise_logit_sd"}


def test_scenario_names_the_fitted_file_by_relative_path(tmp_path, fitted_file):
    folder = fitted_file.parent.parent / "studies"
    folder.mkdir(exist_ok=True)
    path = write_scenario(folder, scenario("../fits/dspark.yaml"))
    results = simlab.run_scenario(path, tmp_path / "out")
    data = yaml.safe_load(fitted_file.read_text())
    spec = build_acceptance(load_scenario(path).scenario.acceptance, file=path)
    for domain, curve in data["methods"]["dspark"].items():
        np.testing.assert_allclose(spec.base_logit["dspark"][domain], logit(np.array(curve)))
    assert spec.heterogeneity.model_dump() == data["heterogeneity"]
    assert spec.confidence.model_dump() == data["confidence"]
    assert results.summary["acceptance"]["file"] == str(fitted_file.resolve())
    assert results.summary["scenario"]["acceptance"] == "../fits/dspark.yaml"
    for arm in results.arms.values():
        assert arm["completed"] == 48 and arm["spec_decode_acceptance_length"] > 1.0
    assert (tmp_path / "out" / "summary.json").is_file()


def test_fitted_file_from_the_command_line_runs(tmp_path):
    fit = tmp_path / "vllm.yaml"
    code, _, stderr = run_cli("acceptance", "fit", str(FIXTURES / "vllm_metrics.prom"), "--format", "vllm-metrics",
                              "--method", "dspark", "--out", str(fit), "-q")
    assert code == 0, stderr
    path = write_scenario(tmp_path, {**scenario("vllm.yaml"), "workload": {
        **scenario("")["workload"], "domains": {"chat": 1.0}},
        "arms": [{"name": "fixed", "method": "dspark", "gamma": 3, "scheduler": {"kind": "fixed"}}]})
    results = simlab.run_scenario(path)
    # a '*' curve serves every domain; with no heterogeneity the measured rates are the model's rates
    rates = results.arms["fixed"]["spec_decode_conditional_acceptance_rates"]
    counts = results.arms["fixed"]["spec_decode_num_reached_per_position"]
    for k, expected in enumerate([0.6875, 0.681818, 0.6]):
        assert abs(rates[k] - expected) <= 4 * np.sqrt(expected * (1 - expected) / counts[k])


def test_refit_replaces_only_its_own_file(tmp_path):
    out = tmp_path / "mine.yaml"
    out.write_text("my notes\n")
    code, _, stderr = run_cli("acceptance", "fit", str(FIXTURES / "vllm_metrics.prom"), "--format", "vllm-metrics",
                              "--method", "dspark", "--out", str(out))
    assert code == 2 and "simlab replaces only files it wrote" in stderr
    assert out.read_text() == "my notes\n"
    out.unlink()
    for _ in range(2):  # the second run replaces the file the first wrote
        code, _, stderr = run_cli("acceptance", "fit", str(FIXTURES / "vllm_metrics.prom"), "--format",
                                  "vllm-metrics", "--method", "dspark", "--out", str(out), "-q")
        assert code == 0, stderr


def test_bare_name_is_a_shipped_preset(tmp_path):
    path = write_scenario(tmp_path, scenario("qwen3-8b"))
    spec = build_acceptance(load_scenario(path).scenario.acceptance, file=path)
    assert spec.source["kind"] == "preset" and spec.source["name"] == "qwen3-8b"


def test_a_preset_file_by_path_and_paths_inside_an_acceptance_file(tmp_path):
    from simlab.acceptance.presets import PRESET_DIR

    (tmp_path / "presets").mkdir()
    (tmp_path / "presets" / "mine.yaml").write_text((PRESET_DIR / "qwen3-4b.yaml").read_text())
    (tmp_path / "acc").mkdir()
    (tmp_path / "acc" / "pointer.yaml").write_text("kind: preset\nname: ../presets/mine.yaml\n")
    for setting in ("presets/mine.yaml", "acc/pointer.yaml"):
        path = write_scenario(tmp_path, scenario(setting))
        spec = build_acceptance(load_scenario(path).scenario.acceptance, file=path)
        assert spec.source["kind"] == "preset"
        assert Path(spec.source["path"]).resolve() == (tmp_path / "presets" / "mine.yaml").resolve()


@pytest.mark.parametrize("setting,content,message", [
    ("missing.yaml", None, "no such acceptance file"),
    ("qwen3-99b", None, "no acceptance preset of that name"),
    ("acc.yaml", "name: x\nworkload: {}\narms: []\n", "scenario file is not an acceptance file"),
    ("acc.yaml", "kind: table\nverify: {}\n", "hardware description"),
    ("acc.yaml", "kind: positional\nmethods: {dspark: {chat: [1.5]}}\n", "methods.dspark.chat[0]"),
    ("acc.yaml", "- 1\n", "must hold a mapping"),
])
def test_bad_acceptance_file_is_one_line(tmp_path, setting, content, message):
    if content is not None:
        (tmp_path / setting).write_text(content)
    path = write_scenario(tmp_path, scenario(setting))
    code, _, stderr = run_cli("run", str(path), "--out", str(tmp_path / "out"), "-q")
    assert code == 2 and message in stderr and len(stderr.strip().splitlines()) == 1, stderr
    assert not (tmp_path / "out").exists()
