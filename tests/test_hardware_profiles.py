"""Shipped profiles (fresh, loadable, small) and resolving a scenario's ``hardware:`` to a cost model."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import TypeAdapter

from simlab.common.errors import InputError
from simlab.config.hardware import HardwareConfig, RooflineHardware, TableHardware
from simlab.hardware import RooflineCostModel, TableCostModel, build_cost_model, load_profile, shipped_profiles
from simlab.hardware.catalog import comparable, generate_profile, profile_name, shipped_specs
from simlab.hardware.export import dump_table_yaml

REPO = Path(__file__).resolve().parent.parent
PROFILES = REPO / "hw_profiles"


def test_every_catalogue_profile_is_shipped_and_nothing_else():
    names = {profile_name(*spec) for spec in shipped_specs()}
    assert "h100-sxm_qwen3-8b" in names and "h100-sxm_llama-3-70b-tp4" in names and len(names) == 30
    assert {"h100-sxm_qwen3-8b_sglang", "h100-sxm_qwen3-8b_fp8", "b200_qwen3-8b_fp8"} <= names
    assert {p.stem for p in PROFILES.glob("*.yaml") if not p.stem.endswith("_measured")} == names


def test_measured_profiles_load_and_say_how_they_were_measured():
    from simlab.hardware import build_cost_model

    for path in PROFILES.glob("*_measured.yaml"):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        provenance = data["provenance"]
        assert provenance["measured"] is True, path.name
        assert provenance.get("device") and "torch" in str(provenance["device"]), path.name
        model = build_cost_model(path.stem, base_dir=PROFILES, file=path)
        assert model.verify_s(1, 0.0, 1) > 0


@pytest.mark.parametrize("spec", shipped_specs(), ids=lambda s: profile_name(*s))
def test_shipped_profile_equals_what_the_script_regenerates(spec):
    path = PROFILES / f"{profile_name(*spec)}.yaml"
    shipped = yaml.safe_load(path.read_text(encoding="utf-8"))
    regenerated = yaml.safe_load(dump_table_yaml(generate_profile(*spec)))
    assert comparable(shipped) == comparable(regenerated), f"{path.name} is stale: run scripts/make_profiles.py"


@pytest.mark.parametrize("spec", shipped_specs(), ids=lambda s: profile_name(*s))
def test_shipped_profile_loads_is_small_and_says_it_is_not_measured(spec):
    path = PROFILES / f"{profile_name(*spec)}.yaml"
    assert path.stat().st_size <= 30_000
    cm = load_profile(path)
    provenance = cm.config.provenance
    assert provenance["measured"] is False and "NOT measured" in provenance["note"]
    assert provenance["source"]["gpu"] == spec[0] and provenance["source"]["tensor_parallel"] == spec[2]
    assert provenance["source"]["parameters"]["stack"] == spec[3]  # a shipped profile says its stack
    assert provenance["source"]["parameters"]["precision"] == spec[4]
    assert cm.has_context and cm.kv_cache_tokens() > 0
    assert cm.draft_s("dspark", 7, 32) > cm.draft_s("dflash", 7, 32) > 0


def test_comparable_ignores_only_date_and_version():
    a = {"kind": "table", "provenance": {"date": "2024-01-01", "simlab_version": "0.1", "note": "x"}}
    b = {"kind": "table", "provenance": {"date": "2025-01-01", "simlab_version": "0.2", "note": "x"}}
    assert comparable(a) == comparable(b)
    assert comparable(a) != comparable({**b, "provenance": {**b["provenance"], "note": "y"}})


def test_bare_name_resolves_to_the_shipped_profile(tmp_path):
    cm = build_cost_model("h100-sxm_qwen3-8b", base_dir=tmp_path, file="scenario.yaml")
    assert isinstance(cm, TableCostModel) and cm.name == "h100-sxm_qwen3-8b"
    assert 0.005 < cm.verify_s(1) < 0.008
    assert "h100-sxm_qwen3-8b" in shipped_profiles()


def test_unknown_bare_name_lists_what_exists(tmp_path):
    with pytest.raises(InputError) as err:
        build_cost_model("h100-sxm_qwen3-9b", base_dir=tmp_path, file="scenario.yaml")
    e = err.value
    assert e.file == "scenario.yaml" and e.field == "hardware" and e.value == "h100-sxm_qwen3-9b"
    assert "h100-sxm_qwen3-8b" in e.valid


def test_relative_path_resolves_against_the_scenario_folder(tmp_path):
    (tmp_path / "profiles").mkdir()
    table = {"kind": "table", "verify": {"batch_tokens": [1, 8], "step_s": [0.01, 0.02]}}
    (tmp_path / "profiles" / "mine.yaml").write_text(yaml.safe_dump(table))
    cm = build_cost_model("profiles/mine.yaml", base_dir=tmp_path, file=tmp_path / "s.yaml")
    assert cm.verify_s(8) == pytest.approx(0.02) and cm.name == "mine"
    with pytest.raises(InputError) as err:
        build_cost_model("profiles/other.yaml", base_dir=tmp_path, file=tmp_path / "s.yaml")
    assert err.value.field == "hardware" and "no such hardware profile file" in str(err.value)


@pytest.mark.parametrize(
    "content,needle",
    [
        ("- 1\n- 2\n", "must be a mapping"),
        ("", "must be a mapping"),
        ("kind: roofline\ngpu: h100-sxm\nmodel: qwen3-8b\n", "must hold a cost table"),
        ("name: x\nworkload: {}\narms: []\n", "a scenario file is not a profile"),
        ("kind: table\nverify: {batch_tokens: [1, 8], step_s: [0.01]}\n", "batch_tokens has 2 points but step_s has 1"),
        ("kind: table\nverify: {batch_tokens: [8, 1], step_s: [0.01, 0.02]}\n", "strictly increasing"),
        ("kind: table\nverify: {batch_tokens: [1, 8], context_tokens: [0, 10], step_s: [[0.01, 0.02]]}\n",
         "2 rows"),
        ("kind: table\nverify: {batch_tokens: [1], step_s: [0.01]}\nspeed: 3\n", "unknown field"),
    ],
)
def test_a_file_that_is_not_a_valid_table_is_an_input_error(tmp_path, content, needle):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(InputError) as err:
        build_cost_model(str(path), base_dir=tmp_path, file="scenario.yaml")
    assert err.value.file == str(path)
    assert needle in str(err.value)


def test_inline_objects_build_directly(tmp_path):
    table = TableHardware.model_validate({"kind": "table", "verify": {"batch_tokens": [1], "step_s": [0.01]}})
    assert isinstance(build_cost_model(table, base_dir=tmp_path, file="s.yaml"), TableCostModel)
    roofline = RooflineHardware(kind="roofline", gpu="b200", model="qwen3-4b", cuda_graph_buckets=[1, 2, 4])
    cm = build_cost_model(roofline, base_dir=tmp_path, file="s.yaml")
    assert isinstance(cm, RooflineCostModel) and cm.buckets.sizes == [1, 2, 4]


@pytest.mark.parametrize("name", ["full.yaml", "inline.yaml", "closed_loop.yaml"])
def test_contract_hardware_sections_build(name, tmp_path):
    contract = {
        "full.yaml": {"kind": "roofline", "gpu": "h100-sxm", "model": "qwen3-8b"},
        "inline.yaml": {"kind": "table", "verify": {"batch_tokens": [1, 64, 128, 256, 512, 1024, 2048, 4096],
                                                    "step_s": [0.006, 0.0063, 0.0068, 0.0095, 0.0125, 0.0215,
                                                               0.04, 0.078]},
                        "draft": {"autoregressive": {"step_s": 0.0009}, "parallel": {"step_s": 0.0022},
                                  "sequential_head": {"step_s": 0.00002}},
                        "prefill": {"per_token_s": 0.00003}},
        "closed_loop.yaml": "h100-sxm_qwen3-8b",
    }[name]
    cfg = TypeAdapter(HardwareConfig).validate_python(contract)
    cm = build_cost_model(cfg, base_dir=tmp_path, file=name)
    assert cm.verify_s(1) > 0 and cm.draft_s("dspark", 7, 32) > 0
