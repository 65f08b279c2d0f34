"""The reference stepper (tests/reference/) on cases worked by hand from docs/engine.md.

Costs are powers of two (a decode step costs U = 2^-7 s, a prefill token P = 2^-10 s), so every time below is an
exact binary fraction and is compared with ``==``. Where the engine departs from the doc on one of these cases,
the engine's run is compared too, marked xfail with the reason.
"""

from __future__ import annotations

import json

import pytest

import simlab
from reference import run_reference
from simlab.runner import as_loaded, build
from test_reference_equivalence import ONE_TOKEN_SEAT, differences

U = 2.0**-7  # one decode (verify) step, whatever its batch
P = 2.0**-10  # one prefill token
FLAT = {"kind": "table", "verify": {"batch_tokens": [1, 8192], "step_s": [U, U]},
        "prefill": {"per_token_s": P}, "kv_cache_tokens": 1_000_000}
NO_SPEC = [{"name": "no-spec", "method": "none"}]


def hand(tmp_path, rows, *, engine=None, arms=NO_SPEC, acceptance=None, workload=None) -> dict:
    """A scenario replaying ``rows`` = [(arrival_s, prompt, output), ...] on the flat table."""
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival,prompt,output\n" + "".join(f"{a!r},{p},{o}\n" for a, p, o in rows))
    return {
        "name": "hand", "seed": 3,
        "workload": workload or {"kind": "trace", "path": str(trace), "format": "csv",
                                 "columns": {"arrival": "arrival", "prompt_tokens": "prompt",
                                             "output_tokens": "output"}},
        "hardware": FLAT,
        "engine": {"max_num_seqs": 8, "max_batch_tokens": 1024, "kv_cache_tokens": 100_000, **(engine or {})},
        "acceptance": acceptance or {"kind": "iid", "alpha": 0.7},
        "arms": arms,
    }


def column(frame, name) -> list:
    return frame[name].tolist()


def engine_agrees(data) -> None:
    engine = simlab.run_scenario(data, plot=False)
    for i, arm in enumerate(data["arms"]):
        found = differences(engine, run_reference(data, arm=i), arm["name"])
        assert not found, "\n".join(found)


# ----------------------------------------------------------------------------------------- sections 2-3
def test_one_request_prefills_then_decodes(tmp_path):
    ref = run_reference(hand(tmp_path, [(0.0, 10, 4)]), arm=0)
    # section 3: the prefill step emits the first token; three decode steps emit the other three
    assert column(ref.steps, "t_s") == [0.0, 10 * P, 10 * P + U, 10 * P + 2 * U]
    assert column(ref.steps, "batch_tokens") == [10, 1, 1, 1]
    assert column(ref.steps, "prefill_tokens") == [10, 0, 0, 0]
    assert column(ref.steps, "decode_requests") == [0, 1, 1, 1]
    assert column(ref.requests, "first_token_s") == [10 * P]
    assert column(ref.requests, "finish_s") == [10 * P + 3 * U]
    assert column(ref.requests, "steps") == [3]


def test_chunked_prefill_and_the_budget_left_by_decode_tokens(tmp_path):
    data = hand(tmp_path, [(0.0, 100, 3), (0.0, 20, 2)], engine={"prefill_chunk_tokens": 32, "max_batch_tokens": 40})
    ref = run_reference(data, arm=0)
    # iteration 1: 32 tokens of request 0 (request 1 gets none); 2, 3: 32 more; 4: the last 4 of request 0, then
    # 20 of request 1 fit in the remaining 28; 5: request 0 decodes (1 token) and nothing is left to prefill
    assert column(ref.steps, "prefill_tokens") == [32, 32, 32, 24, 0, 0]
    assert column(ref.steps, "num_requests") == [1, 1, 1, 2, 2, 1]  # section 8: prefills given a chunk
    assert column(ref.steps, "decode_requests") == [0, 0, 0, 0, 2, 1]
    assert column(ref.requests, "first_token_s") == [120 * P] * 2
    assert column(ref.requests, "finish_s") == [120 * P + 2 * U, 120 * P + U]


def test_chunk_budget_after_decode_tokens(tmp_path):
    # max_batch_tokens 10: a decoding request takes 1, so its neighbour's prompt gets chunks of 9
    data = hand(tmp_path, [(0.0, 4, 5), (0.001, 30, 1)], engine={"max_batch_tokens": 10})
    ref = run_reference(data, arm=0)
    assert column(ref.steps, "prefill_tokens")[:5] == [4, 9, 9, 9, 3]
    assert column(ref.steps, "batch_tokens")[:5] == [4, 10, 10, 10, 4]


