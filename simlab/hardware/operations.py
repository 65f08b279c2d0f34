"""A step is operations: the kernels one decode or verify forward runs, each priced by a per-operation roofline whose
efficiency curves are fitted on measured kernels (docs/operations.md).

:func:`decode_operations` lists a forward of ``num_requests`` requests x ``queries_per_request`` tokens at
``context_per_request`` tokens of context, on one GPU of a tensor-parallel group: per layer the GEMMs with M = the
step's tokens and N x K from the model's shape (split ``tensor_parallel`` ways), attention by kind (full: each
request's queries against its context; a window layer: its window; a state layer: the state read per request and
written per query), a mixture of experts' router and the experts its tokens select (a grouped GEMM of M = tokens x
k / experts touched each), the all-reduces of tensor parallelism, the LM head and the sampler. Under expert
parallelism (:class:`~simlab.hardware.moe_layout.MoeLayout`) the step is its busiest GPU's: whole experts on each
of E GPUs read the experts the replica's tokens select there, and with data-parallel attention (E > T) the busiest
attention group's requests run the rest while tokens reach their experts by an all-to-all dispatch and come back by
a combine in every MoE layer.
:func:`price` prices each with :class:`~simlab.hardware.kernel_curves.KernelCurves` and sums them.

This is the step's GPU time alone: the engine's own time comes on top in ``kind: operations``
(simlab.hardware.operations_table; docs/operations.md says what is built and what is next).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from simlab.hardware.model_shape import BF16_BYTES, ModelConfig
from simlab.hardware.moe_layout import MoeLayout, dispatch_bytes_per_copy
from simlab.hardware.precision import KV_BYTES


@dataclass(frozen=True)
class Operation:
    """One kernel, run ``count`` times a step (once per layer of its kind)."""

    kind: str  # gemm | moe | attention | state | allreduce | alltoall | elementwise | sampler | prefill_attention
    name: str
    count: int
    flops: float
    bytes: float
    m: int = 0  # a GEMM's tokens (what its efficiency curve is read at)
    dtype: str = "bf16"  # a GEMM's weights and activations, or attention's KV cache: bf16 or fp8 (its own curve)
    n: float = 0.0  # a GEMM's output width and ...
    k: float = 0.0  # ... its reduction width (what a measured kernel table is read at)


def gemm(name: str, m: int, n: float, k: float, count: int, dtype: str = "bf16") -> Operation:
    """A GEMM of weights N x K on M tokens: weights and input in ``dtype`` (fp8: one byte each), output bf16."""
    element = 1.0 if dtype == "fp8" else BF16_BYTES
    return Operation("gemm", name, count, 2.0 * m * n * k, element * (n * k + m * k) + BF16_BYTES * m * n, m, dtype,
                     n, k)


def sampler(tokens: int, vocab: float) -> Operation:
    """Sampling over ``tokens`` rows of ``vocab`` logits (16 bytes a logit: read, softmax, top-k, write)."""
    return Operation("sampler", "sampler", 1, 0.0, 16.0 * tokens * vocab)


def busiest_group_requests(num_requests: float, groups: int) -> float:
    """The requests the busiest of ``groups`` data-parallel attention groups holds: ceil(R / D), at most R (a cell
    of a table below one request stays a fraction)."""
    return min(num_requests, math.ceil(num_requests / groups)) if groups > 1 else num_requests


def decode_operations(model: ModelConfig, *, num_requests: int, queries_per_request: int = 1,
                      context_per_request: float = 0.0, tensor_parallel: int = 1, expert_parallel: int = 1,
                      precision: str = "bf16", kv_precision: str = "bf16") -> list[Operation]:
    """The operations of one decode (``queries_per_request`` = 1) or verify forward, on one GPU; ``precision`` the
    decoder layers' GEMMs' (fp8: vLLM's per-tensor fp8; the LM head stays bf16), ``kv_precision`` the KV cache's
    (fp8: attention reads one byte an element, its FLOPs unchanged). ``num_requests`` are the replica's: with
    ``expert_parallel`` above ``tensor_parallel`` the busiest attention group holds
    :func:`busiest_group_requests` of them, and the experts see all."""
    if precision not in ("bf16", "fp8"):
        raise ValueError(f"the operation model prices bf16 and fp8 GEMMs, not {precision}")
    if kv_precision not in KV_BYTES:
        raise ValueError(f"the operation model prices a {'/'.join(KV_BYTES)} KV cache, not {kv_precision}")
    kv_element = KV_BYTES[kv_precision]
    dtype = precision
    if model.compressed is not None:
        raise ValueError("the operation model lists GQA/MQA, MLA and hybrid layers (not compressed attention yet)")
    tp = tensor_parallel
    layout = MoeLayout.of(model, tp, expert_parallel) if model.is_moe else None
    replica_tokens = num_requests * queries_per_request
    if layout is not None:
        num_requests = busiest_group_requests(num_requests, layout.attention_groups)
    tokens = num_requests * queries_per_request
    hidden, head_dim = model.hidden_size, model.head_dim
    heads, kv_heads = model.num_heads / tp, max(1.0, model.num_kv_heads / tp)
    hybrid = model.hybrid
    full = model.num_kv_layers
    windows = hybrid.num_window_layers if hybrid is not None else 0
    attention_layers = full + windows
    if model.is_mla:
        ops = _mla_operations(model, num_requests, tokens, context_per_request, tp, dtype, kv_precision)
    else:
        ops = [gemm("qkv_proj", tokens, (heads + 2 * kv_heads) * head_dim, hidden, attention_layers, dtype),
               gemm("o_proj", tokens, hidden, heads * head_dim, attention_layers, dtype)]
    entry = 2 * kv_heads * head_dim * kv_element  # one token's K and V in one layer
    pair_flops = 4 * heads * head_dim
    if full and not model.is_mla:
        pairs = num_requests * queries_per_request * context_per_request
        ops.append(Operation("attention", "attention", full, pair_flops * pairs,
                             entry * num_requests * context_per_request, dtype=kv_precision))
    if windows:
        window = min(context_per_request, hybrid.window_tokens)
        ops.append(Operation("attention", "window_attention", windows, pair_flops * tokens * window,
                             entry * num_requests * window, dtype=kv_precision))
    if hybrid is not None and hybrid.num_state_layers:
        layers = hybrid.num_state_layers
        state = hybrid.state_bytes / layers / tp
        non_attention = model.attention_params - attention_layers * model.attention_params_per_layer
        ops.append(gemm("state_layer_proj", tokens, non_attention / layers / hidden / tp, hidden, layers, dtype))
        ops.append(Operation("state", "state_update", layers, hybrid.state_flops_per_token / layers / tp * tokens,
                             state * (num_requests + tokens)))
    dense_layers = model.num_dense_layers if model.is_moe else model.num_layers
    if dense_layers:
        ops += [gemm("gate_up_proj", tokens, 2 * model.intermediate_size / tp, hidden, dense_layers, dtype),
                gemm("down_proj", tokens, hidden, model.intermediate_size / tp, dense_layers, dtype)]
    if model.is_moe:
        ops += _moe_operations(model, tokens, tp, dtype, layout, replica_tokens)
    alltoall = layout is not None and layout.uses_alltoall
    if tp > 1:  # two a layer; with the all-to-all, one a layer and one a dense MLP
        count = model.num_layers + dense_layers if alltoall else 2 * model.num_layers
        ops.append(Operation("allreduce", "allreduce", count, 0.0, BF16_BYTES * tokens * hidden))
    if alltoall:  # each GPU of a group sends its 1 / T share of the group's tokens to their k experts, and back
        copies = tokens / tp * model.experts_per_token
        ops += [Operation("alltoall", "dispatch", model.num_moe_layers, 0.0,
                          copies * dispatch_bytes_per_copy(hidden, precision)),
                Operation("alltoall", "combine", model.num_moe_layers, 0.0, copies * BF16_BYTES * hidden)]
    ops += small_kernels(model, tokens, attention_layers, dense_layers, tp, kv_element)
    ops.append(gemm("lm_head", tokens, model.vocab_size / tp, hidden, 1))
    ops.append(sampler(tokens, model.vocab_size))
    return ops


def small_kernels(model: ModelConfig, tokens: int, attention_layers: int, dense_layers: int,
                  tp: int, kv_element: float = BF16_BYTES) -> list[Operation]:
    """The memory-bound kernels between a forward's GEMMs, one :class:`Operation` per kernel a layer launches (each
    pays the kernel floor): two fused residual add + RMSNorms a layer (read x and the residual, write both) and
    the final norm; per attention layer the q and k norms (Qwen3's ``qk_norm``; MLA's norms of its q and KV
    latents), the rotary embedding and the KV-cache write (reads bf16, writes ``kv_element`` bytes an element);
    the gated activation of every dense MLP and shared expert (read gate and up, write one). A mixture of experts'
    routing and activation are inside the fused MoE kernel's measured time (its floor)."""
    hidden, tokens_bytes = model.hidden_size, BF16_BYTES * tokens
    heads, kv_heads = model.num_heads / tp, max(1.0, model.num_kv_heads / tp)
    ops = [Operation("elementwise", "add_rmsnorm", 2 * model.num_layers + 1, 0.0, tokens_bytes * 4 * hidden)]
    if model.is_mla:
        latents = model.kv_lora_rank + model.q_lora_rank
        q_rope, k_rope = heads * model.qk_rope_head_dim, model.qk_rope_head_dim
        ops += [Operation("elementwise", "latent_norms", (2 if model.q_lora_rank else 1) * attention_layers, 0.0,
                          tokens_bytes * 2 * latents),
                Operation("elementwise", "rotary", attention_layers, 0.0, tokens_bytes * 2 * (q_rope + k_rope)),
                Operation("elementwise", "kv_cache_write", attention_layers, 0.0,
                          tokens * (BF16_BYTES + kv_element) * (model.kv_lora_rank + k_rope))]
    elif attention_layers:
        qk = (heads + kv_heads) * model.head_dim
        if model.qk_norm:
            ops.append(Operation("elementwise", "qk_norm", attention_layers, 0.0, tokens_bytes * 2 * qk))
        ops += [Operation("elementwise", "rotary", attention_layers, 0.0, tokens_bytes * 2 * qk),
                Operation("elementwise", "kv_cache_write", attention_layers, 0.0,
                          tokens * (BF16_BYTES + kv_element) * 2 * kv_heads * model.head_dim)]
    width = dense_layers * model.intermediate_size
    activations = dense_layers
    if model.is_moe and model.num_shared_experts:
        width += model.num_moe_layers * model.num_shared_experts * model.moe_intermediate_size
        activations += model.num_moe_layers
    if activations:
        ops.append(Operation("elementwise", "activation", activations, 0.0,
                             tokens_bytes * 3 * width / tp / activations))
    return ops


