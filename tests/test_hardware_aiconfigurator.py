"""``kind: aiconfigurator``: step costs read from aiconfigurator-core's silicon database."""

from __future__ import annotations

from pathlib import Path

import pytest

from simlab.common.errors import InputError
from simlab.config.hardware import AicHardware
from simlab.hardware.profiles import build_cost_model

aic = pytest.importorskip("aiconfigurator_core", reason="aiconfigurator-core is not installed (the aic extra)")

from simlab.hardware import aiconfigurator as aicm  # noqa: E402

CFG = AicHardware(kind="aiconfigurator", gpu="h100-sxm", model="qwen3-8b", stack="vllm", stack_version="0.24.0")


def _build(cfg: AicHardware):
    return build_cost_model(cfg, base_dir=Path("."), file=None)


def test_grid_equals_the_database_at_its_sample_points():
    model = _build(CFG)
    engine = aicm.aic_engine(CFG, None)
    for c in aicm.CONTEXT_TOKENS:
        for b in aicm.BATCH_TOKENS:
            want_s = engine.decode_step_latency(b, max(1, c // b), 2) / 1e3
            assert model.verify_s(b, context_tokens=c) == pytest.approx(want_s, rel=1e-12)


def test_issue_tpot_figures_reproduce():
    engine = aicm.aic_engine(CFG, None)
    for users, tpot_ms in ((1, 6.4), (32, 9.5), (128, 16.4)):
        got_ms = engine.predict_decode_latency(users, 1024, 1024) / 1024
        assert got_ms == pytest.approx(tpot_ms, abs=0.1)


def test_step_cost_grows_with_batch_and_context():
    model = _build(CFG)
    assert model.verify_s(128, context_tokens=128 * 1024) > model.verify_s(1, context_tokens=1024)
    assert model.verify_s(32, context_tokens=32 * 4096) > model.verify_s(32, context_tokens=32 * 1024)


def test_unknown_system_is_exit_2_naming_valid_ones():
    with pytest.raises(InputError) as err:
        _build(AicHardware(kind="aiconfigurator", gpu="no-such-gpu", model="qwen3-8b"))
    assert "h100-sxm" in str(err.value) and "h100_sxm" in str(err.value)


def test_a_scenario_with_kind_aiconfigurator_runs_end_to_end(tmp_path):
    import subprocess
    import sys

    import yaml

    root = Path(__file__).resolve().parents[1]
    scenario = yaml.safe_load((root / "scenarios" / "quickstart.yaml").read_text())
    scenario.update(name="aic-smoke", arms=scenario["arms"][:1],
                    hardware={"kind": "aiconfigurator", "gpu": "h100-sxm", "model": "qwen3-8b"})
    scenario["workload"]["max_requests"] = 20
    scenario["engine"]["kv_cache_tokens"] = 200000
    path = tmp_path / "aic.yaml"
    path.write_text(yaml.safe_dump(scenario))
    run = subprocess.run([sys.executable, "-m", "simlab", "run", str(path), "--out", str(tmp_path / "out")],
                         cwd=root, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert (tmp_path / "out").exists()


def test_bad_hardware_exits_2(tmp_path):
    import subprocess
    import sys

    import yaml

    root = Path(__file__).resolve().parents[1]
    scenario = yaml.safe_load((root / "scenarios" / "quickstart.yaml").read_text())
    scenario.update(arms=scenario["arms"][:1], hardware={"kind": "aiconfigurator", "gpu": "nope", "model": "qwen3-8b"})
    path = tmp_path / "aic.yaml"
    path.write_text(yaml.safe_dump(scenario))
    run = subprocess.run([sys.executable, "-m", "simlab", "run", str(path), "--out", str(tmp_path / "out")],
                         cwd=root, capture_output=True, text=True, timeout=600)
    assert run.returncode == 2
    assert "h100_sxm" in run.stdout + run.stderr


def test_drafters_are_priced_from_the_roofline():
    from simlab.config.hardware import RooflineHardware

    model = _build(CFG)
    roofline = _build(RooflineHardware(kind="roofline", gpu="h100-sxm", model="qwen3-8b"))
    for n in (1, 8, 64):
        assert model.draft_s("eagle3", 3, n) == pytest.approx(roofline.draft_s("eagle3", 3, n), rel=1e-9)
        assert model.draft_s("eagle3", 3, n) > 0
        context = n * 8000.0  # and over the requests' context
        assert model.draft_s("eagle3", 3, n, context) == pytest.approx(roofline.draft_s("eagle3", 3, n, context),
                                                                       rel=1e-9)
        for method in ("dflash", "dspark"):  # a block of 7 n tokens reads the curve between its points
            assert model.draft_s(method, 7, n, context) == pytest.approx(roofline.draft_s(method, 7, n, context),
                                                                         rel=0.005)
            assert model.draft_s(method, 7, n, context) - model.draft_s(method, 7, n, 0.0) == pytest.approx(
                roofline.draft_s(method, 7, n, context) - roofline.draft_s(method, 7, n, 0.0), rel=1e-6)
    assert model.kv_cache_tokens() == roofline.kv_cache_tokens()
