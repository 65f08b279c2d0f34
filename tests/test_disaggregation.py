"""Prefill/decode disaggregation (docs/engine.md section 9): the engine against the reference stepper bit for
bit, closed forms (a lone request, a two-request case worked by hand), conservation, and bad input."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import simlab
from helpers import run_cli, write_scenario
from reference import run_reference
from simlab.runner import as_loaded, build
from test_reference_equivalence import (FLAT_TABLE, closed_loop, differences, poisson, scenario, uniform)
from test_reference_features import mooncake

SPLIT = {"prefill_replicas": 1, "decode_replicas": 2, "link_bandwidth_GBps": 25, "link_latency_ms": 0.3}
POWER_OF_TWO_TABLE = {  # sums of these costs are exact: the hand-worked times below are exact binary fractions
    "kind": "table",
    "verify": {"batch_tokens": [1, 8192], "step_s": [2.0**-7, 2.0**-7]},
    "prefill": {"per_token_s": 2.0**-13},
    "kv_cache_tokens": 100_000,
}


def split(**fields) -> dict:
    return {**SPLIT, **fields}


def engine(**fields) -> dict:
    base = {"max_num_seqs": 24, "max_batch_tokens": 2048, "prefill_chunk_tokens": 512, "kv_cache_tokens": 400_000}
    return {**base, **fields}


SCENARIOS = {
    # the prefill pool's own token budget: 1,536 prompt tokens per iteration (the decode replicas keep the engine's
    # 512; prefill_chunk_tokens defaults to the pool's budget)
    "one-prefill-two-decode": scenario("d-basic", engine=engine(disaggregation=split(prefill_max_batch_tokens=1536,
                                                                                      prefill_chunk_tokens=1536))),
    # two prefill replicas, a decode replica whose KV makes hand-offs wait, and prefill replicas that wait for
    # landings to free their KV
    "kv-waits-both-pools": scenario(
        "d-kv", workload=poisson(80, 25.0, output=uniform(2, 100)),
        engine=engine(max_num_seqs=64, prefill_chunk_tokens=1024, kv_cache_tokens=4000,
                      disaggregation=split(prefill_replicas=2, decode_replicas=1, prefill_kv_cache_tokens=3500))),
    "closed-loop-least-loaded": scenario(
        "d-closed", workload=closed_loop(16, 100, uniform(10, 600), uniform(1, 120)),
        engine=engine(max_num_seqs=6, disaggregation=split(decode_router="least_loaded",
                                                           prefill_router="least_loaded"))),
    "closed-loop-think-slow-link": scenario(
        "d-think", workload=closed_loop(6, 50, 1500, uniform(1, 150), think_time_s=0.3),
        engine=engine(disaggregation=split(prefill_replicas=2, decode_replicas=1, link_bandwidth_GBps=0.5,
                                           link_latency_ms=20))),
    # equal times everywhere: a power-of-two table, a zero-latency link whose transfers are exact binary
    # fractions, iterations of different replicas and pools that end together
    "flat-table-ties": scenario(
        "d-flat", hardware=FLAT_TABLE, workload=closed_loop(10, 80, 64, uniform(1, 40)),
        engine={"max_num_seqs": 4, "max_batch_tokens": 512, "router": "least_loaded",
                "disaggregation": split(kv_bytes_per_token=2.0**20, draft_kv_bytes_per_token=2.0**18,
                                        link_bandwidth_GBps=2.0**30 / 1e9, link_latency_ms=0)}),
    # the decode replicas build the drafter's KV over each landed prompt (vLLM's MTP over P/D)
    "draft-kv-recompute": scenario(
        "d-recompute", workload=poisson(80, 12.0, prompt=uniform(20, 1500)),
        acceptance={"kind": "preset", "name": "qwen3-8b"},
        engine=engine(disaggregation=split(draft_kv="recompute")),
        arms=[{"name": "mtp", "method": "mtp", "gamma": 2, "scheduler": {"kind": "goodput", "lag_steps": 0}},
              {"name": "eagle3", "method": "eagle3", "gamma": 5, "scheduler": {"kind": "hardware_aware"}},
              {"name": "dspark", "method": "dspark", "gamma": 7, "scheduler": {"kind": "fixed"}},
              {"name": "no-spec", "method": "none"}]),
    "paged-preempting-decode": scenario(
        "d-paged", workload=poisson(80, 25.0, prompt=uniform(100, 1500), output=uniform(100, 400)),
        engine=engine(max_num_seqs=64, kv_cache_tokens=6000, kv_policy="paged",
                      disaggregation=split(decode_replicas=1, decode_kv_cache_tokens=3500))),
    "prefix-aware-prefill-pool": mooncake("d-prefix", 60, prefix_caching=True,
                                          disaggregation=split(prefill_replicas=3, prefill_router="prefix_aware")),
}


def compare(data: dict):
    """Engine and reference agree on every arm (requests, steps, positions, preemptions); returns both runs."""
    result = simlab.run_scenario(data, plot=False)
    built = build(as_loaded(data))
    found, refs = [], {}
    for i, prepared in enumerate(built.arms):
        label = prepared.arm.label
        refs[label] = ref = run_reference(built=built, arm=i)
        found += differences(result, ref, label)
        if result.arms[label].get("num_preemptions", 0) != ref.num_preemptions:
            found.append(f"{label}: num_preemptions {result.arms[label].get('num_preemptions')} vs "
                         f"{ref.num_preemptions}")
    assert not found, "\n".join(found)
    return result, refs


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_disaggregated_engine_equals_reference(name):
    data = SCENARIOS[name]
    result, refs = compare(data)
    steps = result.steps
    split_ = data["engine"]["disaggregation"]
    num_prefill = split_["prefill_replicas"]
    prefill_rows = steps[steps.replica < num_prefill]
    decode_rows = steps[steps.replica >= num_prefill]
    # the pools do what they are for: prefill replicas only prefill, decode replicas decode
    assert (prefill_rows.decode_requests == 0).all() and (prefill_rows.emitted_tokens == 0).all()
    assert (decode_rows.prefill_tokens > 0).any() and (decode_rows.decode_requests > 0).any()
    requests = result.requests
    assert (requests.replica >= num_prefill).all(), "a request's replica is the decode replica that served it"
    # what each scenario is there for
    no_spec = next(label for label in refs if "no-spec" in label)
    if name == "one-prefill-two-decode":
        assert prefill_rows.prefill_tokens.max() == 1536 and decode_rows.prefill_tokens.max() <= 512
    if name == "paged-preempting-decode":
        assert refs[no_spec].num_preemptions > 0
    if name == "kv-waits-both-pools":
        kv = prefill_rows.groupby("replica").kv_tokens.max()
        assert (kv > 3000).all(), "prefill replicas hold KV for requests in transfer up to their capacity"
    if name == "flat-table-ties":
        assert steps.duplicated(["t_s"]).sum() > 50
    if name == "prefix-aware-prefill-pool":
        assert refs[no_spec].prefix_cache_hit_rate > 0.01


# ------------------------------------------------------------------------------------------------ closed forms
def lone_request(tmp_path, prompt: int, output: int, gamma_arm: dict, split_: dict, hardware) -> dict:
    trace = tmp_path / "one.csv"
    trace.write_text(f"arrival,prompt_tokens,output_tokens\n0.25,{prompt},{output}\n", encoding="utf-8")
    return {"name": "lone", "seed": 3, "workload": {"kind": "trace", "path": str(trace)}, "hardware": hardware,
            "engine": {"max_num_seqs": 8, "max_batch_tokens": 4096, "kv_policy": "reserve",  # KV held in tokens
                       "disaggregation": split_},
            "acceptance": {"kind": "preset", "name": "qwen3-8b"},
            "arms": [{"name": "no-spec", "method": "none"}, gamma_arm]}


@pytest.mark.parametrize("draft_kv", ["transfer", "recompute"])
@pytest.mark.parametrize("hardware", [{"kind": "roofline", "gpu": "h100-sxm", "model": "qwen3-8b"},
                                      {"kind": "roofline", "gpu": "h200", "model": "llama-3-70b",
                                       "tensor_parallel": 4, "kv_precision": "fp8"}])
def test_lone_request_ttft_is_prefill_plus_transfer_plus_first_decode_step(tmp_path, hardware, draft_kv):
    prompt, output = 3000, 30
    split_ = {"prefill_replicas": 1, "decode_replicas": 1, "link_bandwidth_GBps": 12.5, "link_latency_ms": 2.0,
              "draft_kv": draft_kv}
    dspark = {"name": "dspark", "method": "dspark", "gamma": 7, "scheduler": {"kind": "fixed"}}
    data = lone_request(tmp_path, prompt, output, dspark, split_, hardware)
    cost = build(as_loaded(data)).cost
    # every layer's K and V, every KV head, at the KV precision; the drafter's 5 layers of the same shape
    per_layer = {"qwen3-8b": 8 * 128 * 2 * 2, "llama-3-70b": 8 * 128 * 2 * 1}[hardware["model"]]
    num_layers = {"qwen3-8b": 36, "llama-3-70b": 80}[hardware["model"]]
    assert cost.kv_transfer_bytes_per_token() == num_layers * per_layer
    assert cost.draft_kv_bytes_per_token("dspark") == 5 * per_layer
    result = simlab.run_scenario(data, plot=False)
    prefill = cost.step_s(0, 0.0, 0, prompt, prompt * prompt / 2.0)
    first_step = cost.step_s(0, 0.0, 0, 1, 1 * (prompt - 1 + 0.5))
    target_link = (prompt - 1) * num_layers * per_layer / 12.5e9 + 2e-3
    expected = {"no-spec": prefill + target_link + first_step}
    if draft_kv == "transfer":  # the drafter's KV rides along
        expected["dspark"] = prefill + (prompt - 1) * (num_layers + 5) * per_layer / 12.5e9 + 2e-3 + first_step
    else:  # the decode replica builds it over the prompt in the first token's iteration
        rebuild = cost.draft_prefill_s("dspark", prompt)
        assert rebuild > 0
        expected["dspark"] = prefill + target_link + first_step + rebuild
    for label in ("no-spec", "dspark"):
        request = result.requests[result.requests.arm == label].iloc[0]
        assert request.first_token_s - request.arrival_s == pytest.approx(expected[label], rel=1e-12)
        steps = result.steps[result.steps.arm == label]
        assert steps[steps.replica == 0].kv_tokens.tolist() == [prompt]  # the prefill replica holds the prompt
        assert (steps[steps.replica == 1].kv_tokens == prompt + output).all()  # the decode one reserves it all
    no_spec = result.requests[result.requests.arm == "no-spec"].iloc[0]
    decode = sum(cost.verify_s(1, float(prompt + 1 + k), 1) for k in range(output - 1))  # no prefill in them
    assert no_spec.finish_s - no_spec.first_token_s == pytest.approx(decode, rel=1e-12)
    assert result.arms["no-spec"]["num_gpus"] == 2 * hardware.get("tensor_parallel", 1)


def two_requests(tmp_path, disaggregated: bool) -> dict:
    """A arrives at 0 (prompt 512, output 40), B at 0.1 s (prompt 2048, output 40), on the power-of-two table."""
    trace = tmp_path / "two.csv"
    trace.write_text("arrival,prompt_tokens,output_tokens\n0,512,40\n0.1,2048,40\n", encoding="utf-8")
    engine_ = {"max_num_seqs": 8, "max_batch_tokens": 4096, "kv_cache_tokens": 100_000}
    if disaggregated:  # an (almost) infinitely fast link
        engine_["disaggregation"] = {"prefill_replicas": 1, "decode_replicas": 1, "link_bandwidth_GBps": 1e6,
                                     "link_latency_ms": 0, "kv_bytes_per_token": 1.0}
    return {"name": "two", "workload": {"kind": "trace", "path": str(trace)}, "hardware": POWER_OF_TWO_TABLE,
            "engine": engine_, "acceptance": {"kind": "preset", "name": "qwen3-8b"},
            "arms": [{"name": "no-spec", "method": "none"}]}


def test_two_requests_worked_by_hand(tmp_path):
    """Verify steps cost v = 2^-7 s, prefill 2^-13 s per token; the link costs 1e-15 s per token.

    Co-located: A's prefill ends at 512/8192 = 1/16 s (A's first token); A decodes one token per v. B arrives at
    0.1 s, during A's step that ends at 1/16 + 5v = 0.1015625; the next iteration is mixed: A's decode and B's
    whole prompt, v + 2048/8192 s: it ends at 1/16 + 6v + 1/4 (B's first token, and A's 7th). A's 39 decode
    steps then end at 1/16 + 39v + 1/4 s: B's prefill slowed A by 1/4 s.

    Disaggregated: the prefill replica prefills A by 1/16 s; the idle decode replica admits A then, its KV lands
    ~511e-15 s later and the decode replica computes A's last prompt token (2^-13 s): A's first token, at
    a = 1/16 + 2^-13 (+ the link). A then decodes one token per v. B prefills on the prefill replica from 0.1 s to
    0.35 s and joins the decode replica's queue; the decode replica admits it at its next iteration start,
    a + k·v with k = ceil((0.35 - a) / v) = 37, B's KV lands 2047e-15 s later, during that iteration, and B joins
    the next one (from a + 38v), where its last prompt token adds 2^-13 s to A's 39th and last step: B's first
    token at a + 39v + 2^-13, A's finish at 1/16 + 2 x 2^-13 + 39v. No 1/4 s of interference on A, at the cost of
    one 2^-13 s step in A's TTFT; B waits up to two decode iterations for its admission and its landing.
    """
    v, token = 2.0**-7, 2.0**-13
    link = 511 * 1e-15
    colo = simlab.run_scenario(two_requests(tmp_path, False), plot=False).requests.set_index("id")
    assert colo.first_token_s[0] == 1 / 16
    assert colo.first_token_s[1] == 1 / 16 + 6 * v + 1 / 4
    assert colo.finish_s[0] == 1 / 16 + 39 * v + 1 / 4
    split = simlab.run_scenario(two_requests(tmp_path, True), plot=False).requests.set_index("id")
    a_first = 1 / 16 + link + token
    assert split.first_token_s[0] == pytest.approx(a_first, abs=1e-12)
    k = int(np.ceil((0.35 - a_first) / v))  # B's admission: the first decode iteration starting after 0.35 s
    assert k == 37
    assert split.first_token_s[1] == pytest.approx(a_first + (k + 2) * v + token, abs=1e-12)
    assert split.finish_s[0] == pytest.approx(1 / 16 + 2 * token + 39 * v, abs=1e-12)
    assert split.finish_s[0] < colo.finish_s[0] - 0.24


# ------------------------------------------------------------------------------------------------ conservation
def test_every_request_completes_and_no_kv_is_left(tmp_path):
    """Run the arm's simulation itself: every request finished, every pool's KV is free at the end, no link has
    a transfer pending, and every request's KV was counted on exactly one decode replica."""
    from simlab.engine.simulate import ArmSimulation

    data = SCENARIOS["kv-waits-both-pools"]
    built = build(as_loaded(data))
    sc = built.loaded.scenario
    for prepared in built.arms:
        sim = ArmSimulation(built.workload, built.cost, sc.engine, prepared.policy, built.kv_capacity,
                            pools=built.pools)
        sim.env.run()
        assert sim.num_finished == sim.num_requests
        for replica in sim.replicas + sim.decode_replicas:
            assert replica.kv.used == 0 and replica.num_running == 0 and not replica.waiting
        assert all(len(r.intake) == 0 for r in sim.decode_replicas)
        assert not sim.replicas[0].ctx.requests.remote.any()
        served = np.bincount(sim.log.replica, minlength=3)
        assert served[:2].sum() == 0 and served[2] == sim.num_requests


