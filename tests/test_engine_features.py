"""Paged KV with preemption and prefix caching, on cases worked out by hand (docs/engine.md sections 6-7)."""

from __future__ import annotations

import numpy as np
import pandas as pd

import simlab
from helpers import flat_table


def _arm():
    return [{"name": "plain", "method": "none"}]


def test_an_overload_built_to_preempt_once_does_so_and_recomputes():
    """Two requests of 16 prompt + 60 output tokens on 6 KV blocks of 16 tokens, decoding in lockstep: both need
    3 blocks up to context 48; at context 49 each needs 4, so the newer (B) is preempted with 33 tokens emitted.
    It waits (recomputing 49 tokens needs 4 blocks; A leaves 2 free, later 1) until A finishes, then prefills
    those 49 tokens, which emits its 34th token, and decodes its last 26."""
    data = {"name": "preempt", "seed": 0,
            "workload": {"kind": "closed_loop", "concurrency": 2, "num_requests": 2, "prompt_tokens": 16,
                         "output_tokens": 60},
            "hardware": flat_table(0.01, prefill_per_token_s=1e-5),
            "engine": {"max_num_seqs": 8, "max_batch_tokens": 512, "kv_cache_tokens": 96, "kv_policy": "paged"},
            "acceptance": {"kind": "iid", "alpha": 0.5}, "arms": _arm()}
    results = simlab.run_scenario(data, plot=False)
    assert results.arms["plain"]["num_preemptions"] == 1
    requests = results.requests.set_index("id")
    assert requests.loc[0, "steps"] == 59 and requests.loc[1, "steps"] == 32 + 26
    assert requests.loc[1, "finish_s"] > requests.loc[0, "finish_s"]
    steps = results.steps
    assert steps.prefill_tokens.tolist().count(0) == len(steps) - 2  # the first prefill, then the recompute
    assert steps.prefill_tokens.sum() == 32 + 49
    assert steps.kv_tokens.max() <= 96
    # B's first token is the one of its first prefill, not of the recompute
    assert requests.loc[1, "first_token_s"] == steps.t_s.iloc[0] + steps.step_s.iloc[0]


def test_with_enough_kv_paged_gives_the_same_results_as_reserve():
    data = {"name": "roomy", "seed": 3,
            "workload": {"kind": "poisson", "rate": 20.0, "num_requests": 300,
                         "prompt_tokens": {"dist": "uniform", "low": 10, "high": 2000},
                         "output_tokens": {"dist": "uniform", "low": 1, "high": 400}},
            "hardware": "h100-sxm_qwen3-8b",
            "engine": {"max_num_seqs": 32, "max_batch_tokens": 4096, "kv_cache_tokens": 1_000_000},
            "acceptance": {"kind": "preset", "name": "qwen3-8b"},
            "arms": [{"name": "hw", "method": "dspark", "gamma": 7, "scheduler": {"kind": "hardware_aware"}}]}
    reserve = simlab.run_scenario(data, plot=False)
    paged = simlab.run_scenario({**data, "engine": {**data["engine"], "kv_policy": "paged"}}, plot=False)
    assert paged.arms["hw"]["num_preemptions"] == 0
    pd.testing.assert_frame_equal(reserve.requests, paged.requests, check_exact=True)
    columns = [c for c in reserve.steps.columns if c != "kv_tokens"]  # the KV in use differs, nothing else
    pd.testing.assert_frame_equal(reserve.steps[columns], paged.steps[columns], check_exact=True)
    # blocks are taken as sequences grow instead of reserved up front: less KV in use on average
    assert paged.arms["hw"]["mean_kv_usage"] < reserve.arms["hw"]["mean_kv_usage"]


def _shared_prefix_trace(tmp_path, num_requests=5, prompt=2048, shared=1536, gap_s=10.0):
    path = tmp_path / "shared.csv"
    rows = ["arrival,prompt_tokens,output_tokens,conversation,shared"]
    rows += [f"{i * gap_s},{prompt},50,chat-1,{shared}" for i in range(num_requests)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def _prefix_scenario(path, **engine):
    return {"name": "prefix", "seed": 1,
            "workload": {"kind": "trace", "path": str(path), "format": "csv",
                         "columns": {"arrival": "arrival", "prompt_tokens": "prompt_tokens",
                                     "output_tokens": "output_tokens", "prefix_group": "conversation",
                                     "prefix_tokens": "shared"}},
            "hardware": flat_table(0.01, prefill_per_token_s=1e-5),
            "engine": {"max_num_seqs": 8, "max_batch_tokens": 4096, "kv_cache_tokens": 100_000, **engine},
            "acceptance": {"kind": "iid", "alpha": 0.5}, "arms": _arm()}


def test_requests_sharing_one_prefix_hit_for_all_but_the_first(tmp_path):
    """Five requests, one every 10 s, each 2,048 prompt tokens of which the first 1,536 (3 blocks) are shared:
    the first prefills 2,048 tokens, each later one 2,048 - 1,536 = 512."""
    path = _shared_prefix_trace(tmp_path)
    results = simlab.run_scenario(_prefix_scenario(path, prefix_caching=True), plot=False)
    metrics = results.arms["plain"]
    assert metrics["prefix_cache_hit_rate"] == 4 * 1536 / (5 * 2048)
    prefills = results.steps.prefill_tokens[results.steps.prefill_tokens > 0].tolist()
    assert prefills == [2048, 512, 512, 512, 512]
    requests = results.requests
    ttft = (requests.first_token_s - requests.arrival_s).to_numpy()
    np.testing.assert_allclose(ttft, [2048e-5] + [512e-5] * 4, rtol=1e-9)  # a prefill-only step: per token
    without = simlab.run_scenario(_prefix_scenario(path), plot=False)
    assert without.arms["plain"]["prefix_cache_hit_rate"] is None
    assert without.steps.prefill_tokens.sum() == 5 * 2048


def test_a_full_prompt_hit_still_computes_its_last_block(tmp_path):
    path = _shared_prefix_trace(tmp_path, num_requests=2, prompt=1024, shared=1024)
    results = simlab.run_scenario(_prefix_scenario(path, prefix_caching=True), plot=False)
    assert results.steps.prefill_tokens[results.steps.prefill_tokens > 0].tolist() == [1024, 512]


def test_prefix_aware_routing_sends_a_request_where_its_prefix_is(tmp_path):
    path = tmp_path / "two.csv"
    rows = ["arrival,prompt_tokens,output_tokens,conversation"]
    rows += ["0,1024,20,a", "0,1024,20,b", "5,1024,20,b", "6,1024,20,a", "7,1024,20,b"]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    data = _prefix_scenario(path, prefix_caching=True, replicas=2, router="prefix_aware")
    data["workload"]["columns"].pop("prefix_tokens")
    results = simlab.run_scenario(data, plot=False)
    replica = results.requests.sort_values("id").replica.tolist()
    assert replica[:2] == [0, 1]  # empty caches: by load, then index
    assert replica[2:] == [1, 0, 1]  # each follows its conversation
    assert results.arms["plain"]["prefix_cache_hit_rate"] == 3 * 512 / (5 * 1024)
