"""``simlab profile`` end to end on the tiny model: the file is a simulator profile that ``simlab run`` accepts,
its curves are positive and monotone, it says where it came from, SGLang's SPS export reads it, and bad input
exits 2 with one message."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

torch = pytest.importorskip("torch")
from typer.testing import CliRunner  # noqa: E402

from simlab.hardware import build_cost_model  # noqa: E402
from simlab.hardware.cli import profiles_app  # noqa: E402
from simlab.real.profiler.cli import main  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
QUICK = ["--device", "cpu", "--model", "tiny", "--quick", "--threads", "1", "--quiet"]


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    out = tmp_path_factory.mktemp("profile") / "tiny_measured.yaml"
    assert main(QUICK + ["--out", str(out)]) == 0
    return out


def test_cli_module_does_not_import_torch():
    code = "import sys, simlab.real.profiler.cli; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "False"


def test_profile_loads_as_a_simulator_cost_model(profile):
    cm = build_cost_model(str(profile), base_dir=profile.parent, file=None)
    verify = cm.config.verify
    assert verify.batch_tokens == [1, 2, 4, 8, 16, 32, 64] and verify.context_tokens == [0, 256]
    assert cm.verify_s(8, 0) > 0 and cm.verify_s(64, 256) >= cm.verify_s(1, 0)
    assert cm.draft_s("dspark", 7, 4) > cm.draft_s("dflash", 7, 4) > 0  # the sequential head costs something
    assert cm.draft_s("eagle3", 7, 4) > 0 and cm.prefill_s(100) > 0
    assert cm.config.cuda_graph_buckets is None and cm.kv_cache_tokens() is None  # CPU: no graphs, no KV plan


def test_timings_are_positive_and_monotone_in_batch_tokens(profile):
    data = yaml.safe_load(profile.read_text())
    grid = np.asarray(data["verify"]["step_s"])
    assert (grid > 0).all() and (np.diff(grid, axis=1) >= 0).all() and (np.diff(grid, axis=0) >= 0).all()
    raw = np.asarray(data["provenance"]["raw"]["verify_step_s"])
    assert raw.shape == grid.shape and (grid >= raw).all() and (raw > 0).all()
    for entry in data["draft"].values():
        steps = np.asarray(entry["step_s"])
        assert (steps > 0).all() and (np.diff(steps) >= 0).all()
    assert data["draft"]["parallel"]["batch_tokens"] == [7, 14, 28, 56]
    assert data["draft"]["sequential_head"]["batch_tokens"] == [1, 2, 4, 8]
    assert 0 < data["prefill"]["per_token_s"] < 1


def test_provenance_says_how_where_and_what_was_measured(profile):
    provenance = yaml.safe_load(profile.read_text())["provenance"]
    assert provenance["measured"] is True and provenance["complete"] is True
    for key in ("date", "method", "placement", "replays", "warmup", "grid", "dtype", "command", "raw", "elapsed_s"):
        assert provenance[key] not in (None, "", [], {}), key
    device = provenance["device"]
    assert device["type"] == "cpu" and device["torch_version"] == str(torch.__version__)
    assert device["torch_threads"] == 1
    assert provenance["dtype"] == "float32" and provenance["replays"] == 3 and provenance["cuda_graphs"] is False
    assert provenance["model"]["config"]["hidden_size"] == 64 and "tiny" in provenance["model"]["source"]
    assert provenance["drafter"]["config"]["layout"] == "dspark"
    assert provenance["query_tokens_per_request"] == 8 and "total" in provenance["context_axis"]
    assert provenance["grid"]["batch_tokens"] == [1, 2, 4, 8, 16, 32, 64]
    assert provenance["command"].startswith("simlab profile --device cpu --model tiny")


def test_simlab_run_accepts_a_scenario_that_uses_the_profile(profile, tmp_path):
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump({
        "name": "measured", "seed": 1,
        "workload": {"kind": "poisson", "rate": 50.0, "num_requests": 30,
                     "prompt_tokens": {"dist": "uniform", "low": 16, "high": 64},
                     "output_tokens": {"dist": "uniform", "low": 8, "high": 24}},
        "hardware": str(profile),
        "engine": {"max_num_seqs": 8, "max_batch_tokens": 64, "kv_cache_tokens": 4096},
        "acceptance": {"kind": "iid", "alpha": 0.7},
        "arms": [{"name": "no-spec", "method": "none"},
                 {"name": "dspark-hw", "method": "dspark", "gamma": 7, "scheduler": {"kind": "hardware_aware"}}],
    }))
    out = tmp_path / "results"
    done = subprocess.run([sys.executable, "-m", "simlab", "run", str(scenario), "--out", str(out), "--quiet"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr
    arms = json.loads((out / "summary.json").read_text())["arms"]
    assert arms["no-spec"]["completed"] == arms["dspark-hw"]["completed"] == 30
    assert arms["dspark-hw"]["spec_decode_acceptance_length"] > 1.0


def test_sglang_sps_export_of_the_measured_profile(profile, tmp_path):
    out = tmp_path / "sps.json"
    result = CliRunner().invoke(profiles_app, ["export", str(profile), "--format", "sglang-sps",
                                               "--context-tokens", "256", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "at 256 context tokens per step" in result.output
    data = json.loads(out.read_text())
    assert set(data) == {"sample_batch_tokens", "sample_steps_per_sec", "max_batch_tokens"}
    cm = build_cost_model(str(profile), base_dir=tmp_path, file=None)
    assert data["sample_batch_tokens"] == cm.config.verify.batch_tokens  # only where it was measured
    assert data["max_batch_tokens"] == data["sample_batch_tokens"][-1] == 64
    steps = np.asarray(data["sample_steps_per_sec"])
    assert (steps > 0).all() and (np.diff(steps) <= 0).all()
    expected = [1 / cm.verify_s(b, 256) for b in data["sample_batch_tokens"]]
    assert np.allclose(steps, expected, rtol=1e-5)
    outside = CliRunner().invoke(profiles_app, ["export", str(profile), "--format", "sglang-sps",
                                                "--context-tokens", "100000", "--out", str(out)])
    assert outside.exit_code == 0 and "outside the table's contexts 0..256" in outside.output


@pytest.mark.parametrize("args,option", [
    (["--model", "qwen3-9b"], "--model"),
    (["--model", "no/such/folder"], "--model"),
    (["--model", "."], "--model"),  # a folder without a config.json
    (["--device", "tpu"], "--device"),
    (["--dtype", "int8"], "--dtype"),
    (["--contexts", "512,lots"], "--contexts"),
    (["--contexts", "-5"], "--contexts"),
    (["--drafter", "eagle:3"], "--drafter"),
    (["--drafter", str(REPO / "real_pair" / "drafter")], "--drafter"),  # the small pair's drafter on tiny
    (["--replays", "0"], "--replays"),
    (["--time-budget-s", "0"], "--time-budget-s"),
])
def test_bad_input_exits_2_with_one_message_naming_the_option(tmp_path, capsys, args, option):
    out = tmp_path / "p.yaml"
    base = ["--device", "cpu", "--model", "tiny", "--quick", "--threads", "1", "--quiet", "--out", str(out)]
    assert main(base + args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and option in err and "valid" in err and "\n" not in err
    assert "Traceback" not in err and not out.exists()


@pytest.mark.parametrize("out_name,reason", [(".", "is a folder"), ("p.txt", "YAML")])
def test_bad_out_path_exits_2(tmp_path, capsys, out_name, reason):
    assert main(["--model", "tiny", "--out", str(tmp_path / out_name)]) == 2
    assert reason in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_cuda_exits_2(tmp_path, capsys):
    assert main(["--device", "cuda", "--model", "tiny", "--out", str(tmp_path / "p.yaml")]) == 2
    err = capsys.readouterr().err
    assert "--device" in err and "CUDA is not available" in err