def forward_token_operations(model: ModelConfig, *, tokens: int, tensor_parallel: int = 1, expert_parallel: int = 1,
                             precision: str = "bf16", kv_precision: str = "bf16") -> list[Operation]:
    """The operations of a forward whose cost follows its ``tokens`` alone: the GEMMs at M = ``tokens``, the
    all-reduces, the elementwise kernels and a linear-attention layer's per-token FLOPs (its state read and written
    once), without attention over context, the LM head or the sampler. A prefill chunk adds these at M = decode +
    chunk tokens to the decode forward it joins (one forward, as chunked prefill runs it)."""
    ops = []
    for op in decode_operations(model, num_requests=tokens, context_per_request=0.0, tensor_parallel=tensor_parallel,
                                expert_parallel=expert_parallel, precision=precision, kv_precision=kv_precision):
        if op.kind in ("attention", "sampler") or op.name == "lm_head":
            continue
        if op.kind == "state":  # a prompt's state is read and written once a chunk, not once a token
            op = Operation("state", op.name, op.count, op.flops, 2.0 * model.hybrid.state_bytes
                           / model.hybrid.num_state_layers / tensor_parallel)
        ops.append(op)
    return ops


def prefill_pair_s(model: ModelConfig, curves, tensor_parallel: int = 1) -> tuple[float, float]:
    """Seconds of prefill attention per (query, context token) pair: over the full-attention layers, and over the
    window layers (which see at most their window), at the prefill attention's fitted efficiency."""
    pair_flops = model.prefill_attention_flops_per_pair / tensor_parallel
    per_layer = pair_flops / curves.bf16_flop_per_s / curves.prefill_efficiency
    windows = model.hybrid.num_window_layers if model.hybrid is not None else 0
    return model.num_kv_layers * per_layer, windows * per_layer


