"""The compiled schedulers against their numpy reference (tests/reference/schedulers), bit for bit.

Random steps with coarse confidences (many ties, zeros included), rows sitting the step out, token budgets,
lagged confidences, draft costs and TPOT limits; verify costs that are linear, flat (Θ ties) and stepped like
CUDA-graph buckets. Every registered scheduler, and the adaptive draft plan, must give the same arrays."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reference.schedulers import PLAN_DRAFT, REFERENCE
from simlab.schedulers import ScheduleInputs, make_scheduler
from simlab.schedulers.path import admitted_lengths, products, row_lengths, survival
from simlab.schedulers.registry import REGISTRY

COSTS = {
    "linear": lambda b: 0.010 + 2e-5 * np.asarray(b, dtype=float),
    "flat": lambda b: np.full(np.shape(b), 0.010),
    "stepped": lambda b: 0.008 + 0.0015 * np.ceil(np.asarray(b, dtype=float) / 16.0),
    "steep": lambda b: 0.002 + 1e-3 * np.asarray(b, dtype=float),
}


def _draft_cost(per_request_s: float):
    def cost(draft_len, num_drafting):
        d, n = np.asarray(draft_len, dtype=float), np.asarray(num_drafting, dtype=float)
        return np.where((d > 0) & (n > 0), d * (0.0005 + per_request_s * n), 0.0)
    return cost


def _inputs(rng, steps, num_requests, gamma, levels, cost, budget, sit_out, draft_per_request_s, min_budget):
    def conf():
        return rng.integers(0, levels + 1, size=(steps, num_requests, gamma)) / levels

    max_len = rng.integers(0, gamma + 1, size=(steps, num_requests))
    num_requests_arg = None
    if sit_out:
        out = rng.random((steps, num_requests)) < 0.3
        max_len = np.where(out, 0, max_len)
        num_requests_arg = np.maximum(np.add.reduce(~out, axis=1), 1)
    true_accepted = rng.integers(0, gamma + 1, size=(steps, num_requests))
    draft_cost = _draft_cost(draft_per_request_s)
    token_budget = None if budget is None else np.full(steps, budget)
    return ScheduleInputs(
        conf=conf(), max_len=max_len, verify_s=COSTS[cost], draft_s=draft_cost(np.full(steps, gamma),
                                                                              np.full(steps, num_requests)),
        token_budget=token_budget, lagged_conf=conf(), lagged_max_len=max_len, true_accepted=true_accepted,
        num_requests=num_requests_arg, draft_cost=draft_cost,
        min_budget=rng.integers(0, 4, size=steps) if min_budget else None,
    )


SHAPES = dict(
    steps=st.sampled_from([1, 3]),
    num_requests=st.integers(0, 60),  # above SMALL_SORT too
    gamma=st.integers(1, 8),
    seed=st.integers(0, 2**31 - 1),
    levels=st.sampled_from([1, 3, 10, 1000]),
    cost=st.sampled_from(sorted(COSTS)),
    budget=st.sampled_from([None, 0, 5, 60]),
    sit_out=st.booleans(),
)

PARAMS = {"threshold": [{"threshold": 0.4}, {"threshold": 0.3, "cumulative": True}],
          "async_topk": [{"lag_steps": 2}], "goodput": [{"lag_steps": 0}, {"lag_steps": 1}],
          "adaptive": [{}, {"slo_tpot_ms": 12.0}]}


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(sorted(REGISTRY)), variant=st.integers(0, 1), draft=st.sampled_from([0.0, 1e-5, 1e-3]),
       min_budget=st.booleans(), **SHAPES)
def test_every_scheduler_equals_its_numpy_reference(kind, variant, draft, min_budget, steps, num_requests, gamma,
                                                    seed, levels, cost, budget, sit_out):
    options = PARAMS.get(kind, [{}])
    params = options[variant % len(options)]
    rng = np.random.default_rng(seed)
    inp = _inputs(rng, steps, num_requests, gamma, levels, cost, budget, sit_out, draft, min_budget)
    got = make_scheduler(kind, **params)(inp)
    expected = REFERENCE[kind](inp, **make_scheduler(kind, **params).params)
    assert got.dtype == np.int64
    assert np.array_equal(got, expected), (got, expected)


@settings(max_examples=300, deadline=None)
@given(slo=st.sampled_from([None, 9.0, 14.0, 40.0]), draft=st.sampled_from([0.0, 1e-5, 2e-4, 1e-3]), **SHAPES)
def test_the_adaptive_draft_plan_equals_its_numpy_reference(slo, draft, steps, num_requests, gamma, seed, levels,
                                                            cost, budget, sit_out):
    rng = np.random.default_rng(seed)
    inp = _inputs(rng, steps, num_requests, gamma, levels, cost, budget, sit_out, draft, False)
    scheduler = make_scheduler("adaptive", slo_tpot_ms=slo)
    got = scheduler.plan_draft(inp)
    expected = PLAN_DRAFT(inp, **scheduler.params)
    for left, right in zip(got, expected):
        assert np.array_equal(left, right), (got, expected)


@settings(max_examples=200, deadline=None)
@given(steps=st.integers(1, 3), num_requests=st.integers(1, 6), gamma=st.integers(1, 5), seed=st.integers(0, 10**6),
       levels=st.integers(1, 4))
def test_admitting_k_takes_the_first_k_of_a_stable_descending_sort(steps, num_requests, gamma, seed, levels):
    """Admitting K along the merged path = the first K of a stable descending sort of the candidates (ties in
    (request, position) order), counted per request; coarse confidences (zeros included) make many ties."""
    rng = np.random.default_rng(seed)
    conf = rng.integers(0, levels + 1, size=(steps, num_requests, gamma)) / levels
    max_len = rng.integers(0, gamma + 1, size=(steps, num_requests))
    a = survival(conf, max_len)
    num_valid = np.add.reduce(max_len, axis=1)
    num_admitted = np.array([rng.integers(0, int(v) + 1) for v in num_valid])
    got = admitted_lengths(products(conf), row_lengths(max_len, conf.shape), num_admitted)
    flat = a.reshape(steps, -1)
    order = np.argsort(-flat, axis=-1, kind="stable")
    for s in range(steps):
        chosen = order[s, : num_admitted[s]]
        assert (flat[s, chosen] >= 0).all()
        assert got[s].tolist() == np.bincount(chosen // gamma, minlength=num_requests).tolist()
    assert np.array_equal(admitted_lengths(products(conf), row_lengths(max_len, conf.shape), num_valid), max_len)


def test_the_compiled_walks_are_cached_in_the_users_cache_folder(tmp_path):
    """A fresh interpreter with an empty cache folder compiles and writes the cache there; a second one loads it."""
    import subprocess
    import sys

    code = ("import numpy as np; from simlab.schedulers import ScheduleInputs, make_scheduler; "
            "inp = ScheduleInputs(conf=np.full((1, 2, 3), 0.5), max_len=np.full((1, 2), 3), "
            "verify_s=lambda b: 0.01 + 1e-4 * np.asarray(b, dtype=float)); "
            "print(make_scheduler('hardware_aware')(inp).tolist())")
    env = {"XDG_CACHE_HOME": str(tmp_path), "PATH": "", "HOME": str(tmp_path)}
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert first.returncode == 0, first.stderr
    cached = list((tmp_path / "simlab" / "numba").rglob("*.nbi"))
    assert cached, "no numba index written under XDG_CACHE_HOME/simlab/numba"
    second = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert second.returncode == 0 and second.stdout == first.stdout


@pytest.mark.parametrize("kind", ["hardware_aware", "async_topk", "goodput", "oracle", "retrospective"])
def test_an_empty_batch_schedules_nothing(kind):
    inp = ScheduleInputs(conf=np.zeros((2, 0, 3)), max_len=np.zeros((2, 0), dtype=np.int64),
                         verify_s=COSTS["linear"], lagged_conf=np.zeros((2, 0, 3)),
                         lagged_max_len=np.zeros((2, 0), dtype=np.int64), true_accepted=np.zeros((2, 0), np.int64))
    assert make_scheduler(kind)(inp).shape == (2, 0)


def test_plan_ties_between_draft_lengths_go_to_the_longer_draft():
    """Positions 1 and 2 are worth nothing and drafting is free: d = 1, 2, 3 plan equally well, and the plan
    drafts 3 (docs/schedulers.md), as the reference does."""
    conf = np.array([[[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]])
    inp = ScheduleInputs(conf=conf, max_len=np.full((1, 2), 3), verify_s=COSTS["flat"], lagged_conf=conf,
                         lagged_max_len=np.full((1, 2), 3), draft_cost=lambda d, n: np.zeros(np.shape(d)))
    scheduler = make_scheduler("adaptive")
    got = scheduler.plan_draft(inp)
    assert got[0].tolist() == [3]
    for left, right in zip(got, PLAN_DRAFT(inp, **scheduler.params)):
        assert np.array_equal(left, right)
