"""The profiler's run: its time guard, failures at single points, partial results, and the table it becomes.

Timing is replaced by a fake that costs exactly one second of a fake clock per point, so the guard's decisions
are deterministic."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from simlab.config.hardware import TableHardware  # noqa: E402
from simlab.real.profiler import runner as profile_runner  # noqa: E402
from simlab.real.profiler.models import load_models  # noqa: E402
from simlab.real.profiler.runner import ProfileError, Profiler  # noqa: E402
from simlab.real.profiler.spec import build_spec  # noqa: E402
from simlab.real.profiler.table import kv_cache_plan, monotone_grid, table_from_result, verify_grid  # noqa: E402
from simlab.real.profiler.timing import Timing  # noqa: E402

CPU = {"type": "cpu", "name": "test cpu"}


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def models():
    return load_models("tiny", None, device=torch.device("cpu"), dtype=torch.float32)


def fake_timer(clock: FakeClock, fail=lambda run: False):
    """One second per point; medians cycle through a non-monotone sequence (so the monotone fix has work)."""
    medians = [3e-3, 1e-3, 2e-3, 5e-3, 4e-3]

    def time_step(run, **_):
        clock.now += 1.0
        if fail(run):
            raise RuntimeError("CUDA out of memory (simulated)")
        median = medians[int(clock.now) % len(medians)]
        return Timing(median_s=median, samples_s=(median,), cuda_graph=False, wall_s=1.0)

    return time_step


def quick_spec(**changes):
    return build_spec(device="cpu", dtype="float32", gamma=7, quick=True, contexts=(0, 64, 128), **changes)


def test_time_guard_skips_the_rows_that_would_not_fit_and_says_so(models, monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(profile_runner, "time_step", fake_timer(clock))
    partial = []
    # row 0: 7 s; drafter: 3 x 4 s; prefill: 2 s; row C=64: 7 s -> 28 s; row C=128 would end at 35 s > 30 s
    result = Profiler(models, quick_spec(time_budget_s=30.0), clock=clock,
                      on_partial=lambda r: partial.append(sorted(r.verify))).run()
    assert sorted(result.verify) == [0, 64] and result.finished
    skipped = [s for s in result.skipped if s["phase"] == "verify"]
    assert len(skipped) == 7 and all("C=128" in s["point"] and "time budget" in s["reason"] for s in skipped)
    assert partial[0] == [0] and partial[-1] == [0, 64] and len(partial) == 5
    table = table_from_result(result, models, name="t", command="test", device_info=CPU)
    TableHardware.model_validate(table)
    assert table["verify"]["context_tokens"] == [0, 64]
    assert table["provenance"]["complete"] is False and len(table["provenance"]["skipped"]) == 7


def test_without_a_budget_everything_is_measured(models, monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(profile_runner, "time_step", fake_timer(clock))
    result = Profiler(models, quick_spec(), clock=clock).run()
    assert sorted(result.verify) == [0, 64, 128] and not result.skipped
    assert result.num_points() == 7 * 3 + 4 * 3 + 2
    table = table_from_result(result, models, name="t", command="test", device_info=CPU)
    assert table["provenance"]["complete"] is True and "skipped" not in table["provenance"]
    contexts, columns, raw = verify_grid(result)
    assert raw != monotone_grid(raw)  # the fake medians are not monotone ...
    assert np.allclose(table["verify"]["step_s"], monotone_grid(raw), rtol=1e-5)  # ... the table is
    assert np.allclose(table["provenance"]["raw"]["verify_step_s"], raw, rtol=1e-5)  # and keeps the raw ones
    assert table["draft"]["parallel"]["batch_tokens"] == [7, 14, 28, 56]  # requests x gamma


def test_a_failed_point_is_recorded_and_a_failed_later_row_is_left_out(models, monkeypatch):
    clock = FakeClock()
    calls = {"n": 0}

    def fail(_run):  # the 3rd verify point of row 0 and the 2nd point of the last row fail
        calls["n"] += 1
        return calls["n"] in (3, 7 + 12 + 2 + 7 + 2)

    monkeypatch.setattr(profile_runner, "time_step", fake_timer(clock, fail))
    result = Profiler(models, quick_spec(), clock=clock).run()
    assert sorted(result.verify) == [0, 64]
    assert 4 not in result.verify[0] and len(result.verify[0]) == 6
    reasons = [s["reason"] for s in result.skipped]
    assert any("out of memory" in r for r in reasons) and any("abandoned" in r for r in reasons)
    table = table_from_result(result, models, name="t", command="test", device_info=CPU)
    assert table["verify"]["batch_tokens"] == [1, 2, 8, 16, 32, 64]


def test_no_verify_point_at_all_is_an_error(models, monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(profile_runner, "time_step", fake_timer(clock, lambda run: True))
    with pytest.raises(ProfileError, match="no verify point"):
        Profiler(models, quick_spec(), clock=clock).run()


def test_kv_cache_tokens_follow_vllms_start_up_arithmetic(models, monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(profile_runner, "time_step", fake_timer(clock))
    result = Profiler(models, quick_spec(), clock=clock).run()
    assert kv_cache_plan(result, models, CPU) is None  # unknown off CUDA
    result.peak_activation_bytes = 10_000_000
    gpu = {"type": "cuda", "name": "fake", "total_memory_bytes": 2_000_000_000}
    plan = kv_cache_plan(result, models, gpu)
    free = 0.9 * 2_000_000_000 - plan["weight_bytes"] - 10_000_000
    assert plan["kv_cache_tokens"] == int(free // plan["kv_bytes_per_token"]) // 16 * 16
    target, drafter = models.target.config, models.drafter.backbone_config
    assert plan["kv_bytes_per_token"] == target.kv_bytes_per_token(4) + drafter.kv_bytes_per_token(4)
    table = table_from_result(result, models, name="t", command="test", device_info=gpu)
    assert table["kv_cache_tokens"] == plan["kv_cache_tokens"] > 0


def test_graphs_are_turned_off_after_repeated_capture_failures(models, monkeypatch):
    import dataclasses

    clock, asked = FakeClock(), []

    def time_step(run, *, use_cuda_graph, **_):
        clock.now += 1.0
        asked.append(use_cuda_graph)
        note = "CUDA graph capture failed, timed eagerly: RuntimeError: simulated" if use_cuda_graph else None
        return Timing(median_s=1e-3, samples_s=(1e-3,), cuda_graph=False, wall_s=1.0, note=note)

    monkeypatch.setattr(profile_runner, "time_step", time_step)
    spec = dataclasses.replace(quick_spec(), use_cuda_graphs=True)
    result = Profiler(models, spec, clock=clock).run()
    assert asked[:3] == [True, True, True] and not any(asked[3:])
    assert len(result.notes) == 4 and "turned off" in result.notes[-1]["note"]
    table = table_from_result(result, models, name="t", command="test", device_info=CPU)
    assert "cuda_graph_buckets" not in table and len(table["provenance"]["graph_fallbacks"]) == 4


def test_graphed_points_become_the_tables_cuda_graph_buckets(models, monkeypatch):
    clock = FakeClock()

    def time_step(run, **_):
        clock.now += 1.0
        return Timing(median_s=1e-3, samples_s=(1e-3,), cuda_graph=True, wall_s=1.0)

    monkeypatch.setattr(profile_runner, "time_step", time_step)
    result = Profiler(models, quick_spec(), clock=clock).run()
    table = table_from_result(result, models, name="t", command="test", device_info=CPU)
    # vLLM's capture sizes that the quick grid measured (24, 40, 48 and 56 are not on it)
    assert table["cuda_graph_buckets"] == [1, 2, 4, 8, 16, 32, 64] and table["provenance"]["cuda_graphs"] is True
    TableHardware.model_validate(table)
