"""From acceptance configs to specs: defaults, overrides, presets by name and path, and coverage errors."""

import numpy as np
import pytest
import yaml
from pydantic import TypeAdapter

from simlab.acceptance import build_acceptance, check_coverage, shipped_presets
from simlab.acceptance.spec import ANY_DOMAIN
from simlab.common.errors import InputError
from simlab.config.acceptance import AcceptanceConfig

FILE = "scenario.yaml"


def _cfg(data):
    return TypeAdapter(AcceptanceConfig).validate_python(data)


def test_iid_covers_every_method_and_domain_with_a_perfect_head():
    spec = build_acceptance(_cfg({"kind": "iid", "alpha": 0.75}), file=FILE)
    for method in ("mtp", "eagle3", "dflash", "dspark"):
        assert np.allclose(spec.curve(method, "anything", 16), np.log(3.0))
        assert ANY_DOMAIN in spec.base_logit[method]
    assert spec.heterogeneity.request_logit_sd == spec.heterogeneity.token_logit_sd == 0.0
    assert spec.confidence.noise_logit_sd == spec.confidence.bias_logit == 0.0
    check_coverage(spec, [("dspark", 16), ("none", None)], ["math", "whatever"], file=FILE)


def test_iid_certain_acceptance_is_an_infinite_logit():
    spec = build_acceptance(_cfg({"kind": "iid", "alpha": 1.0}), file=FILE)
    assert np.isposinf(spec.curve("eagle3", "chat", 4)).all()


def test_positional_takes_logits_of_the_curve_and_the_confidence_error():
    cfg = _cfg({
        "kind": "positional",
        "methods": {"dspark": {"chat": [0.8, 0.76, 0.73]}, "dflash": {"chat": [0.78, 0.7, 0.66]}},
        "confidence": {"noise_logit_sd": 0.6, "bias_logit": 0.4},
    })
    spec = build_acceptance(cfg, file=FILE)
    assert spec.curve("dspark", "chat", 3) == pytest.approx(
        np.log(np.array([0.8, 0.76, 0.73]) / np.array([0.2, 0.24, 0.27]))
    )
    assert spec.confidence.noise_logit_sd == 0.6 and spec.confidence.bias_logit == 0.4
    assert spec.heterogeneity.step_logit_sd == 0.0


def test_preset_defaults_and_field_by_field_overrides():
    plain = build_acceptance(_cfg({"kind": "preset", "name": "qwen3-8b"}), file=FILE)
    assert plain.heterogeneity.token_logit_sd > 0 and plain.confidence.noise_logit_sd > 0
    assert plain.source["kind"] == "preset" and plain.source["name"] == "qwen3-8b"
    changed = build_acceptance(
        _cfg({"kind": "preset", "name": "qwen3-8b", "confidence": {"bias_logit": 0.0},
              "heterogeneity": {"step_correlation": 0.3}}),
        file=FILE,
    )
    assert changed.confidence.bias_logit == 0.0
    assert changed.confidence.noise_logit_sd == plain.confidence.noise_logit_sd
    assert changed.heterogeneity.step_correlation == 0.3
    assert changed.heterogeneity.token_logit_sd == plain.heterogeneity.token_logit_sd
    for method in ("mtp", "eagle3", "dflash", "dspark"):
        for domain in ("math", "code", "chat"):
            assert len(plain.curve(method, domain, 16)) == 16


def test_preset_by_path_relative_to_the_scenario(tmp_path):
    (tmp_path / "presets").mkdir()
    (tmp_path / "presets" / "mine.yaml").write_text(
        "name: mine\n"
        "methods: {dspark: {chat: {base_logit: [2.0, 1.5, .inf]}}}\n"
        "heterogeneity: {token_logit_sd: 0.5}\n"
    )
    spec = build_acceptance(_cfg({"kind": "preset", "name": "presets/mine.yaml"}), file=tmp_path / "s.yaml")
    assert spec.curve("dspark", "chat", 2) == pytest.approx([2.0, 1.5])
    assert np.isposinf(spec.curve("dspark", "chat", 3)[2])
    assert spec.heterogeneity.token_logit_sd == 0.5


def test_unknown_preset_lists_the_shipped_ones():
    with pytest.raises(InputError) as err:
        build_acceptance(_cfg({"kind": "preset", "name": "qwen3-70b"}), file=FILE)
    text = str(err.value)
    assert "acceptance.name" in text and "qwen3-70b" in text
    assert set(shipped_presets()) >= {"qwen3-4b", "qwen3-8b", "qwen3-14b"}
    assert all(name in text for name in shipped_presets())
    assert text.startswith(FILE)


def test_bad_preset_file_names_the_file_and_field(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"name": "bad", "methods": {"dspark": {"chat": {"base_logit": []}}}}))
    with pytest.raises(InputError) as err:
        build_acceptance(_cfg({"kind": "preset", "name": str(path)}), file=FILE)
    assert str(path) in str(err.value) and "methods.dspark.chat.base_logit" in str(err.value)


def _positional():
    return build_acceptance(_cfg({"kind": "positional", "methods": {"dflash": {"chat": [0.8] * 7}}}), file=FILE)


def test_coverage_names_a_missing_method():
    with pytest.raises(InputError) as err:
        check_coverage(_positional(), [("dspark", 7)], ["chat"], file=FILE)
    assert "acceptance.methods.dspark" in str(err.value)


def test_coverage_names_a_curve_too_short_for_gamma():
    with pytest.raises(InputError) as err:
        check_coverage(_positional(), [("dflash", 8)], ["chat"], file=FILE)
    assert "acceptance.methods.dflash.chat" in str(err.value) and "gamma 8" in str(err.value)


def test_coverage_names_a_domain_without_a_curve():
    with pytest.raises(InputError) as err:
        check_coverage(_positional(), [("dflash", 7)], ["chat", "code"], file=FILE)
    assert "acceptance.methods.dflash" in str(err.value) and "'code'" in str(err.value)


def test_coverage_of_a_preset_lists_its_domains():
    spec = build_acceptance(_cfg({"kind": "preset", "name": "qwen3-4b"}), file=FILE)
    check_coverage(spec, [("dspark", 16), ("mtp", 1), ("eagle3", 7)], ["math", "code", "chat"], file=FILE)
    with pytest.raises(InputError) as err:
        check_coverage(spec, [("dspark", 7)], ["math", "legal"], file=FILE)
    text = str(err.value)
    assert "workload.domains" in text and "'legal'" in text and "math, code, chat" in text
