"""The measured verify-cost curve handed to load-aware schedulers."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from simlab.real.profile import CostTable, profile_verify_cost  # noqa: E402

from .models import build_pair  # noqa: E402


def test_cost_table_interpolates_and_is_flat_beyond_the_ends():
    table = CostTable(batch_tokens=(1, 4, 8), step_s=(0.01, 0.01, 0.03))
    np.testing.assert_allclose(table(np.array([[0, 1, 6, 8, 100]])), [[0.01, 0.01, 0.02, 0.03, 0.03]])
    assert table.to_profile() == {"batch_tokens": [1, 4, 8], "step_s": [0.01, 0.01, 0.03]}


def test_profile_is_monotone_over_the_grid():
    target, _ = build_pair(0, dtype=torch.float32)
    table = profile_verify_cost(target, max_num_seqs=3, max_batch_tokens=12, context_tokens=8, repeats=1)
    assert table.batch_tokens == (1, 2, 4, 8, 12)
    assert all(b >= a > 0 for a, b in zip(table.step_s, table.step_s[1:]))
