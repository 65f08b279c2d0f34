"""Engine behaviour: determinism, common random numbers, blocks equal single steps, limits and Little's law."""

import json

import numpy as np
import pandas as pd
import pytest

import simlab.engine.drawstore as drawstore_module
import simlab.engine.replica as replica_module
from helpers import run_cli, simulate, write_scenario

ALL_SCHEDULERS = [
    {"kind": "fixed"},
    {"kind": "threshold", "threshold": 0.55},
    {"kind": "threshold", "threshold": 0.3, "cumulative": True},
    {"kind": "hardware_aware"},
    {"kind": "async_topk", "lag_steps": 2},
    {"kind": "goodput", "lag_steps": 1},
    {"kind": "oracle"},
]


def mixed_scenario(**overrides) -> dict:
    """A small open-loop scenario on a roofline (context-dependent, jagged) with heterogeneous acceptance."""
    data = {
        "name": "mixed",
        "seed": 23,
        "workload": {
            "kind": "poisson",
            "rate": 12.0,
            "num_requests": 250,
            "prompt_tokens": {"dist": "lognormal", "mean": 600, "sigma": 0.7, "max": 4000},
            "output_tokens": {"dist": "uniform", "low": 1, "high": 300},
            "domains": {"math": 0.4, "chat": 0.6},
        },
        "hardware": {"kind": "roofline", "gpu": "h100-sxm", "model": "qwen3-8b"},
        "engine": {
            "max_num_seqs": 24,
            "max_batch_tokens": 2048,
            "prefill_chunk_tokens": 512,
            "kv_cache_tokens": 400_000,
        },
        "acceptance": {
            "kind": "positional",
            "methods": {
                "dspark": {
                    "math": [0.93, 0.9, 0.88, 0.86, 0.85, 0.84, 0.83],
                    "chat": [0.8, 0.76, 0.73, 0.7, 0.68, 0.66, 0.64],
                },
                "dflash": {
                    "math": [0.88, 0.84, 0.8, 0.78, 0.76, 0.75, 0.74],
                    "chat": [0.72, 0.7, 0.68, 0.66, 0.65, 0.64, 0.63],
                },
            },
            "heterogeneity": {
                "request_logit_sd": 0.5,
                "step_logit_sd": 0.8,
                "step_correlation": 0.6,
                "token_logit_sd": 1.2,
            },
            "confidence": {"noise_logit_sd": 0.7, "bias_logit": 0.3},
            "calibration_samples": 4000,
        },
        "slo": {"ttft_ms": 500, "tpot_ms": 20},
        "arms": [
            {"name": f"dspark-{i}", "method": "dspark", "gamma": 7, "scheduler": s}
            for i, s in enumerate(ALL_SCHEDULERS)
        ]
        + [{"name": "no-spec", "method": "none"}],
    }
    data.update(overrides)
    return data


MOONCAKE = {"kind": "trace", "path": "mooncake-conv-2025", "max_requests": 120, "time_scale": 2.0,
            "domains": {"math": 0.4, "chat": 0.6}}

BLOCK_VARIANTS = {
    "roofline": {},
    "table-with-context": {"hardware": "h100-sxm_qwen3-8b"},
    "round-robin": {"engine": {"max_num_seqs": 8, "max_batch_tokens": 1024, "replicas": 3, "router": "round_robin",
                               "kv_cache_tokens": 100_000}},
    "least-loaded": {"engine": {"max_num_seqs": 8, "max_batch_tokens": 1024, "replicas": 2,
                                "router": "least_loaded", "kv_cache_tokens": 100_000}},
    "closed-loop": {"workload": {"kind": "closed_loop", "concurrency": 6, "num_requests": 60, "prompt_tokens": 3000,
                                 "output_tokens": {"dist": "uniform", "low": 1, "high": 200}, "think_time_s": 0.3}},
    "closed-loop-chained": {"workload": {"kind": "closed_loop", "concurrency": 20, "num_requests": 150,
                                         "prompt_tokens": {"dist": "uniform", "low": 10, "high": 600},
                                         "output_tokens": {"dist": "uniform", "low": 1, "high": 120}}},
    "long-prompts": {"workload": {"kind": "poisson", "rate": 3.0, "num_requests": 60,
                                  "prompt_tokens": {"dist": "uniform", "low": 100, "high": 6000},
                                  "output_tokens": {"dist": "uniform", "low": 1, "high": 300}}},
    "paged-preempting": {"engine": {"max_num_seqs": 24, "max_batch_tokens": 2048, "prefill_chunk_tokens": 512,
                                    "kv_cache_tokens": 9_000, "kv_policy": "paged"}},
    "paged-roomy": {"engine": {"max_num_seqs": 24, "max_batch_tokens": 2048, "prefill_chunk_tokens": 512,
                               "kv_cache_tokens": 400_000, "kv_policy": "paged"}},
    "prefix-cache": {"workload": MOONCAKE,
                     "engine": {"max_num_seqs": 16, "max_batch_tokens": 4096, "kv_cache_tokens": 300_000,
                                "prefix_caching": True}},
    "prefix-cache-paged-routed": {"workload": MOONCAKE,
                                  "engine": {"max_num_seqs": 16, "max_batch_tokens": 4096, "kv_cache_tokens": 160_000,
                                             "prefix_caching": True, "kv_policy": "paged", "replicas": 2,
                                             "router": "prefix_aware"}},
}