def test_per_pool_kv_in_use_never_exceeds_its_capacity():
    result = simlab.run_scenario(SCENARIOS["kv-waits-both-pools"], plot=False)
    steps = result.steps
    assert steps[steps.replica < 2].kv_tokens.max() <= 3500
    assert steps[steps.replica == 2].kv_tokens.max() <= 4000
    for label, metrics in result.arms.items():  # usage is each row's KV over its own pool's capacity
        mine = steps[steps.arm == label]
        usage = mine.kv_tokens / np.where(mine.replica < 2, 3500, 4000)
        assert metrics["max_kv_usage"] == pytest.approx(usage.max(), rel=1e-12) and metrics["max_kv_usage"] <= 1
        assert metrics["mean_kv_usage"] == pytest.approx(np.average(usage, weights=mine.step_s), rel=1e-12)


def test_num_gpus_counts_both_pools():
    data = copy.deepcopy(SCENARIOS["one-prefill-two-decode"])
    data["hardware"] = {"kind": "roofline", "gpu": "h100-sxm", "model": "qwen3-8b", "tensor_parallel": 2}
    data["workload"] = poisson(20)
    result = simlab.run_scenario(data, plot=False)
    assert {m["num_gpus"] for m in result.arms.values()} == {6}


# ------------------------------------------------------------------------------------------------ bad input
BAD = {
    "no prefill replicas": ({"prefill_replicas": 0}, "engine.disaggregation.prefill_replicas"),
    "no decode replicas": ({"decode_replicas": 0}, "engine.disaggregation.decode_replicas"),
    "a link of no bandwidth": ({"link_bandwidth_GBps": 0}, "engine.disaggregation.link_bandwidth_GBps"),
    "a negative latency": ({"link_latency_ms": -1}, "engine.disaggregation.link_latency_ms"),
    "a request too big for a decode replica": ({"decode_kv_cache_tokens": 1000},
                                               "engine.disaggregation.decode_kv_cache_tokens"),
    "a prompt too big for a prefill replica": ({"prefill_kv_cache_tokens": 600},
                                               "engine.disaggregation.prefill_kv_cache_tokens"),
    "a prefix-aware decode router": ({"decode_router": "prefix_aware"}, "engine.disaggregation.decode_router"),
    "an unknown field": ({"prefill_gpus": 2}, "engine.disaggregation.prefill_gpus"),
}


