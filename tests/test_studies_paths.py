"""Dotted field paths: parsed, checked against the schema along the data (defaults included), set on a copy."""

import pytest
from studies_scenarios import linear_scenario

from simlab.common.errors import InputError
from simlab.studies.paths import check_path, format_path, get_path, parse_path, set_path


def test_parse_and_format_round_trip():
    assert parse_path("arms[2].gamma") == ["arms", 2, "gamma"]
    assert parse_path("acceptance.confidence.noise_logit_sd") == ["acceptance", "confidence", "noise_logit_sd"]
    assert format_path(["arms", 2, "scheduler", "kind"]) == "arms[2].scheduler.kind"


@pytest.mark.parametrize("path", ["", "workload..rate", "arms[x].gamma", "arms[1]gamma", "1abc", "a.b[-1]"])
def test_malformed_paths_are_input_errors(path):
    with pytest.raises(InputError, match="not a field path"):
        parse_path(path)


@pytest.mark.parametrize("path", ["workload.concurrency", "engine.replicas", "hardware", "arms[1].gamma",
                                  "acceptance.confidence.noise_logit_sd", "arms[0].name", "slo.tpot_ms",
                                  "workload.domains.math", "hardware.verify.step_s"])
def test_valid_paths_include_fields_left_at_their_defaults(path):
    check_path(linear_scenario(), path)


@pytest.mark.parametrize("path, problem, valid", [
    ("workload.concurency", "workload has no field 'concurency'", "fields of workload are kind, concurrency"),
    ("arms[2].gamma", "arms has 2 items", "arms[0] to arms[1]"),
    ("engine.replicas.count", "engine.replicas is a value", "vary engine.replicas itself"),
    ("hardware.gpu", "hardware has no field 'gpu'", "fields of hardware are kind, name, verify"),
    ("nothing", "the scenario has no field 'nothing'", "fields of the scenario are name, seed"),
    ("workload[0]", "workload is not a list", "fields of workload"),
])
def test_bad_paths_name_the_path_and_what_is_there(path, problem, valid):
    with pytest.raises(InputError) as info:
        check_path(linear_scenario(), path, file="s.yaml", field="sweep.grid")
    message = info.value.message
    assert message.startswith(f"s.yaml: sweep.grid: {path!r}: ")
    assert problem in message and valid in message


def test_a_profile_name_has_no_fields():
    data = {**linear_scenario(), "hardware": "h100-sxm_qwen3-8b"}
    with pytest.raises(InputError, match="hardware is a value.*'h100-sxm_qwen3-8b'"):
        check_path(data, "hardware.gpu")


def test_set_path_copies_and_creates_missing_mappings():
    data = linear_scenario()
    parts = check_path(data, "acceptance.confidence.noise_logit_sd")
    changed = set_path(data, parts, 0.5)
    assert changed["acceptance"]["confidence"] == {"noise_logit_sd": 0.5}
    assert "confidence" not in data["acceptance"]  # the original is untouched
    assert get_path(changed, parts) == 0.5
    assert get_path(changed, ["engine", "replicas"], default="absent") == "absent"
    assert set_path(data, ["arms", 1, "gamma"], 5)["arms"][1] == {"name": "dflash-3", "method": "dflash", "gamma": 5}