@pytest.mark.parametrize("variant", sorted(BLOCK_VARIANTS))
def test_blocks_of_steps_equal_single_steps(tmp_path, monkeypatch, variant):
    path = write_scenario(tmp_path, mixed_scenario(**BLOCK_VARIANTS[variant]))
    blocked = simulate(path)
    monkeypatch.setattr(replica_module, "MAX_BLOCK_STEPS", 1)
    single = simulate(path)
    assert blocked.keys() == single.keys()
    for name in blocked:
        pd.testing.assert_frame_equal(blocked[name].steps, single[name].steps, check_exact=True)
        pd.testing.assert_frame_equal(blocked[name].requests, single[name].requests, check_exact=True)


def test_results_do_not_depend_on_how_draws_are_made_ahead(tmp_path, monkeypatch):
    """Scarce draws (drawn short of what requests need, so blocks stop where a request runs out and the store
    extends runs often) give the same steps and requests as the default sizing and as single steps."""
    path = write_scenario(tmp_path, mixed_scenario())
    default = simulate(path)
    extensions = []
    extend = drawstore_module.DrawStore._extend
    monkeypatch.setattr(drawstore_module.DrawStore, "_extend",
                        lambda self, *args: extensions.append(len(args[0])) or extend(self, *args))
    for name, value in {"MARGIN": 0.3, "NEED_MARGIN": 0.3, "SLACK_STEPS": 0, "TOP_UP_WITHIN": 0,
                        "SLOT_STEPS": 16, "BATCH": 3}.items():
        monkeypatch.setattr(drawstore_module, name, value)
    scarce = simulate(path)
    assert len(extensions) > 1000  # the scarce store really ran out often
    for name in default:
        pd.testing.assert_frame_equal(default[name].steps, scarce[name].steps, check_exact=True)
        pd.testing.assert_frame_equal(default[name].requests, scarce[name].requests, check_exact=True)


def test_same_seed_same_summary_and_another_seed_differs(tmp_path):
    path = write_scenario(tmp_path, mixed_scenario(arms=[
        {"name": "hw", "method": "dspark", "gamma": 7, "scheduler": {"kind": "hardware_aware"}},
        {"name": "async", "method": "dspark", "gamma": 6, "scheduler": {"kind": "async_topk", "lag_steps": 1}},
    ]))
    documents = []
    for out, extra in (("a", []), ("b", ["--jobs", "2"]), ("c", ["--seed", "24"])):
        code, _, err = run_cli("run", str(path), "--out", str(tmp_path / out), "--quiet", *extra)
        assert code == 0, err
        doc = json.loads((tmp_path / out / "summary.json").read_text())
        for metrics in doc["arms"].values():
            metrics.pop("sim_wall_s")
        documents.append(doc)
    assert documents[0] == documents[1]
    assert documents[0]["arms"] != documents[2]["arms"]
    same = [(tmp_path / d / "requests.csv").read_bytes() for d in ("a", "b")]
    assert same[0] == same[1]


def test_arms_share_requests_and_random_streams(tmp_path):
    # a threshold no confidence falls below verifies everything: it must replay the fixed arm exactly
    data = mixed_scenario(
        arms=[
            {"name": "fixed", "method": "dspark", "gamma": 7, "scheduler": {"kind": "fixed"}},
            {
                "name": "threshold-0",
                "method": "dspark",
                "gamma": 7,
                "scheduler": {"kind": "threshold", "threshold": 1e-300},
            },
            {"name": "dflash", "method": "dflash", "gamma": 7, "scheduler": {"kind": "fixed"}},
        ]
    )
    outcomes = simulate(write_scenario(tmp_path, data))
    fixed, threshold = outcomes["fixed"], outcomes["threshold-0"]
    pd.testing.assert_frame_equal(fixed.steps.drop(columns="arm"), threshold.steps.drop(columns="arm"))
    cols = ["id", "arrival_s", "prompt_tokens", "output_tokens", "domain"]
    pd.testing.assert_frame_equal(fixed.requests[cols], outcomes["dflash"].requests[cols])


