"""A draft model on ``kind: operations``: the small model's forwards as its own operations
(:func:`~simlab.hardware.operations.decode_operations` of its config), priced by the same kernel curves as the
target's, with the stack's host time per drafter forward and per round from the roofline the table was derived
from (docs/operations.md, "Drafters").

A draft round of gamma over R requests holding C tokens of context is gamma forwards of the small model,
``forward(R) + C x context_token_s + host``, and the round's host time once; its prompt forward builds the small
model's KV over a request's prompt: the token operations at M = prompt tokens and its causal attention pairs. Both
are tabulated over requests (and prompt tokens) once, and read by interpolation per step.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from simlab.hardware.model_shape import ModelConfig

DRAFT_REQUESTS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
PROMPT_TOKENS = (1, 16, 64, 256, 1024, 4096, 16384, 65536, 262144)


def draft_model_curves(draft: ModelConfig, curves, tensor_parallel: int, kv_precision: str) -> dict:
    """The small model's forward seconds at no context over :data:`DRAFT_REQUESTS` requests, its seconds per token
    of the requests' context (every layer's KV read at the decode attention's efficiency), and its prompt forward's
    token operations over :data:`PROMPT_TOKENS` with its attention's seconds per (query, key) pair."""
    from simlab.hardware.drafter_operations import context_token_s
    from simlab.hardware.operations import decode_operations, forward_token_operations, prefill_pair_s, price

    forward = [price(decode_operations(draft, num_requests=r, tensor_parallel=tensor_parallel,
                                       kv_precision=kv_precision), curves)["total"] for r in DRAFT_REQUESTS]
    tokens = [price(forward_token_operations(draft, tokens=t, tensor_parallel=tensor_parallel,
                                             kv_precision=kv_precision), curves)["total"] for t in PROMPT_TOKENS]
    return {"forward_s": np.asarray(forward), "prompt_s": np.asarray(tokens),
            "context_token_s": draft.num_kv_layers * context_token_s(draft, curves, tensor_parallel, kv_precision),
            "pair_s": prefill_pair_s(draft, curves, tensor_parallel)[0]}


def with_operations_draft_model(priced: Any, cost: Any, draft: ModelConfig, draft_tp: int, roofline: Any) -> Any:
    """``priced`` (a ``kind: operations`` table with a draft model, its KV capacity already net of the small model:
    :func:`~simlab.hardware.other_drafters.with_draft_model`) whose draft_model forwards and prompt forward are the
    small model's operations on ``cost``'s GPU and stack curves, at ``draft_tp``; numpy prices them (no compiled
    draft spec)."""
    from simlab.hardware.kernel_curves import load_curves
    from simlab.hardware.specs import get_gpu

    cfg, file = cost.operations_config
    curves = load_curves(get_gpu(cfg.gpu, file=file, field="hardware.gpu"), draft_tp, cfg.stack)
    table = draft_model_curves(draft, curves, draft_tp, cfg.kv_precision)
    host = float(roofline.params.draft_forward_overhead_s)
    round_s = float(roofline.params.spec_round_overhead_s)
    requests, prompts = np.asarray(DRAFT_REQUESTS, dtype=float), np.asarray(PROMPT_TOKENS, dtype=float)
    base_draft_s, base_prefill_s = priced.draft_s, priced.draft_prefill_s

    def draft_s(method: str, gamma: int, num_requests: float, context_tokens: float = 0.0) -> float:
        if method != "draft_model":
            return base_draft_s(method, gamma, num_requests, context_tokens)
        if gamma <= 0 or num_requests <= 0:
            return 0.0
        step = float(np.interp(float(num_requests), requests, table["forward_s"]))
        return gamma * (step + table["context_token_s"] * float(context_tokens) + host) + round_s

    def draft_prefill_s(method: str, tokens: int):
        if method != "draft_model":
            return base_prefill_s(method, tokens)
        if tokens <= 0:
            return 0.0
        t = float(tokens)
        return float(np.interp(t, prompts, table["prompt_s"])) + table["pair_s"] * t * t / 2.0 + host

    copied = copy.copy(priced)
    copied.draft_s, copied.draft_prefill_s = draft_s, draft_prefill_s
    copied.draft_kernel = lambda method: None  # compiled code prices no operations-priced draft model
    copied.draft_model_priced_by = "operations"
    return copied
