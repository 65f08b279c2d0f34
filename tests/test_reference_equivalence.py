"""The engine against the reference stepper (tests/reference/, written from docs/engine.md): every column of
every request and step and the per-position counts must be equal bit for bit, on every kind of scenario.

Floats are compared exactly: the clock grows by one addition per iteration in both, and costs come from the same
cost-model calls with the same arguments.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

import simlab
from reference import run_reference
from simlab.runner import as_loaded, build

ROOFLINE = {"kind": "roofline", "gpu": "h100-sxm", "model": "qwen3-8b"}
CONTEXT_TABLE = "h100-sxm_qwen3-8b"  # a shipped profile whose verify cost is a (context x batch) grid
FLAT_TABLE = {  # every verify step costs the same, and every cost is a power of two (sums are exact): iterations
    # of different replicas end at the same times
    "kind": "table",
    "verify": {"batch_tokens": [1, 8192], "step_s": [2.0**-7, 2.0**-7]},
    "draft": {"parallel": {"step_s": 2.0**-9}, "sequential_head": {"step_s": 2.0**-13}},
    "prefill": {"per_token_s": 2.0**-13},
    "kv_cache_tokens": 1_000_000,
}
POSITIONAL = {
    "kind": "positional",
    "methods": {
        "dspark": {"math": [0.93, 0.9, 0.88, 0.86, 0.85, 0.84, 0.83],
                   "chat": [0.8, 0.76, 0.73, 0.7, 0.68, 0.66, 0.64]},
        "dflash": {"math": [0.88, 0.84, 0.8, 0.78, 0.76, 0.75, 0.74],
                   "chat": [0.72, 0.7, 0.68, 0.66, 0.65, 0.64, 0.63]},
    },
    "heterogeneity": {"request_logit_sd": 0.5, "step_logit_sd": 0.8, "step_correlation": 0.6,
                      "token_logit_sd": 1.2},
    "confidence": {"noise_logit_sd": 0.7, "bias_logit": 0.3},
    "calibration_samples": 2000,
}
SCHEDULERS = {
    "fixed": {"kind": "fixed"},
    "threshold": {"kind": "threshold", "threshold": 0.55},
    "threshold-cumulative": {"kind": "threshold", "threshold": 0.3, "cumulative": True},
    "hardware_aware": {"kind": "hardware_aware"},
    "async_topk-lag1": {"kind": "async_topk", "lag_steps": 1},
    "async_topk-lag3": {"kind": "async_topk", "lag_steps": 3},
    "goodput-lag0": {"kind": "goodput", "lag_steps": 0},
    "goodput-lag1": {"kind": "goodput", "lag_steps": 1},
    "oracle": {"kind": "oracle"},
}
THREE_ARMS = [
    {"name": "dspark-hw", "method": "dspark", "gamma": 7, "scheduler": SCHEDULERS["hardware_aware"]},
    {"name": "dspark-async3", "method": "dspark", "gamma": 7, "scheduler": SCHEDULERS["async_topk-lag3"]},
    {"name": "no-spec", "method": "none"},
]


def poisson(num_requests: int, rate: float = 10.0, *, prompt=None, output=None, **extra) -> dict:
    """An open-loop Poisson workload (math and chat)."""
    return {"kind": "poisson", "rate": rate, "num_requests": num_requests,
            "prompt_tokens": prompt or {"dist": "lognormal", "mean": 500, "sigma": 0.7, "max": 3000},
            "output_tokens": output or {"dist": "uniform", "low": 1, "high": 160},
            "domains": {"math": 0.4, "chat": 0.6}, **extra}


def uniform(low: int, high: int) -> dict:
    return {"dist": "uniform", "low": low, "high": high}


def closed_loop(concurrency: int, num_requests: int, prompt, output, think_time_s: float = 0.0) -> dict:
    return {"kind": "closed_loop", "concurrency": concurrency, "num_requests": num_requests,
            "prompt_tokens": prompt, "output_tokens": output, "think_time_s": think_time_s}


def scenario(name: str, **overrides) -> dict:
    """A small open-loop scenario on the roofline (its verify cost depends on context and is jagged)."""
    data = {
        "name": name,
        "seed": 11,
        "workload": poisson(100),
        "hardware": ROOFLINE,
        "engine": {"max_num_seqs": 24, "max_batch_tokens": 2048, "prefill_chunk_tokens": 512,
                   "kv_cache_tokens": 400_000},
        "acceptance": POSITIONAL,
        "arms": THREE_ARMS,
    }
    data.update(copy.deepcopy(overrides))
    return data


SMALL_REPLICAS = {"max_num_seqs": 8, "max_batch_tokens": 1024, "kv_cache_tokens": 100_000}
SCENARIOS = {
    # open loop
    "trace-azure-conv": scenario(
        "trace", workload={"kind": "trace", "path": "azure-conv-2023", "time_scale": 0.15, "max_requests": 120,
                           "domains": {"math": 0.5, "chat": 0.5}},
        hardware=CONTEXT_TABLE),
    "poisson-every-scheduler": scenario(
        "schedulers", workload=poisson(60, output=uniform(1, 120)),
        arms=[{"name": f"dspark-{k}", "method": "dspark", "gamma": 7, "scheduler": s}
              for k, s in SCHEDULERS.items()]),
    "gamma-arrivals-autoregressive-roofline": scenario(  # the roofline charges mtp/eagle3 drafts their KV reads
        "gamma", workload={**poisson(80, 12.0, prompt=uniform(20, 1500)), "kind": "gamma", "cv": 3.0,
                           "domains": {"code": 0.5, "chat": 0.5}},
        acceptance={"kind": "preset", "name": "qwen3-8b"},
        arms=[{"name": "eagle3", "method": "eagle3", "gamma": 5, "scheduler": SCHEDULERS["async_topk-lag1"]},
              {"name": "mtp", "method": "mtp", "gamma": 2, "scheduler": SCHEDULERS["goodput-lag0"]},
              {"name": "dspark", "method": "dspark", "gamma": 7, "scheduler": SCHEDULERS["oracle"]}]),
    "every-method-table": scenario(
        "methods", hardware=CONTEXT_TABLE, acceptance={"kind": "preset", "name": "qwen3-8b"},
        workload={**poisson(60, 8.0, prompt=uniform(20, 1200), output=uniform(1, 120)),
                  "domains": {"math": 0.3, "code": 0.3, "chat": 0.4}},
        arms=[{"name": "none", "method": "none"},
              {"name": "mtp", "method": "mtp", "gamma": 1, "scheduler": SCHEDULERS["fixed"]},
              {"name": "eagle3", "method": "eagle3", "gamma": 5, "scheduler": SCHEDULERS["hardware_aware"]},
              {"name": "dflash", "method": "dflash", "gamma": 7, "scheduler": SCHEDULERS["goodput-lag1"]},
              {"name": "dspark", "method": "dspark", "gamma": 7, "scheduler": SCHEDULERS["threshold"]}]),
    # closed loop
    "closed-loop-think": scenario(
        "closed-think", workload=closed_loop(6, 50, 1500, uniform(1, 150), think_time_s=0.3)),
    "closed-loop-no-think": scenario(
        "closed-chained", workload=closed_loop(16, 100, uniform(10, 600), uniform(2, 120))),
    "closed-loop-one-token-outputs": scenario(
        "closed-one-token", workload=closed_loop(16, 100, uniform(10, 600), uniform(1, 120))),
    # several replicas
    "round-robin-3": scenario(
        "rr", workload=poisson(80), engine={**SMALL_REPLICAS, "replicas": 3, "router": "round_robin"}),
    "least-loaded-2": scenario(
        "ll", workload=poisson(80), engine={**SMALL_REPLICAS, "replicas": 2, "router": "least_loaded"}),
    "closed-loop-least-loaded-3": scenario(
        "closed-ll", workload=closed_loop(14, 80, uniform(10, 800), uniform(1, 100)),
        engine={**SMALL_REPLICAS, "max_num_seqs": 6, "replicas": 3, "router": "least_loaded"}),
    # equal step times on a flat table: iterations of different replicas end together, arrivals coincide
    # with ends (closed loop without think time), so the tie rules of sections 4-5 decide
    "flat-table-ties": scenario(
        "ties", hardware=FLAT_TABLE, workload=closed_loop(10, 80, 64, uniform(1, 40)),
        engine={"max_num_seqs": 4, "max_batch_tokens": 512, "replicas": 3, "router": "least_loaded"}),
    "flat-table-ties-round-robin": scenario(
        "ties-rr", hardware=FLAT_TABLE, workload=closed_loop(10, 80, 64, uniform(2, 40)),
        engine={"max_num_seqs": 4, "max_batch_tokens": 512, "replicas": 3, "router": "round_robin"}),
    # chunked prefill and limits that make requests wait
    "long-prompts-chunked": scenario(
        "long", workload=poisson(40, 3.0, prompt=uniform(100, 6000), output=uniform(1, 200))),
    "max-num-seqs-waits": scenario(
        "seats", workload=poisson(80, 20.0, output=uniform(2, 100)),
        engine={"max_num_seqs": 3, "max_batch_tokens": 2048, "kv_cache_tokens": 400_000}),
    "kv-cache-waits": scenario(
        "kv", workload=poisson(80, 25.0, output=uniform(2, 100)),
        engine={"max_num_seqs": 64, "max_batch_tokens": 2048, "prefill_chunk_tokens": 1024,
                "kv_cache_tokens": 4000}),
    "tight-token-budget": scenario(
        "budget", workload=poisson(40, output=uniform(1, 100)),
        engine={"max_num_seqs": 16, "max_batch_tokens": 40, "kv_cache_tokens": 400_000}),
    # single-token outputs and requests whose last rounds are shorter than gamma
    "short-outputs": scenario(
        "short", workload=poisson(120, 20.0, prompt=uniform(1, 300), output=uniform(1, 9))),
}


def _waits_for(refs, enough: int) -> bool:
    steps = refs["no-spec"].steps
    return int((steps.num_waiting > 0).sum()) >= enough


# What each scenario is there for, checked on the reference's runs (by arm label)
CLAIMS = {
    "long-prompts-chunked": lambda refs: (refs["dspark-hw"].steps.prefill_tokens == 512).any(),
    "max-num-seqs-waits": lambda refs: _waits_for(refs, 50) and refs["no-spec"].steps.num_requests.max() == 3,
    "kv-cache-waits": lambda refs: _waits_for(refs, 50) and refs["no-spec"].steps.num_requests.max() < 64,
    "tight-token-budget": lambda refs: refs["dspark-hw"].steps.batch_tokens.max() == 40 and (
        refs["dspark-hw"].steps.verify_tokens < 7 * refs["dspark-hw"].steps.decode_requests).any(),
    "short-outputs": lambda refs: (refs["no-spec"].requests.output_tokens == 1).sum() > 5,
    "flat-table-ties": lambda refs: refs["no-spec"].steps.duplicated(["t_s"]).sum() > 50,
    "flat-table-ties-round-robin": lambda refs: refs["no-spec"].steps.duplicated(["t_s"]).sum() > 50,
    "closed-loop-one-token-outputs": lambda refs: (refs["no-spec"].requests.output_tokens == 1).sum() > 0,
}

REQUEST_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens", "domain", "first_token_s", "finish_s", "steps",
                   "replica")
STEP_COLUMNS = ("t_s", "step_s", "replica", "num_requests", "decode_requests", "batch_tokens", "verify_tokens",
                "accepted_tokens", "emitted_tokens", "prefill_tokens", "kv_tokens")
POSITION_COUNTS = ("verified", "reached", "accepted")


def first_difference(what: str, engine_values, ref_values, at) -> list[str]:
    """``[]`` when the two columns are equal element for element, else one line naming the first difference."""
    a, b = engine_values.to_numpy(), ref_values.to_numpy()
    if np.array_equal(a, b):
        return []
    first = int(np.flatnonzero(a != b)[0])
    return [f"{what} first differs at {at(first)}: engine {a[first]!r}, reference {b[first]!r}"]


def differences(engine, ref, label: str, step_columns=STEP_COLUMNS) -> list[str]:
    """Where the engine's frames (``simlab.run_scenario`` results) and the reference's differ for one arm."""
    found = []
    requests = engine.requests[engine.requests.arm == label].reset_index(drop=True)
    steps = engine.steps[engine.steps.arm == label].reset_index(drop=True)
    if not np.array_equal(requests["id"].to_numpy(), ref.requests["id"].to_numpy()):
        return [f"{label}: request ids differ"]
    for column in REQUEST_COLUMNS:
        found += first_difference(f"{label}: requests.{column}", requests[column], ref.requests[column],
                                  lambda i: f"id {i}")
    if len(steps) != len(ref.steps):
        found.append(f"{label}: {len(steps)} engine steps, {len(ref.steps)} reference steps")
    else:
        for column in step_columns:
            found += first_difference(f"{label}: steps.{column}", steps[column], ref.steps[column],
                                      lambda i: f"row {i} (t_s {ref.steps.t_s[i]!r})")
    metrics = engine.arms[label]
    for name in POSITION_COUNTS:
        counts = metrics.get(f"spec_decode_num_{name}_per_position") or []
        if list(counts) != ref.positions[name].tolist():
            found.append(f"{label}: {name} per position: engine {counts}, reference {ref.positions[name].tolist()}")
    return found


def run_both(data: dict):
    engine = simlab.run_scenario(data, plot=False)
    built = build(as_loaded(data))
    refs = {prepared.arm.label: run_reference(built=built, arm=i) for i, prepared in enumerate(built.arms)}
    return engine, refs


# Where the engine departs from docs/engine.md: a departure found here is kept as a strict xfail with its reason
# until the engine is fixed (three were found and fixed: a one-token request's seat, simultaneous ends across
# replicas, and the order of an arrival and an end at the same time).
ENGINE_DEVIATIONS: dict[str, str] = {}  # none at present (the three found were fixed in the engine)


def scenario_params(names):
    return [
        pytest.param(name, marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason=ENGINE_DEVIATIONS[name]))
        if name in ENGINE_DEVIATIONS
        else name
        for name in sorted(names)
    ]


@pytest.mark.parametrize("name", scenario_params(SCENARIOS))
def test_engine_equals_reference(name):
    engine, refs = run_both(SCENARIOS[name])
    assert CLAIMS.get(name, lambda refs: True)(refs), f"{name} does not reach what it is named after"
    found = [d for label, ref in refs.items() for d in differences(engine, ref, label)]
    assert not found, "\n".join(found)
