"""The shipped presets against the DSpark paper's public figures (Table 1 copied here, not from the fit)."""

import numpy as np
import pytest

from simlab.acceptance import (
    build_acceptance,
    confidence_report,
    expected_conditional_acceptance,
    expected_tokens_per_round,
    load_preset,
    threshold_sweep,
    warmup_sample,
)
from simlab.acceptance.presets import PRESET_DIR
from simlab.config.acceptance import PresetAcceptance

# DSpark paper, Table 1: tau at gamma = 7. Columns: GSM8K MATH AIME25 | MBPP HumanEval LCB | MT-Bench Alpaca Arena-Hard
TABLE1 = {
    ("qwen3-4b", "eagle3"): [5.14, 4.62, 3.92, 3.69, 4.16, 3.77, 2.39, 2.26, 2.55],
    ("qwen3-4b", "dflash"): [5.40, 4.85, 4.15, 4.40, 4.74, 4.18, 3.07, 2.96, 2.83],
    ("qwen3-4b", "dspark"): [6.11, 5.70, 4.89, 5.13, 5.38, 4.86, 3.64, 3.54, 3.29],
    ("qwen3-8b", "eagle3"): [5.30, 4.77, 3.91, 3.96, 4.33, 4.17, 2.66, 2.54, 2.54],
    ("qwen3-8b", "dflash"): [5.33, 4.91, 4.07, 4.36, 4.64, 4.39, 3.11, 2.98, 2.81],
    ("qwen3-8b", "dspark"): [6.17, 5.78, 5.01, 5.16, 5.52, 5.17, 3.72, 3.58, 3.21],
    ("qwen3-14b", "eagle3"): [5.24, 4.60, 3.71, 3.81, 4.14, 4.01, 2.62, 2.47, 2.48],
    ("qwen3-14b", "dflash"): [5.41, 4.84, 3.98, 4.44, 4.59, 4.33, 3.10, 2.94, 2.72],
    ("qwen3-14b", "dspark"): [6.21, 5.74, 4.94, 5.26, 5.43, 5.02, 3.70, 3.58, 3.13],
}
DOMAINS = ("math", "code", "chat")
MODELS = ("qwen3-4b", "qwen3-8b", "qwen3-14b")


def _spec(model):
    return build_acceptance(PresetAcceptance(kind="preset", name=model), file=None)


@pytest.mark.parametrize("model,method", sorted(TABLE1))
def test_tau_at_gamma_7_reproduces_table_1_domain_means(model, method):
    # tau pooled over rounds, as the paper's evaluator and the simulator's spec_decode_acceptance_length count it
    spec = _spec(model)
    for i, domain in enumerate(DOMAINS):
        paper = float(np.mean(TABLE1[model, method][3 * i : 3 * i + 3]))
        fitted = expected_tokens_per_round(spec, method, domain, 7, pooled=True)
        assert fitted == pytest.approx(paper, rel=0.02)  # the requirement
        assert fitted == pytest.approx(paper, rel=1e-4)  # what the level solve achieves (5-decimal logits)


def test_dspark_gain_over_dflash_grows_with_gamma_as_in_the_ablation():
    # Quoted: +16/15/18 % at gamma 7 (these follow from Table 1) and +30/26/22 % at gamma 15 (fitted).
    # Tolerance 1.5 points at gamma 15: the quotes are whole percents (+-0.5) and two shape numbers per method
    # must also meet the nine Fig. 2 quotes, which disagree with Table 1 by up to ~0.03 (see docs).
    spec = _spec("qwen3-4b")
    quoted = {7: (0.16, 0.15, 0.18), 15: (0.30, 0.26, 0.22)}
    def tau(method, domain, gamma):
        return expected_tokens_per_round(spec, method, domain, gamma, pooled=True)

    gains = {g: [tau("dspark", d, g) / tau("dflash", d, g) - 1 for d in DOMAINS] for g in (7, 15)}
    assert gains[7] == pytest.approx(quoted[7], abs=0.006)
    assert gains[15] == pytest.approx(quoted[15], abs=0.015)
    assert all(g15 > g7 for g7, g15 in zip(gains[7], gains[15]))
    assert gains[15][0] > gains[15][1] > gains[15][2]  # math > code > chat, as quoted


