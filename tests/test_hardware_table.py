"""Cost tables: interpolation, grids, bucket padding, draft shapes, mixed steps (values computed by hand)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simlab.config.hardware import TableHardware
from simlab.hardware.buckets import Buckets, vllm_default_capture_sizes
from simlab.hardware.curves import Curve, Grid
from simlab.hardware.table import TableCostModel

INLINE = {  # the contract's inline.yaml hardware
    "kind": "table",
    "verify": {
        "batch_tokens": [1, 64, 128, 256, 512, 1024, 2048, 4096],
        "step_s": [0.0060, 0.0063, 0.0068, 0.0095, 0.0125, 0.0215, 0.040, 0.078],
    },
    "draft": {"autoregressive": {"step_s": 0.0009}, "parallel": {"step_s": 0.0022},
              "sequential_head": {"step_s": 0.00002}},
    "prefill": {"per_token_s": 0.00003},
}


def table(**overrides) -> TableCostModel:
    return TableCostModel(TableHardware.model_validate({**INLINE, **overrides}))


def test_curve_at_and_between_points_and_flat_beyond():
    cm = table()
    assert cm.verify_s(1) == pytest.approx(0.0060)
    assert cm.verify_s(512) == pytest.approx(0.0125)
    assert cm.verify_s(32) == pytest.approx(0.0060 + 0.0003 * 31 / 63)
    assert cm.verify_s(768) == pytest.approx((0.0125 + 0.0215) / 2)
    assert cm.verify_s(100_000) == pytest.approx(0.078)  # flat beyond the last point
    assert cm.verify_s(0.5) == pytest.approx(0.0060)  # flat before the first
    assert cm.verify_s(0) == 0.0  # no tokens, no forward
    assert cm.has_context is False


def test_single_point_curve_is_constant():
    curve = Curve([64], [0.01])
    assert curve.at(1) == curve.at(1e6) == 0.01
    assert np.all(curve(np.array([1.0, 64.0, 9999.0])) == 0.01)


def test_bilinear_grid_against_hand_values():
    grid = Grid([0, 1000], [1, 101], [[1.0, 2.0], [3.0, 5.0]])
    # (500, 51): top row 1.5, bottom row 4.0, halfway 2.75
    assert grid.at(500, 51) == pytest.approx(2.75)
    assert grid.at(250, 1) == pytest.approx(1.5)
    assert grid.at(1000, 26) == pytest.approx(3.5)
    assert grid.at(5000, 500) == pytest.approx(5.0)  # flat beyond both edges
    assert grid.at(-5, -5) == pytest.approx(1.0)
    rows = np.array([[500.0], [250.0], [5000.0]])
    cols = np.array([[51.0, 1.0], [1.0, 101.0], [500.0, 26.0]])
    expected = [[grid.at(r, c) for c in cols_row] for r, cols_row in zip(rows[:, 0], cols)]
    assert np.allclose(grid(rows, cols), expected)


def test_grid_with_one_row_or_column():
    one_row = Grid([4096], [1, 101], [[1.0, 3.0]])
    assert one_row.at(0, 51) == one_row.at(1e6, 51) == pytest.approx(2.0)
    assert np.allclose(one_row(np.array([[0.0], [1e7]]), np.array([[51.0], [101.0]])), [[2.0], [3.0]])
    one_col = Grid([0, 100], [8], [[1.0], [2.0]])
    assert one_col(np.array([50.0]), np.array([1.0]))[0] == pytest.approx(1.5)


def test_table_with_context_axis_is_a_bilinear_grid():
    verify = {"batch_tokens": [1, 101], "context_tokens": [0, 1000], "step_s": [[1.0, 2.0], [3.0, 5.0]]}
    cm = table(verify=verify)
    assert cm.has_context is True
    assert cm.verify_s(51, 500) == pytest.approx(2.75)
    assert cm.verify_s(51, 500, num_requests=40) == pytest.approx(2.75)  # tables ignore the request count
    b = np.array([[1, 26, 51, 101, 300]] * 3)
    c = np.array([[0.0], [500.0], [2000.0]])
    vec = cm.verify_s(b, c)
    assert vec.shape == (3, 5)
    assert np.allclose(vec, [[cm.verify_s(int(x), float(ctx)) for x in row] for row, ctx in zip(b, c[:, 0])])


def test_vectorised_equals_scalar_on_a_curve():
    cm = table(cuda_graph_buckets=[1, 2, 4, 8, 16, 32, 64, 128])
    b = np.arange(0, 3000, 7).reshape(3, -1)
    vec = cm.verify_s(b, np.zeros((3, 1)))
    assert vec.shape == b.shape
    assert np.array_equal(vec, np.array([[cm.verify_s(int(x)) for x in row] for row in b]))


def test_vllm_default_capture_sizes():
    sizes = vllm_default_capture_sizes()
    assert sizes[:5] == [1, 2, 4, 8, 16]
    assert 248 in sizes and 256 in sizes and 272 in sizes and 264 not in sizes
    assert sizes[-1] == 512 and len(sizes) == 51
    assert vllm_default_capture_sizes(16) == [1, 2, 4, 8, 16]


def test_bucket_padding_is_a_step_function_then_linear():
    cm = table(cuda_graph_buckets=[8, 16, 32, 64, 128])
    within = [cm.verify_s(b) for b in range(65, 129)]
    assert all(v == within[-1] for v in within)  # equal cost within a bucket ...
    assert within[-1] == pytest.approx(0.0068)  # ... the cost at the captured size 128
    assert cm.verify_s(64) < cm.verify_s(65)  # a jump at the boundary
    assert cm.verify_s(1) == cm.verify_s(8) == pytest.approx(0.0060 + 0.0003 * 7 / 63)
    # above the largest bucket: the plain linear curve
    assert cm.verify_s(192) == pytest.approx((0.0068 + 0.0095) / 2)
    assert cm.verify_s(129) == pytest.approx(0.0068 + 0.0027 / 128)


def test_buckets_pad_array_matches_scalar():
    buckets = Buckets([1, 2, 4, 8, 24])
    b = np.array([0, 1, 3, 5, 8, 9, 24, 25, 100])
    assert buckets.pad_array(b).tolist() == [buckets.pad(float(x)) for x in b] == [0, 1, 4, 8, 8, 24, 24, 25, 100]
    assert Buckets.from_config("none").pad(3) == 3
    assert Buckets.from_config("default").sizes == vllm_default_capture_sizes()


def test_draft_shapes_with_constants():
    cm = table()
    assert cm.draft_s("none", 7, 32) == 0.0
    assert cm.draft_s("eagle3", 7, 32) == pytest.approx(7 * 0.0009)
    assert cm.draft_s("mtp", 3, 1) == pytest.approx(3 * 0.0009)
    assert cm.draft_s("dflash", 7, 32) == pytest.approx(0.0022)
    assert cm.draft_s("dspark", 7, 32) == pytest.approx(0.0022 + 7 * 0.00002)
    with pytest.raises(ValueError, match="valid: none, mtp"):
        cm.draft_s("medusa", 3, 1)


def test_draft_curves_read_the_tokens_one_forward_processes():
    draft = {
        "autoregressive": {"batch_tokens": [1, 101], "step_s": [0.001, 0.002]},
        "parallel": {"batch_tokens": [7, 707], "step_s": [0.002, 0.012]},
        "sequential_head": {"batch_tokens": [1, 101], "step_s": [1e-5, 3e-5]},
    }
    cm = table(draft=draft)
    # AR: gamma x curve(requests); linear in gamma
    assert cm.draft_s("eagle3", 4, 51) == pytest.approx(4 * 0.0015)
    # parallel: curve(requests x gamma) = curve(357)
    assert cm.draft_s("dflash", 7, 51) == pytest.approx(0.002 + 0.01 * 350 / 700)
    assert cm.draft_s("dspark", 7, 51) == pytest.approx(0.002 + 0.01 * 350 / 700 + 7 * 2e-5)


def test_missing_draft_entries_cost_nothing():
    cm = table(draft={"parallel": {"step_s": 0.003}})
    assert cm.draft_s("eagle3", 7, 8) == 0.0
    assert cm.draft_s("dspark", 7, 8) == pytest.approx(0.003)


def test_mixed_step_is_additive_and_prefill_only_costs_per_token():
    cm = table()
    assert cm.step_s(64, 0.0, 8) == cm.verify_s(64)
    assert cm.step_s(64, 0.0, 8, prefill_tokens=1000, prefill_attn_pairs=5e5) == pytest.approx(0.0063 + 0.03)
    assert cm.step_s(0, 0.0, 0, prefill_tokens=2048) == pytest.approx(2048 * 0.00003)
    assert cm.prefill_s(100) == pytest.approx(0.003)


def test_kv_cache_tokens_and_describe():
    assert table().kv_cache_tokens() is None
    cm = table(kv_cache_tokens=400_000, name="mine", provenance={"measured": True})
    assert cm.kv_cache_tokens() == 400_000
    info = cm.describe()
    assert info["kind"] == "table" and info["name"] == "mine" and info["provenance"] == {"measured": True}


@given(
    points=st.lists(st.tuples(st.integers(1, 10_000), st.floats(1e-4, 1.0)), min_size=1, max_size=12,
                    unique_by=lambda p: p[0]),
    queries=st.lists(st.floats(0.5, 20_000), min_size=1, max_size=20),
)
@settings(max_examples=60, deadline=None)
def test_curve_vector_equals_scalar_and_stays_within_its_values(points, queries):
    points.sort()
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    cm = TableCostModel(TableHardware.model_validate({"kind": "table", "verify": {"batch_tokens": xs, "step_s": ys}}))
    q = np.asarray(queries)
    vec = cm.verify_s(q, np.zeros_like(q))
    assert np.allclose(vec, [cm.verify_s(float(x)) for x in q], rtol=1e-12)
    assert np.all(vec >= min(ys) - 1e-15) and np.all(vec <= max(ys) + 1e-15)


@pytest.mark.parametrize("name", ["h100-sxm_qwen3-8b", "a100-80g_qwen3-4b", "b200_llama-3.1-8b"])
def test_integer_batches_read_the_tabulated_lookup_bit_for_bit(name):
    """Integer batch tokens take the tabulated path (one context or many); it must equal the bilinear grid of
    the padded batch exactly, including beyond the last column and outside the context rows."""
    from simlab.hardware import load_profile, shipped_profiles

    cost = load_profile(shipped_profiles()[name])
    lookup = cost._lookup
    assert lookup is not None
    rng = np.random.default_rng(5)
    for shape_b, shape_c in [((1, 60), (1, 1)), ((60,), (1,)), ((4, 60), (4, 1)), ((1,), (1,)), ((7,), (7,))]:
        batch = rng.integers(0, 40_000, shape_b)
        context = rng.uniform(-100.0, 4e6, shape_c)
        fast = cost.verify_s(batch, context)
        cost._lookup = None
        try:
            exact = cost.verify_s(batch, context)
        finally:
            cost._lookup = lookup
        assert fast.shape == exact.shape
        assert np.array_equal(fast, exact)


def test_integer_batches_on_a_curve_table_read_the_lookup_bit_for_bit():
    cost = table(cuda_graph_buckets=[1, 2, 4, 8, 16, 32, 64, 128, 256])
    lookup = cost._lookup
    batch = np.random.default_rng(6).integers(0, 9000, (3, 50))
    fast = cost.verify_s(batch, np.zeros((3, 1)))
    cost._lookup = None
    try:
        exact = cost.verify_s(batch, np.zeros((3, 1)))
    finally:
        cost._lookup = lookup
    assert np.array_equal(fast, exact)
