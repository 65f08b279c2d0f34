"""Verify-length schedulers against brute force and hand-made cases."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simlab.schedulers import ScheduleInputs, make_scheduler
from simlab.schedulers.path import survival


def linear_cost(fixed_s, per_token_s):
    return lambda batch_tokens: fixed_s + per_token_s * np.asarray(batch_tokens, dtype=float)


def inputs(conf, verify_s, max_len=None, lagged=None, **kw):
    conf = np.asarray(conf, dtype=float)[None]
    max_len = np.full(conf.shape[:2], conf.shape[2]) if max_len is None else np.asarray(max_len)[None]
    lagged = None if lagged is None else np.asarray(lagged, dtype=float)[None]
    return ScheduleInputs(conf=conf, max_len=max_len, verify_s=verify_s, lagged_conf=lagged,
                          lagged_max_len=max_len if lagged is not None else None, **kw)


def theta(a, lengths, verify_s):
    """Expected tokens per second of verify for per-request prefix lengths."""
    num_requests = a.shape[0]
    tau = num_requests + sum(a[r, : lengths[r]].sum() for r in range(num_requests))
    return tau / float(verify_s(np.array([[num_requests + sum(lengths)]]))[0, 0])


def brute_force(a, verify_s):
    num_requests, gamma = a.shape
    best = max(itertools.product(range(gamma + 1), repeat=num_requests), key=lambda ls: theta(a, ls, verify_s))
    return theta(a, best, verify_s)


def path_theta(a, verify_s):
    """Theta after admitting the first K candidates of the survival-sorted path, K = 0..R*G."""
    values = np.sort(a.ravel())[::-1]
    num_requests = a.shape[0]
    ks = np.arange(values.size + 1)
    tau = num_requests + np.concatenate([[0.0], np.cumsum(values)])
    return tau / verify_s(num_requests + ks[None, :])[0]


def is_unimodal(values):
    diffs = np.sign(np.diff(values))
    diffs = diffs[diffs != 0]
    return not np.any((diffs[:-1] < 0) & (diffs[1:] > 0))


@settings(max_examples=150, deadline=None)
@given(
    num_requests=st.integers(1, 3),
    gamma=st.integers(1, 3),
    seed=st.integers(0, 2**31 - 1),
    fixed_ms=st.floats(1.0, 20.0),
    per_token_ms=st.floats(0.001, 2.0),
)
def test_algorithm1_matches_exhaustive_optimum_on_unimodal_theta(num_requests, gamma, seed, fixed_ms, per_token_ms):
    rng = np.random.default_rng(seed)
    conf = rng.uniform(0.05, 1.0, size=(num_requests, gamma))
    verify_s = linear_cost(fixed_ms / 1e3, per_token_ms / 1e3)
    a = np.cumprod(conf, axis=1)
    assert is_unimodal(path_theta(a, verify_s))  # tau concave, cost linear: Theta is unimodal along the path
    lengths = make_scheduler("hardware_aware")(inputs(conf, verify_s))[0]
    assert np.all(lengths <= gamma)
    assert theta(a, lengths, verify_s) == pytest.approx(brute_force(a, verify_s), rel=1e-12)


def test_algorithm1_admits_in_survival_order_and_stops_at_first_non_increase():
    conf = np.array([[0.9, 0.9, 0.1], [0.5, 0.9, 0.9]])
    verify_s = linear_cost(0.010, 0.002)
    lengths = make_scheduler("hardware_aware")(inputs(conf, verify_s))[0]
    # path: a = .9 (r0j1), .81 (r0j2), .5 (r1j1), .45 (r1j2), .405 (r1j3), .081 (r0j3)
    # Theta(K) = (2 + sum)/(0.010 + 0.002 (2 + K)): 142.9, 181.3, 206.1, 210.5, 211.8, 211.0 -> stop, K = 4
    assert lengths.tolist() == [2, 2]
    # the same path under a cheaper per-token cost keeps going: 0.0005/token -> K = 5 (the 0.081 never pays)
    assert make_scheduler("hardware_aware")(inputs(conf, linear_cost(0.010, 0.0005)))[0].tolist() == [2, 3]


def bucketed(buckets_s):
    """A jagged verify cost: batch tokens padded up to the next bucket."""
    sizes = np.array(sorted(buckets_s))
    costs = np.array([buckets_s[s] for s in sizes])

    def verify_s(batch_tokens):
        index = np.searchsorted(sizes, np.asarray(batch_tokens), side="left")
        return costs[np.minimum(index, len(sizes) - 1)]

    return verify_s


def test_jagged_curve_early_stop_is_stuck_where_async_topk_gets_past():
    # 4 requests; B = 4 costs 10 ms, any B in 5..8 costs 15 ms: one more token never pays, four do.
    verify_s = bucketed({4: 0.010, 8: 0.015, 16: 0.030})
    conf = np.full((4, 3), 0.9)
    a = np.cumprod(conf, axis=1)
    hardware = make_scheduler("hardware_aware")(inputs(conf, verify_s))[0]
    assert hardware.tolist() == [0, 0, 0, 0]  # Theta(1) = 4.9/15ms < Theta(0) = 4/10ms: stops at once
    lagged = make_scheduler("async_topk", lag_steps=1)(inputs(conf, verify_s, lagged=conf))[0]
    assert lagged.sum() == 4 and lagged.tolist() == [1, 1, 1, 1]
    assert theta(a, lagged, verify_s) > theta(a, hardware, verify_s)
    assert theta(a, lagged, verify_s) == pytest.approx(brute_force(a, verify_s))
    assert not is_unimodal(path_theta(a, verify_s))


def test_async_topk_budget_comes_from_lagged_confidences_and_top_k_from_current():
    verify_s = linear_cost(0.010, 0.0001)
    current = np.array([[0.99, 0.99], [0.2, 0.2]])
    lagged = np.array([[0.99, 0.99], [0.99, 0.99]])  # the old step looked worth all 4 positions
    lengths = make_scheduler("async_topk", lag_steps=2)(inputs(current, verify_s, lagged=lagged))[0]
    assert lengths.tolist() == [2, 2]  # budget 4, spread by current survival
    stingy = make_scheduler("async_topk", lag_steps=2)(inputs(current, linear_cost(0.0, 0.05), lagged=lagged))[0]
    assert stingy.tolist() == [0, 0]


def test_goodput_counts_draft_time():
    conf = np.full((1, 4), 0.6)
    verify_s = linear_cost(0.010, 0.004)
    without = make_scheduler("goodput", lag_steps=0)(inputs(conf, verify_s, draft_s=0.0))[0]
    with_draft = make_scheduler("goodput", lag_steps=0)(inputs(conf, verify_s, draft_s=0.050))[0]
    # tokens 1, 1.6, 1.96, 2.176, 2.3056 over d + 0.010 + 0.004 (1 + K) seconds:
    # no draft time: 71.4, 88.9, 89.1, 83.7, 76.9 -> K = 2; a 50 ms draft: 15.6, 23.5, 27.2, 28.6, 28.8 -> K = 4
    assert without.tolist() == [2]
    assert with_draft.tolist() == [4]


def test_threshold_per_position_and_cumulative():
    conf = np.array([[0.9, 0.7, 0.95, 0.4], [0.3, 0.99, 0.99, 0.99]])
    verify_s = linear_cost(0.01, 0.001)
    per_position = make_scheduler("threshold", threshold=0.6)(inputs(conf, verify_s))[0]
    assert per_position.tolist() == [3, 0]
    cumulative = make_scheduler("threshold", threshold=0.6, cumulative=True)(inputs(conf, verify_s))[0]
    assert cumulative.tolist() == [2, 0]  # a = .9, .63, .5985


def test_fixed_respects_max_len_and_budget():
    conf = np.array([[0.9, 0.8, 0.7], [0.6, 0.5, 0.4]])
    verify_s = linear_cost(0.01, 0.001)
    assert make_scheduler("fixed")(inputs(conf, verify_s, max_len=[3, 1]))[0].tolist() == [3, 1]
    trimmed = make_scheduler("fixed")(inputs(conf, verify_s, token_budget=3))[0]
    assert trimmed.tolist() == [2, 1]  # the 3 highest survivals: .9, .72 (request 0) and .6 (request 1)


def test_oracle_verifies_exactly_the_accepted_prefix():
    conf = np.full((3, 4), 0.5)
    verify_s = linear_cost(0.01, 0.0001)
    true_accepted = np.array([[4, 0, 2]])
    lengths = make_scheduler("oracle")(inputs(conf, verify_s, true_accepted=true_accepted[0]))[0]
    assert lengths.tolist() == [4, 0, 2]


def test_stacked_steps_equal_single_steps():
    rng = np.random.default_rng(7)
    conf = rng.uniform(0.1, 1.0, size=(5, 4, 6))
    max_len = rng.integers(0, 7, size=(5, 4))
    costs = [0.01 + 0.001 * k for k in range(5)]
    for kind, params in [("fixed", {}), ("threshold", {"threshold": 0.5}), ("hardware_aware", {}),
                         ("async_topk", {"lag_steps": 1}), ("goodput", {"lag_steps": 1}), ("oracle", {})]:
        scheduler = make_scheduler(kind, **params)
        truth = rng.integers(0, 7, size=(5, 4))
        ctx = np.array(costs)[:, None]
        stacked = scheduler(ScheduleInputs(conf=conf, max_len=max_len, verify_s=lambda b: ctx + 0.0005 * b,
                                           lagged_conf=conf[::-1], lagged_max_len=max_len, true_accepted=truth,
                                           draft_s=0.002))
        for s in range(5):
            single = scheduler(ScheduleInputs(conf=conf[s:s + 1], max_len=max_len[s:s + 1],
                                              verify_s=lambda b, c=costs[s]: c + 0.0005 * b,
                                              lagged_conf=conf[::-1][s:s + 1], lagged_max_len=max_len[s:s + 1],
                                              true_accepted=truth[s:s + 1], draft_s=0.002))
            assert np.array_equal(stacked[s], single[0]), kind
        assert np.all(stacked <= max_len)


def test_survival_masks_positions_beyond_max_len():
    a = survival(np.full((1, 2, 3), 0.5), np.array([[3, 1]]))
    assert a[0, 0].tolist() == [0.5, 0.25, 0.125]
    assert a[0, 1].tolist() == [0.5, -1.0, -1.0]


def algorithm1_plain(conf, max_len, verify_s, token_budget):
    """DSpark Algorithm 1 for one step, written plainly: walk the candidates in descending survival (ties in
    (request, position) order) while Theta strictly rises and the token budget allows."""
    num_requests, gamma = conf.shape
    a = np.cumprod(conf, axis=1)
    path = sorted(((-a[r, j], r, j) for r in range(num_requests) for j in range(int(max_len[r]))))
    limit = len(path) if token_budget is None else min(len(path), token_budget)
    lengths = np.zeros(num_requests, dtype=np.int64)
    tau = float(num_requests)
    theta = tau / float(np.asarray(verify_s(np.array([[num_requests]]))).ravel()[0])
    for k, (value, r, _) in enumerate(path[:limit]):
        after = (tau - value) / float(np.asarray(verify_s(np.array([[num_requests + k + 1]]))).ravel()[0])
        if after <= theta:
            break
        tau, theta = tau - value, after
        lengths[r] += 1
    return lengths


@settings(max_examples=80, deadline=None)
@given(
    steps=st.sampled_from([1, 4]),
    num_requests=st.integers(1, 60),
    gamma=st.integers(1, 8),
    seed=st.integers(0, 2**31 - 1),
    levels=st.sampled_from([4, 10, 1000]),
    per_token_ms=st.sampled_from([0.0, 0.001, 0.05, 1.0]),
    budget=st.sampled_from([None, 3, 40]),
)
def test_algorithm1_equals_a_plain_walk_on_long_paths(steps, num_requests, gamma, seed, levels, per_token_ms, budget):
    # the compiled walk prices the path's first candidates, then the whole path only when a step has not stopped
    # within them: it must give the plain walk's lengths, ties and budgets included
    rng = np.random.default_rng(seed)
    conf = np.round(rng.uniform(0.05, 1.0, size=(steps, num_requests, gamma)) * levels) / levels
    max_len = rng.integers(0, gamma + 1, size=(steps, num_requests))
    verify_s = linear_cost(0.010, per_token_ms / 1e3)
    got = make_scheduler("hardware_aware")(ScheduleInputs(conf=conf, max_len=max_len, verify_s=verify_s,
                                                          token_budget=budget))
    for s in range(steps):
        assert got[s].tolist() == algorithm1_plain(conf[s], max_len[s], verify_s, budget).tolist()
