"""The prefill part of an iteration: chunks handed to prefilling requests in admission order, and who completes.

A prefilling entry is ``[request id, tokens done, tokens to prefill]``: the prompt, or after a preemption the
whole context so far (recompute). Completing the prefill emits one token (the first one, or the one the
recompute produces). docs/engine.md section 3, step 3.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class PrefillPart:
    """Chunks given this iteration and what they complete.

    ``joiners``: (request id, domain, tokens still to emit, KV tokens held, decode steps done) of requests that
    decode from the next iteration; ``finishing``: requests whose completing prefill emitted their last token;
    ``completed``: every request whose prefill completed (both kinds), in admission order; ``first``: those among
    them that emitted their first token."""

    tokens: int = 0
    attn_pairs: float = 0.0
    num_requests: int = 0
    joiners: list = field(default_factory=list)
    finishing: list = field(default_factory=list)
    completed: list = field(default_factory=list)
    first: list = field(default_factory=list)


def allocate(prefilling: list[list[int]], budget: int, requests, emitted: np.ndarray, decode_steps: np.ndarray,
             *, hand_off: bool = False) -> tuple[PrefillPart, list[list[int]]]:
    """Chunks from ``budget`` tokens in admission order. ``requests`` has prompt/output tokens and domains;
    ``emitted`` (tokens each request emitted so far) is advanced for requests that complete. With ``hand_off``
    (a prefill replica of a disaggregated engine) a completed prompt emits nothing: the decode side samples its
    first token. Returns the part and the entries still prefilling afterwards."""
    part = PrefillPart()
    still = []
    for entry in prefilling:
        request_id, done, target = entry
        chunk = max(min(target - done, budget), 0)
        budget -= chunk
        if chunk:
            part.tokens += chunk
            part.attn_pairs += chunk * (done + chunk / 2.0)
            part.num_requests += 1
        if done + chunk < target:
            still.append([request_id, done + chunk, target])
            continue
        part.completed.append(request_id)
        if hand_off:
            continue
        if emitted[request_id] == 0:
            part.first.append(request_id)
        emitted[request_id] += 1
        left = int(requests.output_tokens[request_id]) - int(emitted[request_id])
        if left > 0:
            part.joiners.append((request_id, int(requests.domain[request_id]), left, target + 1,
                                 int(decode_steps[request_id])))
        else:
            part.finishing.append(request_id)
    return part, still