def test_curve_shapes_follow_the_fig2_quotes():
    spec = _spec("qwen3-4b")

    def measured(method, domain):
        return expected_conditional_acceptance(spec, method, domain, 7, pooled=True)

    # position 1, quoted to two decimals; 0.03 covers the quotes' disagreement with Table 1 (docs, section 4)
    quotes = [("dflash", "math", 0, 0.88), ("eagle3", "math", 0, 0.81), ("dflash", "chat", 0, 0.72),
              ("eagle3", "chat", 0, 0.53), ("dflash", "code", 0, 0.87), ("dflash", "code", 6, 0.78),
              ("dflash", "chat", 6, 0.63), ("eagle3", "chat", 6, 0.74), ("dspark", "math", 0, 0.93)]
    for method, domain, index, value in quotes:
        assert measured(method, domain)[index] == pytest.approx(value, abs=0.03), (method, domain, index)
    for domain in ("code", "chat"):
        assert measured("dflash", domain)[6] < measured("dflash", domain)[0] - 0.05  # suffix decay
    assert measured("eagle3", "chat")[6] > measured("eagle3", "chat")[0] + 0.15  # AR rises, low at position 1
    for domain in DOMAINS:
        assert measured("dflash", domain)[0] > measured("eagle3", domain)[0]  # strong position 1
        assert np.all(measured("dspark", domain) > measured("dflash", domain))


def test_preset_files_cover_every_method_domain_and_position_and_say_what_is_extrapolated():
    for model in MODELS:
        preset = load_preset(model)
        assert set(preset.base_logit) == {"mtp", "eagle3", "dflash", "dspark"}
        for method, domains in preset.base_logit.items():
            assert set(domains) == set(DOMAINS)
            assert all(len(v) == 16 and np.isfinite(v).all() for v in domains.values())
        text = (PRESET_DIR / f"{model}.yaml").read_text()
        assert "extrapolated:" in text and "positions_8_to_16" in text and "mtp:" in text
        assert "arXiv:2607.05147" in text
        assert preset.heterogeneity.token_logit_sd > 0 and preset.confidence.noise_logit_sd > 0


def test_confidence_head_reproduces_the_papers_figures_on_chat():
    # ranges from the paper (DOMAIN.md section 4): raw ECE 3-8 %, after STS 0.4-2 %, AUC 0.81-0.91, matched
    # "roughly" (the brief): raw ECE is allowed 2.5-8.5 % because the fit puts position 7 at ~2.7 % (paper 3.3 %).
    # With 100 000 evaluation rounds the AUC's standard error is ~0.002 and an ECE's sampling floor ~0.3 %.
    spec = build_acceptance(
        PresetAcceptance(kind="preset", name="qwen3-4b", calibration_samples=200_000), file=None
    )
    report = confidence_report(spec, "dspark", {"chat": 1.0}, 7, calibrate=True, seed=123)
    for k in (1, 3, 5, 7):
        assert 0.81 <= report["auc"][k - 1] <= 0.91
        assert 0.025 <= report["ece_raw"][k - 1] <= 0.085
        assert report["ece_calibrated"][k - 1] <= 0.02
        assert report["ece_calibrated"][k - 1] < report["ece_raw"][k - 1] / 2
    assert all(t > 1 for t in report["temperatures"])  # a noisy head is over-confident


def test_static_threshold_sweep_reaches_the_papers_strict_end():
    spec = _spec("qwen3-4b")
    for domain in DOMAINS:
        sample = warmup_sample(spec, "dspark", {domain: 1.0}, 7, 100_000, seed=5)
        rates = [r["acceptance_rate"] for r in threshold_sweep(sample, [0.0, 0.5, 0.9, 0.95])]
        assert all(b > a for a, b in zip(rates, rates[1:]))
        assert 0.90 <= rates[-1] <= 0.97  # paper: 92.0-95.7 % at its (unstated) strictest threshold


def test_the_yaml_records_its_own_fit_honestly():
    import yaml

    for model in MODELS:
        doc = yaml.safe_load((PRESET_DIR / f"{model}.yaml").read_text())
        spec = _spec(model)
        for method in ("eagle3", "dflash", "dspark"):
            for i, domain in enumerate(DOMAINS):
                entry = doc["methods"][method][domain]
                assert entry["tau_gamma7"]["target"] == pytest.approx(
                    np.mean(TABLE1[model, method][3 * i : 3 * i + 3]), abs=1e-4
                )
                fitted = expected_tokens_per_round(spec, method, domain, 7, pooled=True)
                assert entry["tau_gamma7"]["fitted"] == pytest.approx(fitted, abs=1e-4)
        assert doc["methods"]["mtp"]["chat"]["base_logit"] == doc["methods"]["eagle3"]["chat"]["base_logit"]


@pytest.mark.slow
def test_shipped_presets_equal_a_fresh_derivation():
    import yaml

    from simlab.acceptance.derive import derive
    from simlab.acceptance.preset_document import preset_document

    derivation = derive()
    for model in MODELS:
        fresh = preset_document(derivation, model)
        shipped = yaml.safe_load((PRESET_DIR / f"{model}.yaml").read_text())
        assert shipped["heterogeneity"] == pytest.approx(fresh["heterogeneity"], abs=0.011)
        assert {k: v for k, v in shipped["confidence"].items()} == pytest.approx(fresh["confidence"], abs=0.011)
        for method, domains in fresh["methods"].items():
            for domain, entry in domains.items():
                assert shipped["methods"][method][domain]["base_logit"] == pytest.approx(entry["base_logit"], abs=2e-3)
