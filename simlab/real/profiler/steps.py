"""The steps a profile times, each built once per grid point with static shapes so it can be captured in a CUDA
graph: every host-side decision (cache plan, masks, context lengths) is made when the step is built, and the
callable that is timed only launches device work.

- verify: one target forward over a ragged batch with a KV cache (the real engine's decode forward: K/V written,
  the requests' contexts read, the drafter's feature layers collected, logits of every query token);
- prefill: the same forward for one prompt chunk, with logits of its last token only (what is sampled);
- draft block: the DFlash/DSpark parallel block, ``Drafter.draft``'s computation (draft layers over
  ``R x block_length`` tokens attending to the injected context K/V, then the shared LM head over the gamma
  predicting positions);
- sequential head: one position of ``Drafter.sample`` at temperature 1 (Markov bias ``W1[x] W2`` added to the
  block's logits, the confidence head, softmax, inverse-CDF draw) for R requests;
- autoregressive step: one target-shaped decoder layer (the drafter's first) over R tokens, one query each,
  attending to its request's cached context, then the full LM head: an MTP-1-like step.

Re-running a step rewrites the same cache positions, so replays are identical.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import torch

from simlab.real.drafter import DraftBlock, Drafter
from simlab.real.kv_cache import CacheBatch, StaticKVCache
from simlab.real.layers import attend, rotary_cos_sin
from simlab.real.target import TargetModel


@dataclass
class Step:
    """A built step: ``run()`` launches it; ``num_tokens`` tokens go through the model (padding included)."""

    run: Callable[[], torch.Tensor]
    num_tokens: int
    kv_cache_bytes: int = 0


def planned_forward(
    target: TargetModel, cache: StaticKVCache, batch: CacheBatch, input_ids: torch.Tensor,
    hidden_layer_ids: Sequence[int] = (), *, last_token_logits: bool = False,
) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
    """``TargetModel.forward`` with the cache plan made beforehand, followed by the LM head.

    Returns the logits (of every query token, or of each row's last token) and the stacked outputs of
    ``hidden_layer_ids`` [B, Q, m, hidden] (None when empty). The cache's lengths are not advanced.
    """
    config = target.config
    x = target.embed_tokens(input_ids)
    cos, sin = rotary_cos_sin(batch.positions, config.head_dim, config.rope_theta, x.dtype)
    x, layer_hidden = target.run_layers(x, cos, sin, hidden_layer_ids, cache, batch)
    hidden = target.norm(x[:, -1:] if last_token_logits else x)
    return target.logits(hidden), layer_hidden


def verify_step(
    target: TargetModel, query_lengths: Sequence[int], contexts: Sequence[int], *,
    hidden_layer_ids: Sequence[int] = (), last_token_logits: bool = False,
) -> Step:
    """One target forward: request r has ``contexts[r]`` cached tokens and ``query_lengths[r]`` new tokens."""
    device = target.device
    num_rows, num_query = len(query_lengths), max(query_lengths)
    cache = target.new_cache(num_rows, max(c + q for c, q in zip(contexts, query_lengths)))
    cache.lengths.copy_(torch.tensor(list(contexts), dtype=torch.long))
    slot_ids = torch.arange(num_rows, device=device)
    batch = cache.plan(slot_ids, torch.tensor(list(query_lengths), device=device), num_query)
    input_ids = torch.zeros(num_rows, num_query, dtype=torch.long, device=device)
    layer_ids = tuple(hidden_layer_ids)

    def run() -> torch.Tensor:
        return planned_forward(target, cache, batch, input_ids, layer_ids, last_token_logits=last_token_logits)[0]

    return Step(run=run, num_tokens=num_rows * num_query, kv_cache_bytes=cache.num_bytes)


def prefill_step(target: TargetModel, num_tokens: int, *, hidden_layer_ids: Sequence[int] = ()) -> Step:
    """One prompt chunk of ``num_tokens`` from an empty cache (logits of the last token only)."""
    return verify_step(target, [num_tokens], [0], hidden_layer_ids=hidden_layer_ids, last_token_logits=True)


def _context_cache(drafter: Drafter, num_requests: int, context: int, room: int) -> StaticKVCache:
    cache = drafter.new_context_cache(num_requests, context + room)
    cache.lengths.fill_(context)
    return cache


def planned_draft(target: TargetModel, drafter: Drafter, cache: StaticKVCache, anchor_ids: torch.Tensor, gamma: int,
                  context: int) -> Callable[[], torch.Tensor]:
    """``Drafter.draft`` for slots ``0..R-1`` of ``cache`` that all hold ``context`` tokens, planned beforehand:
    the returned callable computes the block's base logits [R, gamma, V]."""
    device, num_requests = anchor_ids.device, anchor_ids.shape[0]
    block_length = drafter.config.block_length(gamma)
    slot_ids = torch.arange(num_requests, device=device)
    positions = torch.full((num_requests, 1), context, dtype=torch.long, device=device) + torch.arange(
        block_length, device=device)
    mask = torch.ones(num_requests, 1, block_length, context + block_length, dtype=torch.bool, device=device)

    def read_context(index: int, _layer) -> tuple[torch.Tensor, torch.Tensor]:
        return cache.read_prefix(index, slot_ids, context)

    def run() -> torch.Tensor:
        x = drafter._block_inputs(target, anchor_ids, block_length)
        hidden = drafter._predicting(drafter._run_layers(x, positions, read_context, mask), gamma)
        return target.logits(hidden)

    return run


def draft_block_step(target: TargetModel, drafter: Drafter, num_requests: int, gamma: int, context: int) -> Step:
    """The parallel block for ``num_requests`` requests of ``context`` cached tokens each (``Drafter.draft``)."""
    block_length = drafter.config.block_length(gamma)
    cache = _context_cache(drafter, num_requests, context, block_length)
    anchor_ids = torch.zeros(num_requests, dtype=torch.long, device=target.device)
    return Step(run=planned_draft(target, drafter, cache, anchor_ids, gamma, context),
                num_tokens=num_requests * block_length, kv_cache_bytes=cache.num_bytes)


def sequential_head_step(target: TargetModel, drafter: Drafter, num_requests: int) -> Step:
    """One sequential position of DSpark sampling at temperature 1 for ``num_requests`` requests."""
    device, vocab = target.device, target.config.vocab_size
    generator = torch.Generator(device=device).manual_seed(0)
    hidden = torch.randn(num_requests, 1, target.config.hidden_size, generator=generator, device=device,
                         dtype=target.dtype)
    base_logits = torch.randn(num_requests, 1, vocab, generator=generator, device=device)
    block = DraftBlock(hidden=hidden, base_logits=base_logits)
    previous = torch.randint(0, vocab, (num_requests,), generator=generator, device=device)
    uniforms = torch.rand(num_requests, 1, generator=generator, device=device)

    def run() -> torch.Tensor:
        return drafter.sample(block, previous, 1.0, uniforms).tokens

    return Step(run=run, num_tokens=num_requests)


def autoregressive_step(target: TargetModel, drafter: Drafter, num_requests: int, context: int) -> Step:
    """One decoder layer (the drafter's first, target-shaped) over one token per request + the full LM head."""
    device = target.device
    cache = _context_cache(drafter, num_requests, context, 1)
    layer = drafter.layers[0]
    backbone = drafter.backbone_config
    slot_ids = torch.arange(num_requests, device=device)
    token_ids = torch.zeros(num_requests, 1, dtype=torch.long, device=device)
    positions = torch.full((num_requests, 1), context, dtype=torch.long, device=device)

    def run() -> torch.Tensor:
        x = target.embed_tokens(token_ids).to(drafter.norm.weight.dtype)
        cos, sin = rotary_cos_sin(positions, backbone.head_dim, backbone.rope_theta, x.dtype)
        attn = layer.self_attn
        h = layer.input_layernorm(x)
        query = attn.query(h, cos, sin)
        key, value = attn.key_value(h, cos, sin)
        context_key, context_value = cache.read_prefix(0, slot_ids, context)
        key = torch.cat([context_key.to(key.dtype), key], dim=2)
        value = torch.cat([context_value.to(value.dtype), value], dim=2)
        x = layer.mlp_block(x + attn.output(attend(query, key, value, None)))
        return target.logits(drafter.norm(x))

    return Step(run=run, num_tokens=num_requests, kv_cache_bytes=cache.num_bytes)


__all__ = [
    "Step", "autoregressive_step", "draft_block_step", "planned_draft", "planned_forward", "prefill_step",
    "sequential_head_step", "verify_step",
]
