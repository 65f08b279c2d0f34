"""GPUs as data (simlab.hardware.gpu_files): the shipped files, a user's own file by path, the calibration a GPU
without a fit takes, and the errors of a bad file."""

from __future__ import annotations

import json

import pytest
import yaml

from helpers import run_cli
from simlab.common.errors import InputError
from simlab.hardware.gpu_files import gpus_dir
from simlab.hardware.specs import GIB, GPUS, get_gpu

SCENARIO = """name: gpu-file
workload: {{kind: closed_loop, concurrency: 4, num_requests: 16, prompt_tokens: {{dist: constant, value: 256}},
           output_tokens: {{dist: constant, value: 32}}}}
hardware: {{kind: roofline, gpu: {gpu}, model: qwen3-8b}}
acceptance: {{kind: iid, alpha: 0.7}}
arms: [{{name: no-spec, method: none}}]
"""


def test_the_contracts_gpus_ship_with_sources_and_the_first_four_keep_their_figures():
    assert {"b300", "gb200", "mi300x", "mi325x", "mi355x", "h20", "l40s", "rtx-pro-6000", "a100-40g"} <= set(GPUS)
    for path in gpus_dir().glob("*.yaml"):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert data["name"] == path.stem and data["sources"], path.name
    h100 = GPUS["h100-sxm"]  # the figures every stored profile was made with
    assert (h100.hbm_bytes_per_s, h100.bf16_flop_per_s, h100.fp8_flop_per_s, h100.memory_bytes,
            h100.nvlink_bytes_per_s) == (3.35e12, 989e12, 1979e12, 80 * GIB, 450e9)
    assert get_gpu("H100").name == "h100-sxm" and get_gpu("b300-hgx").name == "b300"
    assert GPUS["mi300x"].vendor == "amd" and GPUS["mi300x"].peer_bytes_per_s == 64e9


def test_a_gpu_without_a_fit_takes_the_fit_its_file_names_and_says_so(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO.format(gpu="mi300x"), encoding="utf-8")
    out = tmp_path / "out"
    code, _, stderr = run_cli("run", str(scenario), "--out", str(out), "--no-plot")
    assert code == 0, stderr
    hardware = json.loads((out / "summary.json").read_text())["hardware"]
    assert hardware["calibration"]["name"] == "h100-sxm/vllm"
    assert "No engine run on a mi300x was fitted" in hardware["calibration"]["note"]


def test_a_users_gpu_file_by_a_path_relative_to_the_scenario(tmp_path):
    mine = dict(yaml.safe_load((gpus_dir() / "h100-sxm.yaml").read_text()), name="my-h100", aliases=[])
    mine["hbm_bytes_per_s"] = 2 * 3.35e12
    (tmp_path / "gpus").mkdir()
    (tmp_path / "gpus" / "mine.yaml").write_text(yaml.safe_dump(mine), encoding="utf-8")
    spec = get_gpu("gpus/mine.yaml", file=str(tmp_path / "s.yaml"))
    assert spec.name == "my-h100" and spec.hbm_bytes_per_s == 6.7e12
    from simlab.config.hardware import RooflineHardware
    from simlab.hardware import build_cost_model

    def step(gpu):
        model = build_cost_model(RooflineHardware(kind="roofline", gpu=gpu, model="qwen3-8b", calibration="none"),
                                 base_dir=tmp_path, file=tmp_path / "s.yaml")
        return model.verify_s(1, 512.0, 1)

    assert step("gpus/mine.yaml") < 0.6 * step("h100-sxm")  # a decode step of one request reads weights: halved


@pytest.mark.parametrize("change,field", [
    ({"hbm_bytes_per_s": None}, "hbm_bytes_per_s"), ({"bf16_flop_per_s": -1}, "bf16_flop_per_s"),
    ({"memory_gb": 80}, "memory_gb"), ({"sources": {}}, "sources")])
def test_a_bad_gpu_file_is_exit_2_naming_the_field_and_writes_nothing(tmp_path, change, field):
    data = yaml.safe_load((gpus_dir() / "h100-sxm.yaml").read_text())
    for key, value in change.items():
        if value is None:
            del data[key]
        else:
            data[key] = value
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO.format(gpu="bad.yaml"), encoding="utf-8")
    out = tmp_path / "out"
    code, _, stderr = run_cli("run", str(scenario), "--out", str(out), "--no-plot")
    assert code == 2 and "bad.yaml" in stderr and field in stderr and "Traceback" not in stderr
    assert not out.exists()


def test_an_unknown_gpu_names_the_shipped_ones_and_the_file_form():
    with pytest.raises(InputError, match="mi355x.*path to a GPU file"):
        get_gpu("h800")
