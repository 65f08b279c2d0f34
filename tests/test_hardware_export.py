"""Export: roofline -> table file -> load reproduces the model at the grid points; SPS JSON; atomic writes."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from simlab.config.hardware import RooflineHardware, TableHardware
from simlab.hardware import load_profile
from simlab.hardware.export import (
    ExportSettings,
    batch_grid,
    context_grid,
    sps_dict,
    table_dict,
    write_sps,
    write_table,
)
from simlab.hardware.roofline_build import build_roofline
from simlab.hardware.table import TableCostModel


@pytest.fixture(scope="module")
def roofline():
    return build_roofline(RooflineHardware(kind="roofline", gpu="h100-sxm", model="qwen3-8b"))


@pytest.fixture(scope="module")
def exported(roofline, tmp_path_factory):
    path = tmp_path_factory.mktemp("export") / "h100.yaml"
    write_table(path, table_dict(roofline, generator="test", date="2025-01-01"))
    return path, load_profile(path)


def test_grids():
    assert context_grid(2**20) == [0] + [2**k for k in range(10, 21)]
    cm = build_roofline(RooflineHardware(kind="roofline", gpu="h100-sxm", model="qwen3-8b", cuda_graph_buckets="none"))
    assert batch_grid(cm, 8192) == [2**k for k in range(14)]


def test_round_trip_reproduces_verify_at_grid_points(roofline, exported):
    _, table = exported
    q = ExportSettings().query_tokens_per_request
    b = np.asarray(table.config.verify.batch_tokens, dtype=float)
    assert set(roofline.buckets.sizes) <= set(b)
    for context in table.config.verify.context_tokens:
        expected = roofline.verify_s(b, np.full(b.shape, float(context)), np.maximum(1.0, b / q))
        got = table.verify_s(b, np.full(b.shape, float(context)))
        assert np.allclose(got, expected, rtol=1e-5, atol=0)
    assert table.buckets.sizes == roofline.buckets.sizes
    assert table.kv_cache_tokens() == roofline.kv_cache_tokens()
    assert table.has_context


def test_round_trip_keeps_bucket_steps(roofline, exported):
    _, table = exported
    for b in (3, 100, 257, 300):
        # the table holds each bucket's column as sampled there: at R = max(1, padded / 4) requests
        requests = max(1, roofline.buckets.pad(b) / 4)
        assert table.verify_s(b, 0.0) == pytest.approx(roofline.verify_s(b, 0.0, requests), rel=1e-5)


@pytest.mark.parametrize("requests", [1, 8, 128, 1024])
def test_round_trip_reproduces_drafters_at_the_reference_gamma_and_context(roofline, exported, requests):
    _, table = exported
    s = ExportSettings()
    context = requests * s.draft_context_per_request
    for method in ("eagle3", "dflash", "dspark"):
        expected = roofline.draft_s(method, s.draft_gamma, requests, context)
        assert table.draft_s(method, s.draft_gamma, requests) == pytest.approx(expected, rel=1e-5)
    # the sequential head has no context dependence: exact at any gamma
    head = roofline.draft_s("dspark", 3, requests) - roofline.draft_s("dflash", 3, requests)
    assert table.draft_s("dspark", 3, requests) - table.draft_s("dflash", 3, requests) == pytest.approx(head, rel=1e-5)


def test_round_trip_prefill_and_provenance(roofline, exported):
    path, table = exported
    assert table.prefill_s(2048) == pytest.approx(roofline.prefill_s(2048), rel=1e-5)
    provenance = yaml.safe_load(path.read_text())["provenance"]
    assert provenance["measured"] is False and "NOT measured" in provenance["note"]
    assert provenance["source"] == {"kind": "roofline", "gpu": "h100-sxm", "model": "qwen3-8b", "tensor_parallel": 1,
                                    "parameters": roofline.params.as_dict()}
    assert provenance["generator"] == "test" and provenance["date"] == "2025-01-01"
    assert provenance["simlab_version"]


def test_table_export_of_a_table_is_the_same_table():
    cfg = TableHardware.model_validate({
        "kind": "table", "name": "t",
        "verify": {"batch_tokens": [1, 64], "step_s": [0.006, 0.007]},
        "draft": {"parallel": {"step_s": 0.002}},
        "cuda_graph_buckets": [1, 8, 64], "kv_cache_tokens": 1000,
        "provenance": {"measured": True, "by": "me"},
    })
    data = table_dict(TableCostModel(cfg), generator="test")
    again = TableHardware.model_validate(data)
    assert again.model_dump(exclude={"provenance"}) == cfg.model_dump(exclude={"provenance"})
    assert data["provenance"]["source_provenance"] == {"measured": True, "by": "me"}


def test_sglang_sps_table_is_steps_per_second_at_the_stated_context(roofline, tmp_path):
    data = sps_dict(roofline, context_tokens=65536, max_batch_tokens=4096)
    assert list(data) == ["sample_batch_tokens", "sample_steps_per_sec", "max_batch_tokens"]
    assert data["max_batch_tokens"] == 4096 == data["sample_batch_tokens"][-1]
    for b, sps in zip(data["sample_batch_tokens"], data["sample_steps_per_sec"]):
        assert sps == pytest.approx(1.0 / roofline.verify_s(b, 65536, max(1.0, b / 4)), rel=1e-5)
    path = write_sps(tmp_path / "sps.json", data)
    assert json.loads(path.read_text()) == data


