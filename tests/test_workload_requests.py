"""Requests/Workload containers: invariants are enforced and arrays are read-only."""

import numpy as np
import pytest

from simlab.workload import ClosedLoop, Requests, Workload


def _requests(**overrides):
    fields = dict(
        arrival_s=np.array([0.0, 0.5, 0.5, 2.0]),
        prompt_tokens=np.array([10, 20, 30, 40], dtype=np.int64),
        output_tokens=np.array([1, 2, 3, 4], dtype=np.int64),
        domain=np.array([0, 1, 0, 1], dtype=np.int16),
        domain_names=("chat", "code"),
    )
    fields.update(overrides)
    return Requests(**fields)


def test_len_and_labels():
    requests = _requests()
    assert len(requests) == 4
    assert list(requests.domain_labels()) == ["chat", "code", "chat", "code"]


def test_arrays_are_read_only():
    requests = _requests()
    with pytest.raises(ValueError):
        requests.prompt_tokens[0] = 5


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"arrival_s": np.array([0.0, 2.0, 1.0, 3.0])}, "non-decreasing"),
        ({"arrival_s": np.array([0.0, np.nan, 1.0, 3.0])}, "finite"),
        ({"prompt_tokens": np.array([10, 0, 30, 40], dtype=np.int64)}, ">= 1"),
        ({"output_tokens": np.array([1, 2, -3, 4], dtype=np.int64)}, ">= 1"),
        ({"domain": np.array([0, 2, 0, 1], dtype=np.int16)}, "index domain_names"),
        ({"domain_names": ()}, "at least one domain"),
        ({"output_tokens": np.array([1, 2, 3], dtype=np.int64)}, "has 3 entries"),
    ],
)
def test_invalid_requests_are_refused(overrides, message):
    with pytest.raises(ValueError, match=message):
        _requests(**overrides)


def test_wrong_dtype_is_refused():
    with pytest.raises(TypeError, match="int64"):
        _requests(prompt_tokens=np.array([10, 20, 30, 40], dtype=np.int32))


def test_workload_holds_closed_loop():
    workload = Workload(requests=_requests(), closed_loop=ClosedLoop(concurrency=4, think_time_s=0.5), source={})
    assert workload.closed_loop.concurrency == 4
