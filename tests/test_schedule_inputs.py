"""The one helper that builds a step's ScheduleInputs (simulator, real engine and audit): the lag rule."""

from __future__ import annotations

import numpy as np
import pytest

from simlab.schedulers import make_scheduler
from simlab.schedulers.step_inputs import LagBuffer, schedule_inputs


def _cost(batch_tokens):
    return 0.01 + 0.001 * np.asarray(batch_tokens, dtype=float)


def test_young_requests_see_the_prior_and_old_ones_their_own_lagged_confidences():
    conf = np.array([[[0.9, 0.8], [0.7, 0.6], [0.5, 0.4]]])
    lagged = np.array([[[0.1, 0.2], [0.3, 0.4], [0.0, 0.0]]])
    known = np.array([[True, True, False]])
    prior = np.array([0.65, 0.55])
    max_len = np.array([[2, 1, 2]])
    inputs = schedule_inputs(make_scheduler("async_topk", lag_steps=2), conf=conf, max_len=max_len, verify_s=_cost,
                             lagged_conf=lagged, lagged_known=known, prior_conf=prior)
    np.testing.assert_array_equal(inputs.lagged_conf, [[[0.1, 0.2], [0.3, 0.4], [0.65, 0.55]]])
    assert inputs.lagged_max_len is max_len  # the current limits (docs/engine.md)
    plain = schedule_inputs(make_scheduler("hardware_aware"), conf=conf, max_len=max_len, verify_s=_cost,
                            lagged_conf=lagged, lagged_known=known, prior_conf=prior)
    assert plain.lagged_conf is None and plain.lagged_max_len is None


def test_a_lagged_scheduler_without_lag_state_is_an_error():
    with pytest.raises(ValueError, match="lagged"):
        schedule_inputs(make_scheduler("goodput", lag_steps=1), conf=np.zeros((1, 1, 2)),
                        max_len=np.ones((1, 1), dtype=int), verify_s=_cost)


def test_lag_buffer_returns_the_step_lag_back():
    buffer = LagBuffer(lag=2, gamma=2)
    ids = [7, 9]
    history = []
    for step in range(5):
        lagged, known = buffer.lagged(ids)
        if step < 2:
            assert not known.any() and (lagged == 0).all()
        else:
            assert known.all()
            np.testing.assert_array_equal(lagged, history[step - 2])
        conf = np.array([[step, step + 0.5], [10 + step, 10.5 + step]])
        history.append(conf)
        buffer.push(ids, conf)
    buffer.drop(7)
    lagged, known = buffer.lagged([7, 9])
    assert known.tolist() == [False, True]
