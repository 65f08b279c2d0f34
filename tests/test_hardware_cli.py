"""``simlab profiles list`` and ``simlab profiles export`` (the typer sub-app on its own)."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from simlab.common.errors import InputError
from simlab.config.hardware import RooflineHardware
from simlab.hardware import load_profile, shipped_profiles
from simlab.hardware.cli import profiles_app
from simlab.hardware.roofline_build import build_roofline

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(profiles_app, list(args), env={"COLUMNS": "200"})


def test_list_shows_profiles_gpus_and_models():
    result = invoke("list")
    assert result.exit_code == 0, result.output
    for name in ("h100-sxm_qwen3-8b", "b200_llama-3-70b-tp8", "a100-80g", "h200", "llama-3.1-8b", "Qwen/Qwen3-14B"):
        assert name in result.output
    assert "147,456" in result.output  # qwen3-8b KV bytes per token


def test_export_roofline_spec_with_tp(tmp_path):
    out = tmp_path / "70b.yaml"
    result = invoke("export", "roofline:h200:llama-3-70b", "--tp", "4", "--out", str(out))
    assert result.exit_code == 0, result.output
    table = load_profile(out)
    roofline = build_roofline(RooflineHardware(kind="roofline", gpu="h200", model="llama-3-70b", tensor_parallel=4))
    assert table.verify_s(64, 65536) == pytest.approx(roofline.verify_s(64, 65536, 16), rel=1e-5)
    assert yaml.safe_load(out.read_text())["provenance"]["generator"] == "simlab profiles export"


def test_export_an_expert_parallel_roofline_records_every_gpu(tmp_path):
    out = tmp_path / "moe.yaml"
    result = invoke("export", "roofline:h100-sxm:qwen3-30b-a3b", "--tp", "2", "--ep", "4", "--out", str(out))
    assert result.exit_code == 0, result.output
    source = yaml.safe_load(out.read_text())["provenance"]["source"]
    assert (source["tensor_parallel"], source["expert_parallel"], source["num_gpus"]) == (2, 4, 4)
    assert load_profile(out).name == "h100-sxm_qwen3-30b-a3b-tp2-ep4"


def test_export_deepseek_on_eight_gpus_in_fp8(tmp_path):
    out = tmp_path / "ds.yaml"
    result = invoke("export", "roofline:h200:deepseek-v3", "--tp", "8", "--precision", "fp8", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(out.read_text())["provenance"]["source"]["parameters"]["precision"] == "fp8"


def test_export_scenario_file_uses_its_hardware(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump({"name": "x", "hardware": {"kind": "roofline", "gpu": "a100-80g",
                                                                  "model": "qwen3-4b"}, "arms": []}))
    out = tmp_path / "t.yaml"
    assert invoke("export", str(scenario), "--out", str(out)).exit_code == 0
    assert load_profile(out).name == "a100-80g_qwen3-4b"
    result = invoke("export", str(scenario), "--out", str(out), "--tp", "2")
    assert result.exit_code == 0 and load_profile(out).name == "a100-80g_qwen3-4b-tp2"


def test_export_shipped_profile_as_sglang_sps(tmp_path):
    out = tmp_path / "sps.json"
    result = invoke("export", "h100-sxm_qwen3-8b", "--format", "sglang-sps", "--context-tokens", "8192",
                    "--out", str(out))
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert set(data) == {"sample_batch_tokens", "sample_steps_per_sec", "max_batch_tokens"}
    cm = load_profile(shipped_profiles()["h100-sxm_qwen3-8b"])
    assert data["sample_steps_per_sec"][0] == pytest.approx(1 / cm.verify_s(1, 8192), rel=1e-5)
    assert "8192 context tokens" in result.output


@pytest.mark.parametrize(
    "args,field",
    [
        (["roofline:h300:qwen3-8b"], "SOURCE.gpu"),
        (["roofline:h100-sxm"], "SOURCE"),
        (["roofline:h100-sxm:llama-3-70b"], "SOURCE.tensor_parallel"),
        (["no-such-profile"], "SOURCE"),
        (["h100-sxm_qwen3-8b", "--tp", "2"], "--tp"),
        (["h100-sxm_qwen3-8b", "--ep", "2"], "--ep"),
        (["roofline:h100-sxm:qwen3-8b", "--precision", "int4"], "--precision"),
        (["roofline:h100-sxm:qwen3-8b", "--precision", "fp4"], "SOURCE.precision"),
        (["roofline:h100-sxm:qwen3-8b", "--ep", "2"], "SOURCE.expert_parallel"),
    ],
)
def test_bad_sources_raise_input_errors(tmp_path, args, field):
    out = tmp_path / "o.yaml"
    result = invoke("export", *args, "--out", str(out))
    assert isinstance(result.exception, InputError), result.output
    assert result.exception.field == field
    assert not out.exists()
