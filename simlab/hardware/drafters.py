"""Roofline drafter costs, one shape per method (DOMAIN.md section 2, docs/roofline.md "Drafters").

- EAGLE-3: gamma sequential forwards of one target-shaped decoder layer (its q/k/v read the 2h-wide concat of
  embedding and hidden state) and a reduced-vocabulary LM head (32k), over R tokens; once per round an fc fuses
  3 target layers' hidden states (3h -> h).
- MTP: gamma sequential forwards of an eh-projection (2h -> h), one decoder layer and the full LM head.
- DFlash: one forward of ``draft_layers`` target-shaped layers over R x gamma tokens, reading in every layer the
  K/V injected from the target's context features (an fc fuses 5 target layers, 5h -> h), and the shared
  target LM head over all R x gamma tokens.
- DSpark: DFlash's block plus gamma sequential head steps over R rows: an embedding lookup, a rank-256
  projection to the vocabulary (W2: 256 x V), added to the block's logits, then sampling.
Each forward pays ``kernel_launch_s`` per kernel, and the stack's host time per drafter forward
(``draft_forward_overhead_s``); each speculative round pays the stack's host time per round once
(``spec_round_overhead_s``: the verify's bookkeeping and the draft's setup, between the target's forward and the
drafter's); the target's fixed step overhead is not charged again. Drafter weights are bf16
(EAGLE-3, DFlash and DSpark checkpoints are); the KV their layers read is at the engine's ``kv_precision``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

from simlab.hardware.base import check_method
from simlab.hardware.device import Device, RooflineParams, kv_heads_per_gpu
from simlab.hardware.moe_layout import AllToAll, MoeLayout
from simlab.hardware.precision import KV_BYTES, WEIGHT_BYTES
from simlab.hardware.specs import BF16_BYTES, ModelConfig

LAYER_KERNELS = 9  # norm, qkv, q/k-norm+rope, attention, o-proj, add+norm, gate-up, activation, down
LM_HEAD_KERNELS = 1
SAMPLING_KERNELS = 3  # softmax / top-k, sample, gather
PROJECTION_KERNELS = 1
HEAD_STEP_KERNELS = 4  # embedding lookup, rank-256 GEMM, add to the block's logits, sample
EAGLE3_FUSED_LAYERS = 3
DFLASH_FUSED_LAYERS = 5
DSPARK_HEAD_RANK = 256


@dataclass(frozen=True)
class ForwardShape:
    """What one drafter forward reads and computes on one GPU (already divided by tensor parallelism)."""

    weight_bytes: float
    kv_bytes_per_context_token: float  # KV of the drafter's own layers, per context token held
    flops_per_token: float
    attn_flops_per_query_context: float  # per (query token, context token) pair
    logit_bytes_per_request: float = 0.0
    num_allreduces: int = 0
    kernels: int = 0
    # a mixture-of-experts layer (DeepSeek's MTP module): a GPU's share of every routed expert's bytes, not in
    # ``weight_bytes``; a step reads the share its tokens route to on the busiest GPU (MoeLayout.routed_share), and
    # with data-parallel attention its tokens move by all-to-all
    routed_bytes: float = 0.0
    alltoall: Optional[AllToAll] = None
    moe_layer_overhead_s: float = 0.0
    # sliding-window layers (a DeepSeek-V4 target's MTP and drafter layers): per request, min(context,
    # window_tokens) entries of window_bytes_per_entry, each query attending them at window_flops_per_entry
    window_tokens: int = 0
    window_bytes_per_entry: float = 0.0
    window_flops_per_entry: float = 0.0

    def time_s(self, device: Device, hidden_size: int, tokens: float, num_requests: float,
               context_tokens: float, layout: Optional[MoeLayout] = None, routed_scale: float = 1.0) -> float:
        """One forward over ``tokens`` tokens of ``num_requests`` requests; an MoE layer's experts see
        ``tokens x routed_scale`` (every attention group's)."""
        queries_per_request = tokens / max(num_requests, 1.0)
        attn_flops = self.attn_flops_per_query_context * queries_per_request * context_tokens
        weight_bytes = self.weight_bytes
        extra_s = 0.0
        kv_bytes = self.kv_bytes_per_context_token * context_tokens
        if self.window_tokens:
            entries = min(context_tokens / max(num_requests, 1.0), float(self.window_tokens))
            kv_bytes += self.window_bytes_per_entry * entries * num_requests
            attn_flops += self.window_flops_per_entry * entries * tokens
        if self.routed_bytes and layout is not None:
            weight_bytes += self.routed_bytes * float(layout.routed_share(tokens * routed_scale))
            extra_s = self.moe_layer_overhead_s
            if self.alltoall is not None:
                extra_s += self.alltoall.layer_s(tokens / device.tp)
        return device.forward_parts_s(weight_bytes, kv_bytes,
                                      self.logit_bytes_per_request * num_requests, self.flops_per_token * tokens,
                                      attn_flops, tokens, self.num_allreduces, hidden_size, self.kernels) + extra_s


class RooflineDrafter:
    """Drafter seconds per engine step for each method, on a :class:`Device`. A ``draft_model`` arm's copy holds
    the small model's forwards (:func:`simlab.hardware.other_drafters.with_draft_model`)."""

    draft_model_step: Optional[ForwardShape] = None
    draft_model_prefill: Optional[ForwardShape] = None

    def __init__(self, model: ModelConfig, device: Device, params: RooflineParams,
                 layout: Optional[MoeLayout] = None, alltoall: Optional[AllToAll] = None) -> None:
        """``layout`` and ``alltoall``: the replica's (the target's own; an MoE MTP layer's tokens move by
        ``alltoall`` when the layout has data-parallel attention)."""
        self.model, self.device, self.params = model, device, params
        self.layout = layout = layout or MoeLayout(device.tp)
        tp = device.tp
        h = model.hidden_size
        qkv_width = (model.num_heads + 2 * model.num_kv_heads) * model.head_dim
        layer_matmul = model.attention_params_per_layer + model.mlp_params_per_layer
        kv_bytes = model.kv_bytes_per_token(kv_heads_per_gpu(model, tp), KV_BYTES[params.kv_precision])
        kv_per_layer = kv_bytes / model.num_layers
        attn_per_layer = 1.0 * model.attention_flops_per_pair / tp
        window_tokens, window_entry, window_flops = 0, 0.0, 0.0
        if model.compressed is not None:  # every drafter layer attends a sliding window (as V4's MTP layer does)
            window_tokens = model.compressed.window_tokens
            window_entry = model.kv_entry_bytes(KV_BYTES[params.kv_precision])[0]
            window_flops, kv_per_layer, attn_per_layer = attn_per_layer, 0.0, 0.0

        def shape(matmul_params: float, extra_params: float, layers: int, kernels: int, **kw: float) -> ForwardShape:
            return ForwardShape(
                weight_bytes=(matmul_params + extra_params) * BF16_BYTES / tp,
                kv_bytes_per_context_token=layers * kv_per_layer,
                flops_per_token=2.0 * matmul_params / tp,
                attn_flops_per_query_context=layers * attn_per_layer,
                num_allreduces=2 * layers,
                kernels=kernels,
                window_tokens=window_tokens if layers else 0,
                window_bytes_per_entry=layers * window_entry,
                window_flops_per_entry=layers * window_flops,
                **kw,  # type: ignore[arg-type]
            )

        norms = model.norm_params_per_layer
        ar_kernels = LAYER_KERNELS + LM_HEAD_KERNELS + SAMPLING_KERNELS
        eagle3_matmul = layer_matmul + h * qkv_width + params.eagle3_draft_vocab * h
        self.eagle3_step = shape(eagle3_matmul, norms, 1, ar_kernels)
        self.eagle3_fuse = shape(EAGLE3_FUSED_LAYERS * h * h, 0.0, 0, PROJECTION_KERNELS)
        mtp_matmul = 2 * h * h + layer_matmul + model.lm_head_params
        self.mtp_step = shape(mtp_matmul, norms, 1, ar_kernels + PROJECTION_KERNELS)
        if model.is_moe or params.precision != "bf16":
            # the model's own MTP layer: its matmuls in the target's precision (the LM head stays bf16) and, for a
            # mixture of experts, one MoE layer reading the experts its tokens route to over the experts' holders
            routed = model.num_experts * model.expert_params if model.is_moe else 0
            chosen = model.experts_per_token * model.expert_params if model.is_moe else 0
            body = 2 * h * h + layer_matmul - chosen
            bytes_per_param = WEIGHT_BYTES[params.precision]
            alltoall = alltoall if layout.uses_alltoall else None
            self.mtp_step = replace(
                self.mtp_step,
                weight_bytes=(body * bytes_per_param + (model.lm_head_params + norms) * BF16_BYTES) / tp,
                routed_bytes=routed * WEIGHT_BYTES[params.expert_format] / layout.expert_holders,
                num_allreduces=1 if alltoall else self.mtp_step.num_allreduces,
                alltoall=alltoall, moe_layer_overhead_s=params.moe_layer_s(h))
        layers = params.draft_layers
        block_matmul = layers * layer_matmul + DFLASH_FUSED_LAYERS * h * h + model.lm_head_params
        self.parallel_block = shape(block_matmul, layers * norms, layers,
                                    layers * LAYER_KERNELS + PROJECTION_KERNELS + LM_HEAD_KERNELS + SAMPLING_KERNELS)
        # the forwards that build a drafter's own KV over a prompt (disaggregation's draft_kv: recompute): its
        # layers and input projections over every prompt token, no LM head and no sampling
        self.prefill_shapes = {
            "eagle3": shape(layer_matmul + h * qkv_width + EAGLE3_FUSED_LAYERS * h * h, norms, 1,
                            LAYER_KERNELS + 2 * PROJECTION_KERNELS),
            "mtp": shape(2 * h * h + layer_matmul, norms, 1, LAYER_KERNELS + PROJECTION_KERNELS),
            "dflash": shape(layers * layer_matmul + DFLASH_FUSED_LAYERS * h * h, layers * norms, layers,
                            layers * LAYER_KERNELS + PROJECTION_KERNELS),
        }
        self.prefill_shapes["dspark"] = self.prefill_shapes["dflash"]
        head_params = DSPARK_HEAD_RANK * model.vocab_size
        self.head_step = ForwardShape(
            weight_bytes=head_params * BF16_BYTES / tp,
            kv_bytes_per_context_token=0.0,
            flops_per_token=2.0 * head_params / tp,
            attn_flops_per_query_context=0.0,
            logit_bytes_per_request=model.vocab_size * BF16_BYTES / tp,
            kernels=HEAD_STEP_KERNELS,
        )

    def _time(self, shape: ForwardShape, tokens: float, num_requests: float, context_tokens: float,
              routed_scale: float = 1.0) -> float:
        return shape.time_s(self.device, self.model.hidden_size, tokens, num_requests, context_tokens, self.layout,
                            routed_scale)

    def autoregressive_step_s(self, method: str, num_requests: float, context_tokens: float = 0.0,
                              routed_scale: float = 1.0) -> float:
        """One sequential drafter forward (eagle3 or mtp) for ``num_requests`` requests."""
        step = self.eagle3_step if method == "eagle3" else self.mtp_step
        return self._time(step, num_requests, num_requests, context_tokens, routed_scale)

    def autoregressive_round_s(self, method: str, num_requests: float) -> float:
        """Once-per-round work of an autoregressive drafter (EAGLE-3's feature fusion; none for MTP)."""
        return self._time(self.eagle3_fuse, num_requests, num_requests, 0.0) if method == "eagle3" else 0.0

    def parallel_block_s(self, block_tokens: float, num_requests: float, context_tokens: float = 0.0) -> float:
        """One DFlash/DSpark block forward over ``block_tokens`` (= requests x gamma) tokens."""
        return self._time(self.parallel_block, block_tokens, num_requests, context_tokens)

    def head_step_s(self, num_requests: float) -> float:
        """One DSpark sequential-head position for ``num_requests`` rows."""
        return self._time(self.head_step, num_requests, num_requests, 0.0)

    def tree_draft_s(self, method: str, depth: int, topk: int, num_requests: float, context_tokens: float = 0.0,
                     routed_scale: float = 1.0) -> float:
        """One draft tree's round: the fusion, a forward over the R roots, ``depth - 1`` over R x topk frontier
        nodes (each attends its request's context), and the host time of each forward."""
        if num_requests <= 0 or depth <= 0:
            return 0.0
        r, c = float(num_requests), float(context_tokens)
        step = self.eagle3_step if method == "eagle3" else self.mtp_step
        frontier = (depth - 1) * self._time(step, r * topk, r, c, routed_scale) if depth > 1 else 0.0
        return (self.autoregressive_round_s(method, r) + self._time(step, r, r, c, routed_scale) + frontier
                + depth * self.params.draft_forward_overhead_s + self.params.spec_round_overhead_s)

    def _shapes(self, method: str) -> dict:
        if method == "draft_model" and self.draft_model_prefill is not None:
            return {"draft_model": self.draft_model_prefill}
        return self.prefill_shapes

    def kv_bytes_per_token(self, method: str) -> float:
        """Bytes per context token of the drafter's own KV on one GPU (0 without a drafter or for a lookup)."""
        shape = self._shapes(method).get(method)
        return shape.kv_bytes_per_context_token if shape is not None else 0.0

    def prefill_s(self, method: str, tokens: int) -> float:
        """Seconds to build the drafter's KV over a prompt of ``tokens`` tokens (its layers over every token,
        causal attention) plus one drafter forward's host time; 0 without a drafter or for a lookup."""
        shape = self._shapes(method).get(method)
        if shape is None or tokens <= 0:
            check_method(method)
            return 0.0
        t = float(tokens)
        return self._time(shape, t, 1.0, t / 2.0) + self.params.draft_forward_overhead_s

    def draft_s(self, method: str, gamma: int, num_requests: float, context_tokens: float = 0.0,
                routed_scale: float = 1.0) -> float:
        """Drafter seconds per step: see the module docstring for each method's shape. ``routed_scale``: the
        replica's requests per request of this attention group (an MoE MTP layer's experts see them all)."""
        if method == "none" or gamma <= 0 or num_requests <= 0:
            check_method(method)
            return 0.0
        r, c = float(num_requests), float(context_tokens)
        host = self.params.draft_forward_overhead_s  # per drafter forward the engine launches
        round_s = self.params.spec_round_overhead_s  # once per speculative round
        if method in ("eagle3", "mtp"):
            return (gamma * self.autoregressive_step_s(method, r, c, routed_scale)
                    + self.autoregressive_round_s(method, r)
                    + gamma * host + round_s)
        if method == "dflash":
            return self.parallel_block_s(r * gamma, r, c) + host + round_s
        if method == "dspark":
            return self.parallel_block_s(r * gamma, r, c) + gamma * self.head_step_s(r) + host + round_s
        if method in ("ngram", "suffix"):
            from simlab.hardware.lookup_cost import lookup_s

            return lookup_s(method, gamma, r) + round_s
        if method == "draft_model":
            if self.draft_model_step is None:
                raise ValueError("a draft_model arm's cost model prices its small model "
                                 "(simlab.hardware.other_drafters.with_draft_model)")
            return gamma * (self._time(self.draft_model_step, r, r, c) + host) + round_s
        check_method(method)
        return 0.0