def test_a_request_finishing_at_its_prefill_frees_its_seat_for_the_next_iteration(tmp_path):
    data = hand(tmp_path, [(0.0, 10, 5), (0.0, 10, 1), (0.0, 10, 2)], engine={"max_num_seqs": 2})
    ref = run_reference(data, arm=0)
    t1 = 20 * P  # requests 0 and 1 prefill; request 1's only token finishes it
    t2 = t1 + (U + 10 * P)  # request 2 takes the seat: its prefill shares a step with request 0's decode
    t3 = t2 + U  # request 2 (output 2) finishes
    assert column(ref.requests, "first_token_s") == [t1, t1, t2]
    assert column(ref.requests, "finish_s") == [t3 + U + U, t1, t3]


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=ONE_TOKEN_SEAT)
def test_engine_frees_the_seat_of_a_request_finishing_at_its_prefill(tmp_path):
    engine_agrees(hand(tmp_path, [(0.0, 10, 5), (0.0, 10, 1), (0.0, 10, 2)], engine={"max_num_seqs": 2}))


def test_reserve_kv_blocks_the_queue_first_come_first_served(tmp_path):
    # 100 KV tokens: request 0 reserves 60; request 1 (60) must wait for it even though request 2 (30) would fit
    data = hand(tmp_path, [(0.0, 50, 10), (0.0, 50, 10), (0.0, 20, 10)], engine={"kv_cache_tokens": 100})
    ref = run_reference(data, arm=0)
    finish0 = column(ref.requests, "finish_s")[0]
    assert finish0 == 50 * P + 9 * U
    assert column(ref.requests, "first_token_s")[1:] == [finish0 + 70 * P] * 2  # both admitted at finish0
    assert column(ref.steps, "kv_tokens")[:2] == [60, 60]
    assert column(ref.steps, "kv_tokens")[10] == 90


# ----------------------------------------------------------------------------------------- speculation
def test_every_draft_accepted_verifies_gamma_until_the_end(tmp_path):
    # alpha = 1: each round emits gamma + 1 tokens, and the last rounds verify only what the request still needs
    data = hand(tmp_path, [(0.0, 8, 20)], acceptance={"kind": "iid", "alpha": 1.0},
                arms=[{"name": "fixed", "method": "dflash", "gamma": 3, "calibration": "none",
                       "scheduler": {"kind": "fixed"}}])
    ref = run_reference(data, arm=0)
    # after the first token 19 remain: rounds emit 4, 4, 4, 4 and then 3 (max_len = min(3, 3 - 1) = 2)
    assert column(ref.steps, "verify_tokens") == [0, 3, 3, 3, 3, 2]
    assert column(ref.steps, "emitted_tokens") == [0, 4, 4, 4, 4, 3]
    assert column(ref.requests, "steps") == [5]
    assert ref.positions["verified"].tolist() == [5, 5, 4]
    assert ref.positions["reached"].tolist() == [5, 5, 4]
    assert ref.positions["accepted"].tolist() == [5, 5, 4]
    engine_agrees(data)


# ----------------------------------------------------------------------------------------- sections 4-5
def test_closed_loop_think_time(tmp_path):
    workload = {"kind": "closed_loop", "concurrency": 1, "num_requests": 3, "prompt_tokens": 8,
                "output_tokens": 2, "think_time_s": 0.5}
    ref = run_reference(hand(tmp_path, [], workload=workload), arm=0)
    # each request: a prefill step and one decode step, added to the clock one at a time (section 2)
    arrival = [0.0]
    finish = []
    for _ in range(3):
        finish.append(arrival[-1] + 8 * P + U)
        arrival.append(finish[-1] + 0.5)
    assert column(ref.requests, "arrival_s") == arrival[:3]
    assert column(ref.requests, "finish_s") == finish


def test_round_robin_routes_the_i_th_arrival_to_replica_i_mod_n(tmp_path):
    data = hand(tmp_path, [(0.0, 8, 3)] * 5, engine={"replicas": 2, "router": "round_robin"})
    ref = run_reference(data, arm=0)
    assert column(ref.requests, "replica") == [0, 1, 0, 1, 0]


