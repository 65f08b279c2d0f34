"""A scenario's workload as real-engine requests: the same arrivals, lengths and domains, with prompts taken from
the held-out part of the corpus the pair was trained on (the pair never saw them)."""

from __future__ import annotations

import numpy as np

from simlab.real.engine import ClosedLoopUsers, Request


def real_requests(workload, corpus_tokens: np.ndarray, *, seed: int, first_id: int = 0) -> list[Request]:
    """One :class:`Request` per request of ``workload`` (a :class:`simlab.workload.Workload`): request i keeps its
    arrival time, prompt and output lengths and domain; its prompt is a window of ``corpus_tokens`` at an offset
    drawn from ``seed`` (the same seed gives the same prompts). ``first_id`` offsets the ids."""
    requests = workload.requests
    rng = np.random.default_rng([seed, 0x7EA1])
    longest = int(requests.prompt_tokens.max()) if len(requests) else 0
    if longest >= len(corpus_tokens):
        raise ValueError(f"a prompt of {longest} tokens is longer than the corpus ({len(corpus_tokens)} tokens)")
    starts = rng.integers(0, len(corpus_tokens) - longest, size=len(requests))
    domains = requests.domain_labels()
    out = []
    for i in range(len(requests)):
        prompt = corpus_tokens[starts[i]: starts[i] + int(requests.prompt_tokens[i])]
        out.append(Request(id=first_id + i, prompt_ids=tuple(int(t) for t in prompt),
                           max_new_tokens=int(requests.output_tokens[i]), arrival_s=float(requests.arrival_s[i]),
                           domain=str(domains[i])))
    return out


def closed_loop_users(workload) -> ClosedLoopUsers | None:
    """The workload's closed loop as the real engine's users (None for an open loop)."""
    loop = workload.closed_loop
    return None if loop is None else ClosedLoopUsers(loop.concurrency, loop.think_time_s)
