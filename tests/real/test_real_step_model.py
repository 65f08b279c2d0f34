"""The real engine runs the simulator's step model (docs/engine.md): FCFS admission under max_num_seqs and the KV
reservation, a shared max_batch_tokens, chunked prefill mixed into decode steps, the lag rule with the prior, and
closed-loop users; and it stays lossless while doing so."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from simlab.config import EngineConfig  # noqa: E402
from simlab.real import engine as engine_module  # noqa: E402
from simlab.real.engine import ClosedLoopUsers, DecodingConfig, Request, SpeculativeEngine  # noqa: E402
from simlab.real.generate import plain_generate  # noqa: E402
from simlab.schedulers import make_scheduler  # noqa: E402


def _requests(num=6, seed=0, spacing_s=0.0):
    gen = torch.Generator().manual_seed(seed)
    prompts = [11, 3, 17, 6, 9, 14, 5, 8][:num]
    budgets = [9, 14, 5, 12, 7, 10, 6, 11][:num]
    return [Request(id=i, prompt_ids=tuple(torch.randint(0, 259, (n,), generator=gen).tolist()), max_new_tokens=b,
                    arrival_s=spacing_s * i, domain="code") for i, (n, b) in enumerate(zip(prompts, budgets))]


def _check_lossless(target, result, requests):
    reference = plain_generate(target, [r.prompt_ids for r in requests], [r.max_new_tokens for r in requests])
    assert [result.outputs[r.id] for r in requests] == reference


def test_chunked_prefill_is_mixed_into_decode_steps_and_stays_lossless(pair64):
    target, drafter = pair64
    requests = _requests()
    limits = EngineConfig(max_num_seqs=4, max_batch_tokens=16, prefill_chunk_tokens=5)
    result = SpeculativeEngine(target, drafter, decoding=DecodingConfig(gamma=3), limits=limits).run(requests)
    _check_lossless(target, result, requests)
    steps = result.steps
    mixed = steps[(steps["decode_requests"] > 0) & (steps["prefill_tokens"] > 0)]
    assert len(mixed) > 0  # prefill chunks shared steps with decoding requests
    assert (steps["prefill_tokens"] <= 5).all()  # never more than one chunk's worth per step
    assert (steps["batch_tokens"] <= 16).all()
    # prompts longer than the chunk were split over several steps
    assert steps["prefill_tokens"].sum() == sum(len(r.prompt_ids) for r in requests)
    assert (steps["prefill_tokens"] > 0).sum() > len(requests) // 2


def test_the_prefill_takes_what_the_decode_part_leaves(pair64):
    target, drafter = pair64
    requests = _requests(num=5, seed=1)
    limits = EngineConfig(max_num_seqs=5, max_batch_tokens=12)
    result = SpeculativeEngine(target, drafter, decoding=DecodingConfig(gamma=4), limits=limits).run(requests)
    _check_lossless(target, result, requests)
    steps = result.steps
    decode_tokens = steps["decode_requests"] + steps["verify_tokens"]
    assert (decode_tokens + steps["prefill_tokens"] <= 12).all()
    # work-conserving: while prompts wait to be prefilled, a step leaves no budget unused
    prefill_left = sum(len(r.prompt_ids) for r in requests) - steps["prefill_tokens"].cumsum()
    waiting = (prefill_left.shift(1, fill_value=sum(len(r.prompt_ids) for r in requests)) > 0) & (prefill_left > 0)
    assert (steps.loc[waiting, "batch_tokens"] == 12).all()


def test_admission_is_fcfs_under_seats_and_the_kv_reservation(pair64):
    target, drafter = pair64
    requests = _requests(num=6, seed=2)
    need = [len(r.prompt_ids) + r.max_new_tokens for r in requests]
    capacity = max(need) + min(need)  # room for the largest request and at most a small one beside it
    limits = EngineConfig(max_num_seqs=3, max_batch_tokens=64, kv_cache_tokens=capacity)
    result = SpeculativeEngine(target, drafter, decoding=DecodingConfig(gamma=3), limits=limits).run(requests)
    _check_lossless(target, result, requests)
    frame = result.requests.set_index("id")
    # first come first served: first tokens in arrival (id) order among requests that arrived together
    assert frame["first_token_s"].loc[[r.id for r in requests]].is_monotonic_increasing
    # at every moment the requests holding KV fit in the cache and in the seats
    starts = frame["first_token_s"].to_numpy()
    ends = frame["finish_s"].to_numpy()
    for t in np.concatenate([starts, ends]):
        holding = (starts <= t) & (ends > t)
        assert holding.sum() <= 3
        assert np.dot(holding, np.array(need)) <= capacity


def test_young_requests_are_scheduled_with_the_prior(pair64, monkeypatch):
    target, drafter = pair64
    seen = []
    real_helper = engine_module.schedule_inputs

    def spy(scheduler, **inputs):
        built = real_helper(scheduler, **inputs)
        seen.append((inputs["lagged_known"][0].copy(), built.lagged_conf[0].copy()))
        return built

    monkeypatch.setattr(engine_module, "schedule_inputs", spy)
    prior = [0.91, 0.82, 0.73]
    requests = _requests(num=3, seed=3)
    engine = SpeculativeEngine(target, drafter, make_scheduler("async_topk", lag_steps=2), DecodingConfig(gamma=3),
                               EngineConfig(max_num_seqs=3), verify_cost=lambda b: 0.01 + 0.001 * np.asarray(b),
                               prior_conf=prior)
    result = engine.run(requests)
    _check_lossless(target, result, requests)
    young = np.concatenate([known for known, _ in seen]) == 0
    assert young.sum() >= 2 * len(requests) - 2  # each request's first two decode steps (some end sooner)
    for known, lagged in seen:
        np.testing.assert_array_equal(lagged[~known], np.tile(prior, ((~known).sum(), 1)))
    with pytest.raises(ValueError, match="prior_conf"):
        SpeculativeEngine(target, drafter, make_scheduler("async_topk", lag_steps=2), DecodingConfig(gamma=3),
                          verify_cost=lambda b: np.asarray(b, dtype=float))


def test_closed_loop_users_send_the_next_request_when_one_finishes(pair64):
    target, drafter = pair64
    requests = _requests(num=5, seed=4)
    result = SpeculativeEngine(target, drafter, decoding=DecodingConfig(gamma=3)).run(
        requests, closed_loop=ClosedLoopUsers(concurrency=2, think_time_s=0.0))
    _check_lossless(target, result, requests)
    frame = result.requests.set_index("id").sort_index()
    assert (frame["arrival_s"].iloc[:2] == 0.0).all()
    finishes = np.sort(frame["finish_s"].to_numpy())
    # request i >= 2 arrives when the (i-1)-th finish happens
    np.testing.assert_allclose(frame["arrival_s"].iloc[2:].to_numpy(), finishes[:3], rtol=0, atol=0)
    in_system = [((frame["arrival_s"] <= t) & (frame["finish_s"] > t)).sum() for t in frame["arrival_s"]]
    assert max(in_system) <= 2


def test_requests_arrive_on_the_wall_clock(pair64):
    target, drafter = pair64
    requests = _requests(num=3, seed=5, spacing_s=0.05)
    result = SpeculativeEngine(target, drafter, decoding=DecodingConfig(gamma=3)).run(requests)
    frame = result.requests.set_index("id")
    for request in requests:
        assert frame.loc[request.id, "arrival_s"] == request.arrival_s
        assert frame.loc[request.id, "first_token_s"] >= request.arrival_s
    assert result.steps["t_s"].iloc[0] >= 0.0 and result.wall_s >= 0.1