def _least_loaded_case(tmp_path) -> dict:
    # replica 0 runs requests 0 (output 2) and 2, replica 1 runs request 1; request 3 arrives at 0.022 while
    # replica 0's second iteration (0.0195 .. 0.0273) runs, at whose end request 0 finishes
    return hand(tmp_path, [(0.0, 10, 2), (0.0, 10, 10), (0.0, 10, 10), (0.022, 10, 3)],
                engine={"replicas": 2, "router": "least_loaded"})


def test_least_loaded_counts_requests_until_their_iteration_ends(tmp_path):
    data = _least_loaded_case(tmp_path)
    ref = run_reference(data, arm=0)
    assert column(ref.requests, "replica") == [0, 1, 0, 1]  # at 0.022 replica 0 still runs 2 requests
    engine_agrees(data)


def _arrival_at_a_finish(tmp_path) -> dict:
    # replica 0 prefills requests 0 and 2 (16 tokens, 2U) and decodes them; request 0 finishes at 3U, exactly when
    # request 3 arrives. Replica 1 runs request 1 (its iterations end at U, 2U, 3U, ...)
    return hand(tmp_path, [(0.0, 8, 2), (0.0, 8, 10), (0.0, 8, 10), (3 * U, 8, 3)],
                engine={"replicas": 2, "router": "least_loaded"})


ROUTE_AT_AN_END = (
    "docs/engine.md is silent on whether an arrival at t is routed before or after the outcomes of iterations "
    "ending at t (section 4 only says the iteration starting at t sees it). The reference applies the ends first "
    "(request 0 has finished: loads 1 and 1, replica 0); the engine routes first (loads 2 and 1, replica 1)")


def test_an_arrival_at_a_finish_is_routed_after_it(tmp_path):
    ref = run_reference(_arrival_at_a_finish(tmp_path), arm=0)
    assert column(ref.requests, "replica") == [0, 1, 0, 0]


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=ROUTE_AT_AN_END)
def test_engine_routes_an_arrival_at_a_finish_after_it(tmp_path):
    engine_agrees(_arrival_at_a_finish(tmp_path))


def test_an_arrival_at_an_iteration_end_is_seen_by_the_next_iteration(tmp_path):
    # request 1 arrives exactly when request 0's prefill step ends: the next iteration prefills it (section 4)
    data = hand(tmp_path, [(0.0, 8, 3), (8 * P, 8, 2)])
    ref = run_reference(data, arm=0)
    assert column(ref.steps, "prefill_tokens")[:2] == [8, 8]
    assert column(ref.requests, "first_token_s") == [8 * P, 8 * P + (U + 8 * P)]
    engine_agrees(data)


def test_closed_loop_request_sent_at_t_is_seen_by_other_replicas_starting_at_t(tmp_path):
    # 3 users, 2 replicas, round robin: replica 0 holds requests 0 and 2 (16 prompt tokens, 2U), replica 1 holds
    # request 1 (U). All iteration ends fall on multiples of U; requests 0 and 2 finish at 4U and send requests 4
    # and 5; request 5 goes to replica 1, whose iteration also ends at 4U, and is prefilled from 4U
    workload = {"kind": "closed_loop", "concurrency": 3, "num_requests": 6, "prompt_tokens": 8,
                "output_tokens": 3}
    data = hand(tmp_path, [], workload=workload, engine={"replicas": 2, "router": "round_robin"})
    ref = run_reference(data, arm=0)
    assert column(ref.requests, "arrival_s") == [0.0, 0.0, 0.0, 3 * U, 4 * U, 4 * U]
    assert column(ref.requests, "replica") == [0, 1, 0, 1, 0, 1]
    assert column(ref.requests, "first_token_s") == [2 * U, U, 2 * U, 4 * U, 5 * U, 6 * U]
    engine_agrees(data)


# ----------------------------------------------------------------------------------------- 6.2 paged KV
PAGED = {"kv_policy": "paged", "block_size": 16}