def prefill_operations(model: ModelConfig, *, prompt_tokens: int, tensor_parallel: int = 1,
                       precision: str = "bf16") -> list[Operation]:
    """The operations of one prefill of a ``prompt_tokens``-token prompt with no prior context: the forward's
    token operations (:func:`forward_token_operations`), causal attention over its own tokens (half the pairs) in
    the full-attention layers and over ``min(tokens, W)`` in window layers, and logits for its last token only."""
    ops = forward_token_operations(model, tokens=prompt_tokens, tensor_parallel=tensor_parallel,
                                   precision=precision)
    pair_flops = model.prefill_attention_flops_per_pair / tensor_parallel
    ops.append(Operation("prefill_attention", "prefill_attention", model.num_kv_layers,
                         pair_flops * prompt_tokens * prompt_tokens / 2, 0.0))
    if model.hybrid is not None and model.hybrid.num_window_layers:
        window = min(prompt_tokens, model.hybrid.window_tokens)
        ops.append(Operation("prefill_attention", "prefill_window_attention", model.hybrid.num_window_layers,
                             pair_flops * prompt_tokens * window, 0.0))
    ops.append(gemm("lm_head", 1, model.vocab_size / tensor_parallel, model.hidden_size, 1))
    return ops


def _mla_operations(model: ModelConfig, num_requests: int, tokens: int, context_per_request: float, tp: int,
                    dtype: str, kv_precision: str = "bf16") -> list[Operation]:
    """Multi-head latent attention as engines run its decode (absorbed): the q path (through ``q_lora_rank`` when the
    model has one) and the KV latent's projection, replicated on every GPU of the group; each head's nope query
    into the latent (W_UK) and the latent output back to its value dims (W_UV) as batched GEMMs; attention over the
    latent cache (each GPU reads its requests' whole latent: ``kv_lora_rank + rope`` dims a token and layer); the
    output projection."""
    hidden, layers, heads = model.hidden_size, model.num_kv_layers, model.num_heads / tp
    latent, rope, nope = model.kv_lora_rank, model.qk_rope_head_dim, model.head_dim
    if model.q_lora_rank:
        ops = [gemm("q_a_proj", tokens, model.q_lora_rank, hidden, layers, dtype),
               gemm("q_b_proj", tokens, heads * (nope + rope), model.q_lora_rank, layers, dtype)]
    else:
        ops = [gemm("q_proj", tokens, heads * (nope + rope), hidden, layers, dtype)]
    ops += [gemm("kv_a_proj", tokens, latent + rope, hidden, layers, dtype),
            gemm("w_uk_absorb", tokens, heads * latent, nope, layers),
            gemm("w_uv_absorb", tokens, heads * model.v_head_dim, latent, layers),
            gemm("o_proj", tokens, hidden, heads * model.v_head_dim, layers, dtype)]
    pairs = tokens * context_per_request
    ops.append(Operation("attention", "mla_attention", layers, model.attention_flops_per_pair / tp * pairs,
                         (latent + rope) * KV_BYTES[kv_precision] * num_requests * context_per_request,
                         dtype=kv_precision))
    return ops