def test_little_law_and_conservation_on_every_kind_of_run(tmp_path):
    runs = {
        "open": mixed_scenario(),
        "replicas": mixed_scenario(engine={"max_num_seqs": 8, "max_batch_tokens": 2048, "replicas": 3,
                                           "router": "least_loaded", "kv_cache_tokens": 200_000}),
        "closed": mixed_scenario(workload={"kind": "closed_loop", "concurrency": 12, "num_requests": 150,
                                           "prompt_tokens": 300, "output_tokens": {"dist": "exponential", "mean": 80},
                                           "think_time_s": 0.05}),
        "closed-replicas": mixed_scenario(
            workload={"kind": "closed_loop", "concurrency": 9, "num_requests": 120, "prompt_tokens": 200,
                      "output_tokens": 60},
            engine={"max_num_seqs": 4, "max_batch_tokens": 1024, "replicas": 2, "kv_cache_tokens": 100_000}),
    }
    for label, data in runs.items():
        outcomes = simulate(write_scenario(tmp_path, data, f"{label}.yaml"))
        for name, outcome in outcomes.items():
            m, req, steps = outcome.metrics, outcome.requests, outcome.steps
            assert m["completed"] == len(req), (label, name)
            assert not req[["arrival_s", "first_token_s", "finish_s"]].isna().any().any(), (label, name)
            assert m["little_mean_in_system"] == pytest.approx(m["little_arrival_rate_x_mean_e2el"], rel=1e-9)
            # every output token is emitted exactly once: first by prefill, the rest by decode steps
            assert steps.emitted_tokens.sum() == (req.output_tokens - 1).sum(), (label, name)
            assert steps.prefill_tokens.sum() == req.prompt_tokens.sum(), (label, name)
            assert (req.first_token_s >= req.arrival_s).all() and (req.finish_s >= req.first_token_s).all()
            assert (steps.accepted_tokens <= steps.verify_tokens).all()
            for replica, rows in steps.groupby("replica"):
                start = rows.t_s.to_numpy()
                assert np.all(np.diff(start) > 0), (label, name)
                assert np.all(start[1:] >= (start + rows.step_s.to_numpy())[:-1] - 1e-9)


def test_limits_hold_at_every_step(tmp_path):
    data = mixed_scenario(engine={"max_num_seqs": 6, "max_batch_tokens": 64, "prefill_chunk_tokens": 48,
                                  "kv_cache_tokens": 9000, "kv_policy": "reserve"})  # not the stack's paged KV
    outcomes = simulate(write_scenario(tmp_path, data))
    for outcome in outcomes.values():
        steps = outcome.steps
        assert steps.num_requests.max() <= 6
        assert steps.batch_tokens.max() <= 64
        assert steps.prefill_tokens.max() <= 48
        req = outcome.requests
        # KV: a request holds prompt + output tokens from admission (before its first token) to its finish, so
        # the requests between first token and finish must never need more than the cache at any moment
        need = (req.prompt_tokens + req.output_tokens).to_numpy()
        times = np.concatenate([req.first_token_s.to_numpy(), req.finish_s.to_numpy()])
        deltas = np.concatenate([need, -need])
        order = np.lexsort((deltas, times))  # at equal times, releases first
        assert np.cumsum(deltas[order]).max() <= 9000


def test_oracle_wastes_no_verify_tokens_and_bounds_tokens_per_round(tmp_path):
    outcomes = simulate(write_scenario(tmp_path, mixed_scenario()))
    oracle = outcomes["dspark-6"].metrics
    fixed = outcomes["dspark-0"].metrics
    assert oracle["wasted_verify_tokens"] == 0
    assert oracle["realisable"] is False and oracle["lossless"] is False
    assert fixed["realisable"] is True and fixed["lossless"] is True
    assert oracle["spec_decode_acceptance_rate"] == 1.0
    # same true outcomes: verifying only accepted prefixes emits as much per round as verifying all of them
    assert oracle["spec_decode_acceptance_length"] == pytest.approx(fixed["spec_decode_acceptance_length"], rel=0.02)