@pytest.mark.parametrize("k", [1, 3])
def test_an_overload_preempts_exactly_k_times(tmp_path, k):
    # 2k requests (16 prompt + 16 output tokens: at most 31 held, 2 blocks each) in 2k blocks of 16. All are
    # admitted with one block; after the prefill each needs a second: the first k take theirs by preempting the
    # newest k, which wait (2 blocks each, none free) until the first k finish, and then fit exactly: k preemptions
    data = hand(tmp_path, [(0.0, 16, 16)] * (2 * k), engine={"kv_cache_tokens": 2 * k * 16, **PAGED})
    ref = run_reference(data, arm=0)
    assert ref.num_preemptions == k
    t1 = 2 * k * 16 * P
    first_wave = t1
    for _ in range(15):
        first_wave += U
    second_first = first_wave + 17 * k * P  # the preempted k recompute 16 + 1 tokens, which emits one token
    second_wave = second_first
    for _ in range(14):
        second_wave += U
    assert column(ref.requests, "first_token_s") == [t1] * (2 * k)  # a recompute keeps the first token's time
    assert column(ref.requests, "finish_s") == [first_wave] * k + [second_wave] * k
    assert column(ref.requests, "steps") == [15] * k + [14] * k  # 1 + 15 and 1 + 1 (recompute) + 14 tokens
    assert column(ref.steps, "prefill_tokens") == [32 * k] + [0] * 15 + [17 * k] + [0] * 14
    assert column(ref.steps, "kv_tokens") == [32 * k] * 31  # every block in use from the start
    engine_agrees(data)


def test_a_prefilling_request_is_preempted_and_starts_its_prompt_again(tmp_path):
    # 3 blocks of 16. Request 0 (15 + 30 tokens) decodes; request 1 (32-token prompt, 2 blocks) prefills in chunks of
    # 16 beside it. When request 0 reaches 17 tokens it needs a second block: request 1, the newest, is preempted
    # halfway through its prompt and waits until request 0 has finished
    data = hand(tmp_path, [(0.0, 15, 30), (0.001, 32, 2)],
                engine={"kv_cache_tokens": 48, "prefill_chunk_tokens": 16, **PAGED})
    ref = run_reference(data, arm=0)
    assert ref.num_preemptions == 1
    t1 = 15 * P
    t2 = t1 + (U + 16 * P)  # request 1's first chunk
    finish0 = t2
    for _ in range(28):
        finish0 += U
    first1 = finish0 + 16 * P + 16 * P  # its whole prompt again, in two chunks
    assert column(ref.requests, "first_token_s") == [t1, first1]
    assert column(ref.requests, "finish_s") == [finish0, first1 + U]
    assert column(ref.steps, "prefill_tokens") == [15, 16] + [0] * 28 + [16, 16, 0]
    # blocks: 1; 1 + 2; 2 (request 1 released its 2); ... 3 once request 0 reaches 33 tokens (16 steps later)
    assert column(ref.steps, "kv_tokens")[:4] == [16, 48, 32, 32]
    assert column(ref.steps, "kv_tokens")[17:19] == [32, 48]
    engine_agrees(data)


def test_paged_growth_counts_the_lookahead_slots(tmp_path):
    # alpha = 1, gamma 3: context + max_len grows 20, 24, 28, 32, 35 tokens -> 2, 2, 2, 2, 3 blocks of 16
    data = hand(tmp_path, [(0.0, 16, 20)], acceptance={"kind": "iid", "alpha": 1.0},
                arms=[{"name": "fixed", "method": "dflash", "gamma": 3, "calibration": "none",
                       "scheduler": {"kind": "fixed"}}])
    reserve = run_reference(data, arm=0)
    assert column(reserve.steps, "kv_tokens") == [36] * 6
    data["engine"].update(PAGED)
    paged = run_reference(data, arm=0)
    assert column(paged.steps, "kv_tokens") == [16, 32, 32, 32, 32, 48]
    engine_agrees(data)


def test_paged_with_enough_kv_equals_reserve():
    from test_reference_equivalence import SCENARIOS, poisson

    built = build(as_loaded({**SCENARIOS["round-robin-3"], "workload": poisson(40, 20.0)}))
    for arm in range(len(built.arms)):
        reserve = run_reference(built=built, arm=arm)
        paged = run_reference(built=built, arm=arm, kv_policy="paged", block_size=16)
        assert paged.num_preemptions == 0
        assert reserve.requests.equals(paged.requests)
        assert reserve.steps.drop(columns="kv_tokens").equals(paged.steps.drop(columns="kv_tokens"))
        assert (paged.steps.kv_tokens % 16 == 0).all()


