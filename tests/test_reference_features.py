"""Paged KV with preemption (docs/engine.md section 6.2) and prefix caching (section 7): the engine against the
reference stepper, bit for bit, and paged against reserve when KV is plentiful.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

import simlab
from reference import prefix_blocks_from_ids, run_reference
from simlab.runner import as_loaded, build
from test_reference_equivalence import (
    ENGINE_DEVIATIONS, SCENARIOS, THREE_ARMS, closed_loop, differences, poisson, scenario, uniform,
)

TRACES = Path(__file__).resolve().parents[1] / "traces"
MOONCAKE = "mooncake-conv-2025"
MOONCAKE_FILE = TRACES / "conversation_trace.jsonl"
PREFIX_BLOCK_TOKENS = 512


def with_engine(data: dict, **fields) -> dict:
    data = copy.deepcopy(data)
    data["engine"] = {**data["engine"], **fields}
    return data


def mooncake_prefix_blocks(num_requests: int) -> list:
    """Each of the trace's first ``num_requests`` requests' prefix blocks: its hash_ids that name whole 512-token
    blocks of its prompt (section 7; a shorter last block is not one)."""
    blocks = []
    with MOONCAKE_FILE.open(encoding="utf-8") as fh:
        for _, line in zip(range(num_requests), fh):
            row = json.loads(line)
            ids, prompt = row["hash_ids"], row["input_length"]
            blocks.append(
                [(h, PREFIX_BLOCK_TOKENS) for k, h in enumerate(ids) if (k + 1) * PREFIX_BLOCK_TOKENS <= prompt]
            )
    return blocks


def compare(data: dict, *, engine=None) -> None:
    """The engine and the reference agree on every arm of ``data`` (with the features as its engine config
    says), and so do their feature metrics. ``engine``: the engine's results of ``data`` when already run."""
    engine = engine or simlab.run_scenario(data, plot=False)
    built = build(as_loaded(data))
    blocks = None
    found = []
    for i, prepared in enumerate(built.arms):
        label = prepared.arm.label
        ref = run_reference(built=built, arm=i, prefix_blocks=blocks)
        found += differences(engine, ref, label)
        metrics = engine.arms[label]
        if data["engine"].get("kv_policy") == "paged" and metrics.get("num_preemptions") != ref.num_preemptions:
            found.append(f"{label}: num_preemptions engine {metrics.get('num_preemptions')}, "
                         f"reference {ref.num_preemptions}")
        if data["engine"].get("prefix_caching") and metrics.get("prefix_cache_hit_rate") != ref.prefix_cache_hit_rate:
            found.append(f"{label}: prefix_cache_hit_rate engine {metrics.get('prefix_cache_hit_rate')}, "
                         f"reference {ref.prefix_cache_hit_rate}")
    assert not found, "\n".join(found)


# ------------------------------------------------------------------------------------------------ paged
PAGED_SCENARIOS = {
    "open-loop-preempting": with_engine(
        scenario("paged-open", workload=poisson(80, 25.0, output=uniform(2, 100))),
        max_num_seqs=64, prefill_chunk_tokens=1024, kv_cache_tokens=3200, kv_policy="paged", block_size=16),
    "closed-loop-preempting": with_engine(
        scenario("paged-closed", workload=closed_loop(16, 80, uniform(10, 600), uniform(2, 200))),
        kv_cache_tokens=2400, kv_policy="paged", block_size=16),
    "replicas-preempting": with_engine(
        scenario("paged-rr", workload=poisson(80, 20.0, output=uniform(2, 200))),
        max_num_seqs=16, max_batch_tokens=1024, replicas=2, router="round_robin", kv_cache_tokens=3200,
        kv_policy="paged", block_size=32),
    "long-prompts-preempting": with_engine(
        scenario("paged-long", workload=poisson(30, 3.0, prompt=uniform(100, 6000), output=uniform(2, 200))),
        kv_cache_tokens=6400, kv_policy="paged", block_size=16),
}


