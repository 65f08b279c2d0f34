"""The reference stepper: an independent, plain implementation of docs/engine.md, the oracle the engine is
tested against bit for bit (tests/test_reference_equivalence.py).

One engine iteration per loop, no blocks, no draw store: a heap of events across replicas and arrivals
(sections 4-5, ``loop.py``), one replica's iteration (section 3, ``replica.py``), the KV policies and the prefix
cache (sections 6-7, ``kv.py``) and the requests' state and random streams (sections 1-2, ``state.py``). It
shares with the engine only what docs/engine.md section 1 names: the cost model, the scheduler functions, the
random streams (``ArmDraws.generate``) and the scenario building (``simlab.runner.build``).

    from reference import run_reference
    ref = run_reference("scenario.yaml", arm=0)        # or a dict, or built=simlab.runner.build(...)
    ref.requests, ref.steps, ref.positions, ref.num_preemptions, ref.prefix_cache_hit_rate
"""

from __future__ import annotations

from dataclasses import dataclass, replace as replace_limits
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from .kv import KVCache, ceil_div
from .loop import EventLoop, Router
from .replica import Limits, Replica
from .state import Request, Streams

PREFIX_BLOCK_TOKENS = 512  # section 7: a prompt's prefix blocks are its whole 512-token blocks


@dataclass
class ReferenceResult:
    """What one arm's reference run produced, in the engine's record layout (section 8)."""

    requests: pd.DataFrame  # one row per request, by id
    steps: pd.DataFrame  # one row per iteration, ordered by (t_s, replica) as the engine's step table
    positions: dict[str, np.ndarray]  # verified / reached / accepted counts per draft position
    num_preemptions: int
    prefix_cache_hit_rate: float
    num_evictions: int


def run_reference(scenario=None, *, arm=0, built=None, kv_policy: Optional[str] = None,
                  block_size: Optional[int] = None, prefix_caching: Optional[bool] = None,
                  prefix_blocks: Optional[Sequence] = None, router: Optional[str] = None) -> ReferenceResult:
    """Simulate one arm of ``scenario`` (a path, a mapping or a loaded scenario; or give ``built``, what
    :func:`simlab.runner.build` returned) with the reference stepper.

    ``arm`` is an index or a label. ``kv_policy`` (reserve | paged), ``block_size``, ``prefix_caching`` and
    ``router`` override the scenario's ``engine`` fields (defaults where it has none: reserve, 16, false);
    ``prefix_blocks`` gives each request's prefix blocks (section 7) as a sequence of (hash id, tokens) covering
    its prompt; by default they come from the workload's prefix ids (a Mooncake trace's hash_ids).
    """
    from simlab.runner import as_loaded, build

    if built is None:
        built = build(as_loaded(scenario))
    index = arm if isinstance(arm, int) else [a.arm.label for a in built.arms].index(arm)
    prepared = built.arms[index]
    policy = prepared.policy
    workload = built.workload
    requests = workload.requests
    num_requests = len(requests)
    engine = built.engines.arms[index].config  # the scenario's engine with its stack release's defaults, for this arm
    kv_policy = kv_policy or getattr(engine, "kv_policy", "reserve")
    block_size = block_size or getattr(engine, "block_size", 16)
    if prefix_caching is None:
        prefix_caching = bool(getattr(engine, "prefix_caching", False))

    if prefix_blocks is None and getattr(requests, "prefix_ids", None) is not None:
        prefix_blocks = prefix_blocks_from_ids(requests.prompt_tokens, *requests.prefix_ids)
    reqs = [
        Request(i, int(requests.prompt_tokens[i]), int(requests.output_tokens[i]), int(requests.domain[i]),
                tuple((h, int(t)) for h, t in prefix_blocks[i]) if prefix_blocks is not None else ())
        for i in range(num_requests)
    ]
    _check_inputs(reqs, kv_policy, block_size, built.kv_capacity, prefix_blocks is not None)

    gamma = policy.gamma
    streams = Streams(policy.draws, requests.domain, num_requests) if gamma > 0 else None
    limits = Limits(
        max_num_seqs=engine.max_num_seqs, max_batch_tokens=engine.max_batch_tokens,
        prefill_chunk_tokens=engine.prefill_chunk_tokens, method=policy.method, gamma=gamma,
        scheduler=policy.scheduler, prior_conf=policy.prior_conf, cost=policy.cost, tree=policy.tree,
        timing=built.engines.arms[index].step_cost,
    )
    positions = {name: np.zeros(gamma, dtype=np.int64) for name in ("verified", "reached", "accepted")}
    split = getattr(engine, "disaggregation", None)
    if split is None:
        replicas = [Replica(i, KVCache(kv_policy, built.kv_capacity, block_size, prefix_caching))
                    for i in range(engine.replicas)]
        loop = EventLoop(replicas, Router(router or engine.router, replicas),
                         start=lambda rep: rep.start_iteration(limits, streams),
                         end=lambda rep, it: rep.end_iteration(it, positions))
    else:  # section 9: prefill replicas 0..P-1, decode replicas P..P+D-1
        pools = built.pools
        prefill_limits = replace_limits(
            limits, max_batch_tokens=split.prefill_max_batch_tokens or engine.max_batch_tokens,
            prefill_chunk_tokens=split.prefill_chunk_tokens or engine.prefill_chunk_tokens)
        prefill = [Replica(i, KVCache(kv_policy, pools.prefill_kv_tokens, block_size, prefix_caching,
                                      prompt_only=True), role="prefill")
                   for i in range(split.prefill_replicas)]
        link = (pools.link_bytes_per_token(policy.method) / (split.link_bandwidth_GBps * 1e9),
                split.link_latency_ms / 1e3)
        limits = replace_limits(limits, draft_recompute=pools.recomputes_draft(policy.method))
        decode = [Replica(split.prefill_replicas + i, KVCache(kv_policy, pools.decode_kv_tokens, block_size, False),
                          role="decode", link=link)
                  for i in range(split.decode_replicas)]
        replicas = prefill + decode
        loop = EventLoop(prefill, Router(split.prefill_router or router or engine.router, prefill),
                         start=lambda rep: rep.start_iteration(prefill_limits if rep.role == "prefill" else limits,
                                                               streams),
                         end=lambda rep, it: rep.end_iteration(it, positions),
                         decode_router=Router(split.decode_router or engine.router, decode))
    loop.replicas_by_index = replicas

    closed = workload.closed_loop
    if closed is None:  # section 5, open loop: request i arrives at arrival_i
        for r in reqs:
            loop.push_arrival(float(requests.arrival_s[r.id]), r)
    else:  # section 5, closed loop
        first = min(closed.concurrency, num_requests)
        for r in reqs[:first]:
            loop.push_arrival(0.0, r)
        unused = iter(reqs[first:])

        def next_request(finished: Request, time: float) -> None:
            following = next(unused, None)
            if following is not None:
                loop.push_arrival(time + closed.think_time_s, following)

        loop.on_finish = next_request

    rows = loop.run()
    unfinished = [r.id for r in reqs if np.isnan(r.finish_s)]
    assert not unfinished, f"requests never finished: {unfinished[:10]}"

    label = prepared.arm.label
    request_frame = pd.DataFrame({
        "arm": label,
        "id": np.arange(num_requests),
        "arrival_s": [r.arrival_s for r in reqs],
        "prompt_tokens": [r.prompt for r in reqs],
        "output_tokens": [r.output for r in reqs],
        "domain": [requests.domain_names[r.domain] for r in reqs],
        "first_token_s": [r.first_token_s for r in reqs],
        "finish_s": [r.finish_s for r in reqs],
        "steps": [r.steps for r in reqs],
        "replica": [r.replica for r in reqs],
        "cached_tokens": [r.cached_at_first_admission for r in reqs],  # not an engine column (section 7)
    })
    step_frame = pd.DataFrame([vars(row) for row in rows])
    step_frame.insert(0, "arm", label)
    step_frame = step_frame.sort_values(["t_s", "replica"], kind="stable", ignore_index=True)
    total_prompt = sum(r.prompt for r in reqs)
    return ReferenceResult(
        requests=request_frame,
        steps=step_frame,
        positions=positions,
        num_preemptions=sum(rep.num_preemptions for rep in replicas),
        prefix_cache_hit_rate=sum(r.cached_at_first_admission for r in reqs) / total_prompt,
        num_evictions=sum(rep.kv.num_evictions for rep in replicas),
    )