def test_paged_overload_preempts_and_finishes_every_request():
    from test_reference_equivalence import SCENARIOS

    data = dict(SCENARIOS["kv-cache-waits"])
    data["engine"] = {**data["engine"], "kv_cache_tokens": 3200}
    built = build(as_loaded(data))
    for arm in range(len(built.arms)):
        ref = run_reference(built=built, arm=arm, kv_policy="paged", block_size=16)
        assert ref.num_preemptions > 0
        assert (ref.steps.kv_tokens <= 3200).all()
        assert (ref.requests.finish_s >= ref.requests.first_token_s).all()
        # every decode step of a request emitted at least one token, and the prefill steps the others
        assert (ref.requests.steps <= ref.requests.output_tokens - 1).all()


# ----------------------------------------------------------------------------------------- 7 prefix caching
@pytest.mark.parametrize("kv_policy", ["reserve", "paged"])
def test_requests_sharing_a_prefix_hit_for_all_but_the_first(tmp_path, kv_policy):
    # two seconds apart, each after the last finished: a shared 512-token block, then one of their own
    rows = [(2000 * i, 1024, 3, [7, 100 + i]) for i in range(4)]
    data = mooncake_hand(tmp_path, rows, kv_policy=kv_policy)
    ref = run_reference(data, arm=0)
    assert column(ref.requests, "cached_tokens") == [0, 512, 512, 512]
    assert ref.prefix_cache_hit_rate == 3 * 512 / (4 * 1024)
    assert column(ref.steps, "prefill_tokens")[::3] == [1024, 512, 512, 512]
    waits = (ref.requests.first_token_s - ref.requests.arrival_s).tolist()
    assert waits == [1024 * P] + [2.0 * i + 512 * P - 2.0 * i for i in (1, 2, 3)]
    engine_agrees(data)


def test_requests_admitted_before_the_prefix_is_cached_miss(tmp_path):
    data = mooncake_hand(tmp_path, [(0, 1024, 3, [7, 100 + i]) for i in range(3)])
    ref = run_reference(data, arm=0)
    assert column(ref.requests, "cached_tokens") == [0, 0, 0]  # all admitted together, before any insert
    engine_agrees(data)


@pytest.mark.parametrize("kv_policy", ["reserve", "paged"])
def test_cached_prefix_blocks_count_against_the_kv_and_go_least_recent_first(tmp_path, kv_policy):
    # (prefix blocks given to the reference: 592-token prompts end in a shorter block, which the engine does not
    # cache, so only the reference runs this case)
    # 1280 KV tokens (80 blocks of 16); prompts of a 512-token prefix block (a, b, c, b, a) and an 80-token block of
    # their own, 16 output tokens, one at a time. A and B leave a, a', b, b' cached (1184 tokens). C (608 to
    # reserve, 96 free) evicts a, the least recent. D hits b (pinned, so not evictable) and needs 96 of its own
    # (16 free): a' goes. E (prefix a, gone) misses and needs 608: b' and c go (b was touched by D)
    rows = [(float(i), 592, 16) for i in range(5)]
    blocks = [[(name, 512), (("own", i), 80)] for i, name in enumerate(["a", "b", "c", "b", "a"])]
    ref = run_reference(hand(tmp_path, rows, engine={"kv_cache_tokens": 1280}), arm=0, kv_policy=kv_policy,
                        prefix_caching=True, prefix_blocks=blocks)
    assert column(ref.requests, "cached_tokens") == [0, 0, 0, 512, 0]
    assert ref.num_evictions == 4
    assert ref.steps.kv_tokens.max() <= 1280
    # kv_tokens at each admission: A 608; B 592 cached + 608; C 1184 - 512 + 608; D 1264 - 80 + 96; E after
    # evicting b' and c: 1264 - 80 - 512 + 608. Paged admission allocates the prompt's 37 blocks, not the output
    admitted = ref.steps.kv_tokens[ref.steps.prefill_tokens > 0].tolist()
    if kv_policy == "reserve":
        assert admitted == [608, 1200, 1280, 1280, 1280]
    else:
        assert admitted == [592, 1184, 1264, 1264, 1264]


