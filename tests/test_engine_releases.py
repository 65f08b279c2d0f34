"""Engine releases: a roofline's stack_version decides the engine fields a scenario leaves out, per arm (engines
set other limits when speculation is on), and each arm's effective settings are in its METRICS."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import yaml

from helpers import run_cli, simulate, write_scenario
from simlab.common.errors import InputError
from simlab.config.loading import scenario_from_data
from simlab.config.scenario import RELEASE_FIELDS
from simlab.hardware.releases import all_releases, get_release, known_versions


def _scenario(**engine) -> dict:
    return {
        "name": "releases", "seed": 3,
        "workload": {"kind": "closed_loop", "concurrency": 96, "num_requests": 192,
                     "prompt_tokens": {"dist": "constant", "value": 256},
                     "output_tokens": {"dist": "constant", "value": 64}},
        "hardware": {"kind": "roofline", "gpu": "h100-sxm", "model": "qwen3-8b", "stack": "sglang",
                     "stack_version": _sglang_capping()},
        **({"engine": engine} if engine else {}),
        "acceptance": {"kind": "iid", "alpha": 0.7},
        "arms": [{"name": "no-spec", "method": "none"},
                 {"name": "eagle3", "method": "eagle3", "gamma": 3, "scheduler": {"kind": "fixed"}}],
    }


def _sglang_capping() -> str:
    """An SGLang release that caps the running requests under speculation (the newest such)."""
    capping = [v for v, r in all_releases()["sglang"].items() if "max_num_seqs" in r.speculative]
    assert capping, "no SGLang release caps running requests under speculation"
    return capping[-1]


def test_every_release_value_names_its_source():
    releases = all_releases()
    assert set(releases) == {"vllm", "sglang", "trtllm"}
    for stack, by_version in releases.items():
        assert len(by_version) >= 1, stack
        for release in by_version.values():
            values = [*release.defaults.values(), *release.speculative.values(),
                      *(v for g in release.gpu_overrides.values() for v in g.values())]
            for value in values:
                # a file and its line at the release's ref, a file said not pinned there, or a measurement
                pinned = re.search(r"\.py:\d+", value.source) is not None
                unpinned = ".py" in value.source and "not pinned" in value.source
                assert pinned or unpinned or "measured" in value.source, (release.label, value)


def test_unknown_release_is_exit_2_naming_the_known_ones(tmp_path):
    data = _scenario()
    data["hardware"]["stack_version"] = "0.0.1"
    code, out, err = run_cli("run", str(write_scenario(tmp_path, data)), "--out", str(tmp_path / "out"))
    assert code == 2 and "Traceback" not in err
    assert "hardware.stack_version" in err and "'0.0.1'" in err
    for version in known_versions("sglang"):
        assert version in err
    assert not (tmp_path / "out").exists()


def test_a_release_on_a_stack_without_releases_names_the_field():
    with pytest.raises(InputError) as info:
        get_release("eager", "1.0", file="s.yaml")
    assert "hardware.stack_version" in str(info.value) and "no releases" in str(info.value)


def test_left_out_the_newest_release_is_taken():
    for stack in ("vllm", "sglang", "trtllm"):
        assert get_release(stack, None).version == known_versions(stack)[-1]


def test_unset_fields_take_the_release_defaults_per_arm(tmp_path):
    release = get_release("sglang", _sglang_capping())
    outcomes = simulate(write_scenario(tmp_path, _scenario()))
    plain, spec = outcomes["no-spec"].metrics["engine"], outcomes["eagle3"].metrics["engine"]
    assert spec["max_num_seqs"] == release.speculative["max_num_seqs"].value
    assert spec["from"]["max_num_seqs"] == f"{release.label} under speculation"
    default = release.default("max_num_seqs", "h100-sxm")
    assert plain["max_num_seqs"] == default.value and plain["from"]["max_num_seqs"] == f"{release.label} default"
    assert plain["kv_policy"] == spec["kv_policy"] == "paged"  # with a stack, KV is paged
    assert plain["stack_version"] == spec["stack_version"] == release.label
    assert spec["lookahead_slots"] == 3 and plain["lookahead_slots"] == 0


def test_fields_the_scenario_sets_are_kept(tmp_path):
    outcomes = simulate(write_scenario(tmp_path, _scenario(max_num_seqs=200, kv_policy="reserve")))
    for name in ("no-spec", "eagle3"):
        engine = outcomes[name].metrics["engine"]
        assert engine["max_num_seqs"] == 200 and engine["kv_policy"] == "reserve"
        assert engine["from"]["max_num_seqs"] == "scenario"


def test_a_cap_under_speculation_queues_the_rest(tmp_path):
    """96 users at once: without speculation all run together; the release's cap N under speculation runs
    N at a time (every step's batch <= N, and exactly N while enough wait), the rest queue, so the first
    tokens of the requests beyond the first N come only after a request of the first N finishes."""
    cap = get_release("sglang", _sglang_capping()).speculative["max_num_seqs"].value
    assert cap < 96
    outcomes = simulate(write_scenario(tmp_path, _scenario()))
    plain, spec = outcomes["no-spec"], outcomes["eagle3"]
    assert plain.steps.num_requests.max() == 96
    assert spec.steps.num_requests.max() == cap
    first = spec.requests.sort_values("id")
    start = first.first_token_s.to_numpy()
    finish = first.finish_s.to_numpy()
    waited = np.sort(start)[cap:cap + (96 - cap)]  # the first round's queued requests
    assert waited.min() >= np.sort(finish)[0] - 1e-12
    assert spec.metrics["mean_ttft_ms"] > plain.metrics["mean_ttft_ms"]


def test_a_dump_leaves_unset_engine_fields_unset():
    """A scenario read back from its dump (sweeps and what-ifs vary dumps) takes the same release defaults."""
    loaded = scenario_from_data(_scenario(max_num_seqs=64), file="s.yaml")
    dumped = loaded.scenario.model_dump(mode="json")
    assert dumped["engine"].get("max_num_seqs") == 64 and "kv_policy" not in dumped["engine"]
    again = scenario_from_data(dumped, file="s.yaml").scenario
    assert set(RELEASE_FIELDS) & again.engine.model_fields_set == {"max_num_seqs"}


def test_summary_holds_each_arms_engine(tmp_path):
    out = tmp_path / "out"
    code, _, err = run_cli("run", str(write_scenario(tmp_path, _scenario())), "--out", str(out))
    assert code == 0, err
    summary = json.loads((out / "summary.json").read_text())
    for arm in ("no-spec", "eagle3"):
        engine = summary["arms"][arm]["engine"]
        assert {"max_num_seqs", "max_batch_tokens", "kv_policy"} <= set(engine)
    assert summary["hardware"]["stack_version"] == _sglang_capping()


def test_a_table_keeps_simlabs_own_defaults(tmp_path):
    from helpers import flat_table

    data = _scenario()
    data["hardware"] = flat_table(0.01)
    outcomes = simulate(write_scenario(tmp_path, data))
    engine = outcomes["eagle3"].metrics["engine"]
    assert (engine["max_num_seqs"], engine["max_batch_tokens"], engine["kv_policy"]) == (256, 8192, "reserve")
    assert engine["stack_version"] is None


def test_release_files_are_valid_yaml_with_dates():
    for stack, by_version in all_releases().items():
        for release in by_version.values():
            assert release.date[:2] == "20" and release.ref, release.label
            yaml.safe_dump(release.describe())


def test_docs_table_is_generated_from_the_release_files():
    from pathlib import Path

    from simlab.common.doc_tables import table_between
    from simlab.hardware.release_table import markdown_table

    text = (Path(__file__).parent.parent / "docs" / "serving-stacks.md").read_text(encoding="utf-8")
    assert table_between(text, "releases table").strip() == markdown_table(), "run python scripts/update_docs_tables.py"


def test_a_drafter_the_release_does_not_serve_names_the_field(tmp_path):
    data = _scenario()
    data["hardware"]["stack_version"] = "0.5.3"  # before SGLang served DSpark
    data["arms"].append({"name": "dspark", "method": "dspark", "gamma": 7, "scheduler": {"kind": "fixed"}})
    code, _, err = run_cli("run", str(write_scenario(tmp_path, data)), "--out", str(tmp_path / "out"))
    assert code == 2 and "Traceback" not in err
    assert "arms[2].method" in err and "'dspark'" in err and "eagle3" in err and "stack_version" in err
    assert not (tmp_path / "out").exists()