def _moe_operations(model: ModelConfig, tokens: int, tp: int, dtype: str = "bf16", layout: Optional[MoeLayout] = None,
                    replica_tokens: Optional[float] = None) -> list[Operation]:
    """The router, the shared experts, and the routed experts the step's tokens select: ``touched`` experts of
    ``tokens x k / touched`` tokens each, read once each, as one fused MoE kernel a layer (gate-up, activation and
    down projections of every touched expert), each split ``tp`` ways. Under expert parallelism each of E GPUs
    holds whole experts: the busiest reads its share of the experts the replica's tokens select
    (:meth:`~simlab.hardware.moe_layout.MoeLayout.routed_share`) and runs ``replica tokens x k / E`` of their
    (token, expert) copies."""
    from simlab.hardware.specs import expected_experts

    hidden, width, layers = model.hidden_size, model.moe_intermediate_size, model.num_moe_layers
    ops = [gemm("router", tokens, model.num_experts, hidden, layers)]  # the router stays bf16
    if model.num_shared_experts:
        shared = model.num_shared_experts * width / tp
        ops += [gemm("shared_gate_up", tokens, 2 * shared, hidden, layers, dtype),
                gemm("shared_down", tokens, hidden, shared, layers, dtype)]
    element = 1.0 if dtype == "fp8" else BF16_BYTES
    k = model.experts_per_token
    if layout is None or layout.expert_parallel <= 1:
        touched = float(expected_experts(tokens, model.num_experts, k))
        copies, split = tokens * k, tp  # every expert split T ways, every token on every GPU
        activations = BF16_BYTES * tokens * hidden * (1.0 + k)  # in, and each choice's output
        flops = 2.0 * tokens * k * 3.0 * hidden * width / tp
    else:
        holders = layout.expert_holders
        touched = float(layout.routed_share(replica_tokens)) * model.num_experts / holders
        copies, split = replica_tokens * k / holders, 1
        activations = BF16_BYTES * hidden * 2.0 * copies  # each copy in, and its output
        flops = 2.0 * copies * 3.0 * hidden * width
    per_expert = max(1, round(copies / max(touched, 1e-12)))
    weights = touched * 3.0 * hidden * width / split * element
    ops.append(Operation("moe", "experts", layers, flops, weights + activations, per_expert, dtype))
    return ops


def price(operations: list[Operation], curves) -> dict[str, float]:
    """Seconds per operation name (each times its count) and ``total``, under ``curves``
    (:class:`~simlab.hardware.kernel_curves.KernelCurves`)."""
    out: dict[str, float] = {}
    for op in operations:
        out[op.name] = out.get(op.name, 0.0) + op.count * curves.seconds(op)
    out["total"] = sum(out.values())
    return out