def bad_scenario(**split_fields) -> dict:
    data = scenario("bad", workload=poisson(10, prompt={"dist": "constant", "value": 800},
                                            output={"dist": "constant", "value": 300}))
    data["engine"] = engine(disaggregation={**SPLIT, **split_fields})
    return data


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_disaggregation_is_exit_2_naming_the_field(tmp_path, case):
    fields, field = BAD[case]
    path = write_scenario(tmp_path, bad_scenario(**fields))
    out = tmp_path / "out"
    code, stdout, stderr = run_cli("run", str(path), "--out", str(out))
    assert code == 2, stdout + stderr
    assert field in stderr and "Traceback" not in stderr
    assert len(stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_disaggregation_with_fields_it_cannot_honour(tmp_path):
    data = bad_scenario()
    data["engine"]["replicas"] = 2  # the pools' sizes say how many replicas
    code, _, stderr = run_cli("run", str(write_scenario(tmp_path, data)))
    assert code == 2 and "engine.replicas" in stderr
    data = bad_scenario()
    data["hardware"] = FLAT_TABLE  # a table that names no model: the link's bytes are unknown
    code, _, stderr = run_cli("run", str(write_scenario(tmp_path, data)))
    assert code == 2 and "engine.disaggregation.kv_bytes_per_token" in stderr
    data["engine"]["disaggregation"]["kv_bytes_per_token"] = 147456
    code, _, stderr = run_cli("run", str(write_scenario(tmp_path, data)))
    assert code == 2 and "engine.disaggregation.draft_kv" in stderr  # nor the drafter's, to transfer
    for fields in ({"draft_kv_bytes_per_token": 4096}, {"draft_kv": "recompute"}):  # its draft curves price it
        data["engine"]["disaggregation"].update(fields)
        code, _, stderr = run_cli("run", str(write_scenario(tmp_path, data)), "--out", str(tmp_path / "ok"))
        assert code == 0, stderr


def test_a_shipped_profile_knows_its_kv_bytes():
    """A profile derived from a roofline names its model and KV precision: the link's bytes come from them."""
    data = scenario("profile", hardware="h100-sxm_qwen3-8b")
    cost = build(as_loaded(data)).cost
    assert cost.kv_transfer_bytes_per_token() == 36 * 8 * 128 * 2 * 2


def test_real_mode_refuses_a_disaggregated_scenario():
    from simlab.common.errors import InputError
    from simlab.config.loading import scenario_from_data
    from simlab.real.validate.run import check_scenario

    data = bad_scenario()
    data["arms"] = [{"name": "no-spec", "method": "none"}]
    with pytest.raises(InputError) as err:
        check_scenario(scenario_from_data(data, file="real.yaml"), "dspark")
    assert err.value.field == "engine.disaggregation"
