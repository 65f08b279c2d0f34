"""The measured verify-cost curve handed to load-aware schedulers."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from simlab.hardware.curves import Curve  # noqa: E402
from simlab.real.profiler.verify_cost import profile_verify_cost  # noqa: E402

from .models import build_pair  # noqa: E402


def test_profile_is_the_simulators_curve_monotone_over_the_grid():
    target, _ = build_pair(0, dtype=torch.float32)
    curve = profile_verify_cost(target, max_num_seqs=3, max_batch_tokens=12, context_tokens=8, repeats=1)
    assert isinstance(curve, Curve)
    assert curve.xs == [1.0, 2.0, 4.0, 8.0, 12.0]
    assert all(b >= a > 0 for a, b in zip(curve.ys, curve.ys[1:]))
    # flat beyond the ends, linear between points, as a table profile's verify curve
    np.testing.assert_allclose(curve(np.array([0, 1, 10, 100])),
                               [curve.ys[0], curve.ys[0], (curve.ys[3] + curve.ys[4]) / 2, curve.ys[-1]])