def _check_inputs(reqs: list[Request], kv_policy: str, block_size: int, capacity: int, has_prefix: bool) -> None:
    """Inputs the rules of sections 6-7 need to make sense (the engine's scenario validation checks its own)."""
    if kv_policy == "paged":
        num_blocks = capacity // block_size
        for r in reqs:
            # the most a request ever holds: its context plus lookahead is at most prompt + output - 1 tokens
            if ceil_div(r.prompt + r.output - 1, block_size) > num_blocks:
                raise ValueError(f"request {r.id} can never fit in {num_blocks} blocks of {block_size} tokens")
    if has_prefix:
        for r in reqs:
            tokens = [t for _, t in r.prefix_blocks]
            if sum(tokens) > r.prompt or any(t <= 0 for t in tokens):
                raise ValueError(f"request {r.id}: prefix blocks of {tokens} tokens for a prompt of {r.prompt}")
            if kv_policy == "paged" and any(t % block_size for t in tokens[:-1]):
                raise ValueError(f"request {r.id}: prefix blocks but the last must be whole KV blocks")


def prefix_blocks_from_ids(prompt_tokens, offsets, ids, block_tokens: int = PREFIX_BLOCK_TOKENS) -> list:
    """Section 7: request i's prefix blocks are the leading ids of ``ids[offsets[i]:offsets[i + 1]]`` (a Mooncake
    trace's hash_ids) that name whole ``block_tokens`` blocks of its prompt (a shorter last block is not one)."""
    out = []
    for i, prompt in enumerate(prompt_tokens):
        blocks = []
        for k, hash_id in enumerate(ids[offsets[i]:offsets[i + 1]]):
            if (k + 1) * block_tokens <= int(prompt):
                blocks.append((int(hash_id), block_tokens))
        out.append(blocks)
    return out