@pytest.mark.parametrize("name", sorted(PAGED_SCENARIOS))
def test_paged_engine_equals_reference(name):
    data = PAGED_SCENARIOS[name]
    preempted = run_reference(data, arm=0).num_preemptions
    assert preempted > 0, f"{name} is meant to preempt"
    compare(data)


@pytest.mark.parametrize("name", ["round-robin-3", "closed-loop-think", "long-prompts-chunked"])
def test_paged_with_enough_kv_gives_the_reserve_results(name):
    reserve = simlab.run_scenario(SCENARIOS[name], plot=False)
    paged_data = with_engine(SCENARIOS[name], kv_policy="paged", block_size=16)
    paged = simlab.run_scenario(paged_data, plot=False)
    assert reserve.requests.equals(paged.requests)
    keep = [c for c in reserve.steps.columns if c != "kv_tokens"]
    assert reserve.steps[keep].equals(paged.steps[keep])
    for label, metrics in paged.arms.items():
        assert metrics["num_preemptions"] == 0
    compare(paged_data, engine=paged)


# ------------------------------------------------------------------------------------------------ prefix caching
def mooncake(name: str, num_requests: int, **engine) -> dict:
    defaults = {"max_num_seqs": 32, "max_batch_tokens": 4096, "prefill_chunk_tokens": 2048,
                "kv_cache_tokens": 400_000}
    return with_engine(
        scenario(name, workload={"kind": "trace", "path": MOONCAKE, "max_requests": num_requests,
                                 "time_scale": 0.05, "domains": {"math": 0.5, "chat": 0.5}},
                 arms=[THREE_ARMS[0], THREE_ARMS[2]]),
        **{**defaults, **engine})


PREFIX_SCENARIOS = {
    "mooncake-reserve": (mooncake("prefix-reserve", 60, prefix_caching=True), 60),
    "mooncake-paged-evicting": (mooncake("prefix-paged", 60, prefix_caching=True, kv_policy="paged",
                                         block_size=16, kv_cache_tokens=120_000), 60),
    "mooncake-prefix-aware-router": (mooncake("prefix-router", 60, prefix_caching=True, replicas=3,
                                              router="prefix_aware"), 60),
}


def check_prefix_ids(data: dict, num_requests: int):
    """The workload's prefix ids (the reference's default) are the trace's hash_ids, request by request."""
    built = build(as_loaded(data))
    requests = built.workload.requests
    assert prefix_blocks_from_ids(requests.prompt_tokens, *requests.prefix_ids) == mooncake_prefix_blocks(num_requests)
    assert run_reference(built=built, arm=1).prefix_cache_hit_rate > 0.01


@pytest.mark.parametrize("name", sorted(PREFIX_SCENARIOS))
def test_prefix_caching_engine_equals_reference(name):
    data, num_requests = PREFIX_SCENARIOS[name]
    check_prefix_ids(data, num_requests)
    compare(data)


def test_prefix_caching_engine_equals_reference_on_the_first_requests():
    compare(mooncake("prefix-partial", 20, prefix_caching=True))


def test_prefix_caching_off_changes_nothing():
    data = SCENARIOS["trace-azure-conv"]
    off = simlab.run_scenario(data, plot=False)
    on = simlab.run_scenario(with_engine(data, prefix_caching=False), plot=False)
    assert off.requests.equals(on.requests) and off.steps.equals(on.steps)


# ------------------------------------------------------------------------------------------------ every kind, paged
def tight_paged(data: dict, block_size: int = 16) -> dict:
    """``data`` under paged KV with room for its largest request or three median ones: preemption is likely."""
    requests = build(as_loaded(data)).workload.requests
    need = requests.prompt_tokens + requests.output_tokens
    tokens = max(int(need.max()), 3 * int(np.median(need)))
    return with_engine(data, kv_policy="paged", block_size=block_size,
                       kv_cache_tokens=-(-tokens // block_size) * block_size)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(SCENARIOS) - set(ENGINE_DEVIATIONS)))
def test_every_scenario_kind_under_paged_kv(name):
    compare(tight_paged(SCENARIOS[name]))