def test_prefix_aware_router_prefers_the_replica_holding_the_prefix(tmp_path):
    rows = [(0, 1024, 3, [1, 10]), (0, 1024, 3, [2, 11]), (2000, 1024, 3, [2, 12]), (2000, 1024, 3, [3, 13])]
    data = mooncake_hand(tmp_path, rows, replicas=2, router="prefix_aware")
    ref = run_reference(data, arm=0)
    # 0 and 1 by load (nothing cached); 2 follows prefix 2 to replica 1; 3 (nothing cached) ties on load -> 0
    assert column(ref.requests, "replica") == [0, 1, 1, 0]
    assert column(ref.requests, "cached_tokens") == [0, 0, 512, 0]
    engine_agrees(data)


def mooncake_hand(tmp_path, rows, **engine) -> dict:
    """A scenario replaying ``rows`` = [(arrival_ms, prompt, output, hash_ids), ...] as a Mooncake trace, with
    prefix caching on (only whole 512-token blocks, so the engine's full-block cache and section 7 agree)."""
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps({"timestamp": a, "input_length": p, "output_length": o, "hash_ids": h}) + "\n"
                             for a, p, o, h in rows))
    data = hand(tmp_path, [], workload={"kind": "trace", "path": str(trace), "format": "mooncake"},
                engine={"max_batch_tokens": 2048, "prefix_caching": True, **engine})
    return data


def _whole_prompt_cached(tmp_path) -> dict:
    return mooncake_hand(tmp_path, [(0, 1024, 2, [1, 2]), (5000, 1024, 2, [1, 2])])


WHOLE_PROMPT_HIT = (
    "docs/engine.md section 7: a hit covers cached_r = min(tokens of the leading cached blocks, prompt_r - 1); a "
    "1024-token prompt whose two blocks are cached computes 1 token. The engine counts only the blocks lying "
    "within the first prompt_r - 1 tokens (as vLLM), so it recomputes the whole last block (512 tokens)")


def test_a_whole_cached_prompt_computes_its_last_token(tmp_path):
    data = _whole_prompt_cached(tmp_path)
    ref = run_reference(data, arm=0)
    assert column(ref.requests, "cached_tokens") == [0, 1023]
    assert column(ref.steps, "prefill_tokens") == [1024, 0, 1, 0]
    assert column(ref.requests, "first_token_s") == [1024 * P, 5.0 + P]
    # the cache holds both blocks, each request reserves the rest: 1024 + 2 in every step
    assert column(ref.steps, "kv_tokens") == [1026] * 4
    assert ref.prefix_cache_hit_rate == 1023 / 2048


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=WHOLE_PROMPT_HIT)
def test_engine_computes_only_the_last_token_of_a_whole_cached_prompt(tmp_path):
    engine_agrees(_whole_prompt_cached(tmp_path))


def test_cached_blocks_are_evicted_before_a_request_waits(tmp_path):
    # 3000 tokens. Request 0 leaves block 10 cached (512). Request 1 (1536 of prompt, 500 output) holds 500 and
    # pins 20-22 (1536) once its prompt completes, 452 free. Request 2 needs 1034: evicting block 10 frees 964,
    # not enough; section 7 evicts it all the same ("before anything waits"), then request 2 waits for request 1
    data = mooncake_hand(tmp_path, [(0, 512, 2, [10]), (2000, 1536, 500, [20, 21, 22]), (3000, 1024, 10, [30, 31])],
                         kv_cache_tokens=3000)
    ref = run_reference(data, arm=0)
    kv = ref.steps.set_index("t_s").kv_tokens
    assert kv[2.0] == 512 + 2036  # request 1 admitted beside the cached block 10
    assert kv[3.5] == 500 + 1536  # block 10 evicted, request 2 waiting
    assert ref.num_evictions >= 1 and column(ref.requests, "cached_tokens") == [0, 0, 0]
    engine_agrees(data)


def test_a_prompt_s_blocks_are_least_recent_head_first(tmp_path):
    # 1600 tokens. Request 0 caches a, b (inserted in prompt order). Request 1 needs 612 with 576 free: the least
    # recent block goes, a. Request 2 (a, b) then finds no leading run: a miss (section 7's LRU by insertion and
    # touch order; an engine evicting a chain's tail first would keep a and hit 512)
    data = mooncake_hand(tmp_path, [(0, 1024, 2, [1, 2]), (2000, 512, 100, [3]), (5000, 1024, 2, [1, 2])],
                         kv_cache_tokens=1600)
    ref = run_reference(data, arm=0)
    assert column(ref.requests, "cached_tokens") == [0, 0, 0]
    engine_agrees(data)
