"""scripts/gpu_profile.sh: its dry run exercises the whole pipeline on CPU; without a GPU the real run stops at
once with exit 2 and a clear message; its grid's estimated H200 time fits the budget."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from simlab.hardware import load_profile  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gpu_profile.sh"


def _run(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, cwd=REPO, env=env,
                          timeout=timeout)


def _helper():
    from simlab.real.profiler import gpu_run

    return gpu_run


def test_dry_run_profiles_the_tiny_model_on_cpu_and_checks_the_file(tmp_path):
    out = tmp_path / "dry.yaml"
    done = _run("--dry-run", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "check:" in done.stdout and "gpu_profile: done" in done.stderr
    assert "estimated H200 time" in done.stdout
    cm = load_profile(out)
    provenance = cm.config.provenance
    assert provenance["measured"] and provenance["device"]["type"] == "cpu" and provenance["complete"]
    assert provenance["drafter"]["config"]["num_hidden_layers"] == 1 and provenance["time_budget_s"] == 60
    assert not list(tmp_path.glob(".dry.yaml.*"))  # the atomic write leaves no temporary file


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_gpu_run_without_a_gpu_exits_2_and_writes_nothing(tmp_path):
    out = tmp_path / "gpu.yaml"
    done = _run("--out", str(out))
    assert done.returncode == 2
    assert "CUDA is not available" in done.stderr and "no usable GPU" in done.stderr and not out.exists()


def test_the_gpu_grid_is_the_one_asked_for_and_its_estimate_fits_the_budget():
    helper = _helper()
    spec = helper.gpu_spec()
    assert spec.batch_tokens[0] == 1 and spec.batch_tokens[-1] == 8192 and len(spec.batch_tokens) == 55
    assert spec.context_tokens[0] == 512 and 8192 in spec.context_tokens and spec.replays == 5
    assert spec.dtype == "bfloat16" and spec.use_cuda_graphs
    args = helper.gpu_args(Path("x.yaml"), helper.BUDGET_S)
    assert args[args.index("--model") + 1] == "qwen3-8b" and args[args.index("--drafter") + 1] == "dspark:5"
    phases = helper.estimate_s(spec)
    assert all(seconds > 0 for seconds in phases.values())
    assert sum(phases.values()) - phases["start-up"] < helper.BUDGET_S  # the whole grid is expected to fit
    assert helper.BUDGET_S + phases["start-up"] + 60 < 8 * 60  # with the hard stop's margin, under 8 minutes


def test_the_active_virtual_environment_comes_before_the_checkouts_venv(tmp_path):
    """A fresh clone whose test environment lives elsewhere (CI's .venv-ci) must not fall back to a stale .venv."""
    import sys

    env_dir = Path(sys.prefix)
    env = {**os.environ, "VIRTUAL_ENV": str(env_dir)}
    env.pop("PYTHON", None)
    done = subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True, cwd=REPO, env=env,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"gpu_profile: python {env_dir}/bin/python" in done.stderr
    env["PYTHON"] = sys.executable  # an explicit PYTHON wins over both
    done = subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True, cwd=REPO, env=env,
                          timeout=60)
    assert f"gpu_profile: python {sys.executable}" in done.stderr
