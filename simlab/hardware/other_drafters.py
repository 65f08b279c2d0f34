"""The costs of the drafters beside the trained heads (DOMAIN.md section 9, "The other drafters"; docs/roofline.md,
"Lookup drafters and draft models").

- ``ngram`` (prompt lookup) and ``suffix`` (suffix decoding) run no drafter on the GPU: a host-side lookup per
  request and round (:mod:`simlab.hardware.lookup_cost`), plus the round's host time every speculative arm pays.
- ``draft_model``: gamma sequential forwards of the small model over the round's requests, each priced as a
  forward of its own shape on the target's GPU and tensor parallelism (its weights in bf16, its KV over the
  requests' context at the engine's KV precision), plus the stack's host time per drafter forward and per round;
  on ``kind: operations`` as the small model's own operations (simlab.hardware.draft_model_operations).
"""

from __future__ import annotations

import copy
from typing import Any, Optional

from simlab.hardware.device import KV_BLOCK_TOKENS, kv_heads_per_gpu
from simlab.hardware.drafters import LAYER_KERNELS, LM_HEAD_KERNELS, SAMPLING_KERNELS, ForwardShape
from simlab.hardware.lookup_cost import LOOKUP_METHODS
from simlab.hardware.precision import KV_BYTES
from simlab.hardware.specs import BF16_BYTES, ModelConfig

def draft_model_shapes(draft: ModelConfig, tensor_parallel: int,
                       kv_precision: str) -> tuple[ForwardShape, ForwardShape]:
    """One decode forward of the small model (its layers, LM head and sampling over R tokens) and one over a prompt
    (its layers only), on one GPU of ``tensor_parallel`` (1: every GPU runs the whole model, no all-reduce)."""
    tp = tensor_parallel
    allreduces = 2 * draft.num_layers if tp > 1 else 0
    kv_bytes = draft.kv_bytes_per_token(kv_heads_per_gpu(draft, tp), KV_BYTES[kv_precision])
    layers = draft.num_layers
    body = draft.body_matmul_params
    norms = layers * draft.norm_params_per_layer + draft.hidden_size
    step = ForwardShape(
        weight_bytes=(body + draft.lm_head_params + norms) * BF16_BYTES / tp,
        kv_bytes_per_context_token=kv_bytes,
        flops_per_token=2.0 * (body + draft.lm_head_params) / tp,
        attn_flops_per_query_context=draft.attention_flops_per_context_token / tp,
        num_allreduces=allreduces,
        kernels=layers * LAYER_KERNELS + LM_HEAD_KERNELS + SAMPLING_KERNELS,
    )
    prefill = ForwardShape(
        weight_bytes=(body + norms) * BF16_BYTES / tp,
        kv_bytes_per_context_token=kv_bytes,
        flops_per_token=2.0 * body / tp,
        attn_flops_per_query_context=draft.attention_flops_per_context_token / tp,
        num_allreduces=allreduces,
        kernels=layers * LAYER_KERNELS,
    )
    return step, prefill


def draft_model_weight_bytes(draft: ModelConfig, tensor_parallel: int) -> float:
    """Bytes of the small model's weights on one GPU (bf16)."""
    return draft.total_params * BF16_BYTES / tensor_parallel


def pricing_roofline(cost: Any) -> Optional[Any]:
    """The roofline a draft model is priced on: ``cost`` itself, or the one a table was derived from (None)."""
    drafter = getattr(cost, "drafter", None)
    return cost if drafter is not None and hasattr(drafter, "draft_model_step") else source_roofline(cost)


def with_draft_model(cost: Any, draft: ModelConfig, draft_tp: Optional[int] = None,
                     roofline: Optional[Any] = None) -> Optional[Any]:
    """A copy of ``cost`` whose drafter prices ``draft_model`` as ``draft``'s forwards (its KV per token and its
    prompt forward too), and whose KV capacity gives up what the small model's weights and KV take. A table (a
    shipped profile, ``kind: operations``) prices them on the roofline it was derived from (its provenance; given
    as ``roofline`` where the caller has it); None where there is none. ``draft_tp``: the small model's tensor
    parallelism (default the target's)."""
    roofline = roofline or pricing_roofline(cost)
    tokens = cost.kv_cache_tokens() if hasattr(cost, "kv_cache_tokens") else None
    if roofline is None or not tokens:
        return None
    draft_tp = roofline.tp if draft_tp is None else draft_tp
    step, prefill = draft_model_shapes(draft, draft_tp, roofline.params.kv_precision)
    priced = copy.copy(roofline)
    priced.drafter = copy.copy(roofline.drafter)
    priced.drafter.draft_model_step, priced.drafter.draft_model_prefill = step, prefill
    # the small model's weights and its KV per token come out of the KV cache of each attention group
    budget = tokens * roofline.kv_bytes_per_token / roofline.groups - draft_model_weight_bytes(draft, draft_tp)
    per_token = roofline.kv_bytes_per_token + step.kv_bytes_per_context_token
    capacity = max(0, int(budget // per_token)) // KV_BLOCK_TOKENS * KV_BLOCK_TOKENS * roofline.groups
    if cost is roofline:
        priced._kv_cache_tokens = capacity
        copied = priced
    else:  # a table: its own verify and prefill, the roofline's drafter
        copied = copy.copy(cost)
        copied.draft_reads_context = True  # the small model reads its KV over the requests' context
        for name in ("draft_s", "draft_kernel", "draft_kv_bytes_per_token", "draft_prefill_s"):
            setattr(copied, name, getattr(priced, name))
        copied.kv_cache_tokens = lambda: capacity
    copied.draft_model_name = draft.name
    return copied


def source_roofline(table: Any) -> Optional[Any]:
    """The calibrated roofline a table was derived from (its provenance's ``source``, or the ``kv_roofline`` of a
    table that takes a roofline's KV), rebuilt with the parameters it records; None where it records none."""
    from simlab.config.hardware import RooflineHardware
    from simlab.hardware.roofline_build import build_roofline

    source = table.roofline_source() if hasattr(table, "roofline_source") else None
    if source is None or "gpu" not in source:
        return None
    parameters = source.get("parameters") or {}
    fields = {k: v for k, v in parameters.items()
              if k in RooflineHardware.model_fields and v is not None and k not in ("kind", "calibration")}
    config = RooflineHardware(kind="roofline", gpu=str(source["gpu"]), model=str(source["model"]),
                              tensor_parallel=int(source.get("tensor_parallel", 1)), **fields)
    return build_roofline(config)


def other_drafter_cost(arm: Any, index: int, cost: Any, file: Optional[str] = None) -> Any:
    """The cost model arm ``index`` (``arms[index]``) times its steps on: for a lookup drafter, ``cost`` read as a
    drafter that ignores context (its draft seconds a grid by requests); for a draft model, the roofline with the
    small model's forwards (:func:`with_draft_model`), after checking it can draft for the target (InputError
    naming the arm's field otherwise); else ``cost`` itself."""
    from simlab.common.errors import InputError
    from simlab.hardware.specs import get_model

    if arm.method in LOOKUP_METHODS:
        copied = copy.copy(cost)
        copied.draft_reads_context = False
        return copied
    if arm.method != "draft_model":
        return cost
    field = f"arms[{index}].draft_model"
    draft = get_model(arm.draft_model, file=file, field=field)
    roofline = pricing_roofline(cost)  # a table: the roofline it was derived from knows the target
    if roofline is None:
        raise InputError("a draft model is priced on a roofline, or on a profile derived from one", file=file,
                         field=field, value=arm.draft_model,
                         valid="hardware: {kind: roofline, ...}, a shipped profile or kind: operations")
    target = roofline.model
    if draft.is_moe or draft.compressed is not None or draft.hybrid is not None:
        raise InputError("a draft model is priced as a dense full-attention model", file=file, field=field,
                         value=arm.draft_model, valid="a dense model such as qwen3-0.6b or llama-3.2-1b")
    if draft.total_params >= target.total_params:
        raise InputError(f"the draft model ({draft.total_params / 1e9:.2f} B parameters) is not smaller than the "
                         f"target {target.name} ({target.total_params / 1e9:.2f} B)", file=file, field=field,
                         value=arm.draft_model, valid=f"a model smaller than {target.name}")
    if draft.vocab_size != target.vocab_size:
        raise InputError(f"the draft model's vocabulary ({draft.vocab_size}) is not the target's "
                         f"({target.vocab_size}): its tokens could not be verified", file=file, field=field,
                         value=arm.draft_model, valid=f"a model of {target.name}'s tokenizer")
    target_tp = roofline.tp
    tp = target_tp if arm.draft_tensor_parallel is None else arm.draft_tensor_parallel
    if tp not in (1, target_tp):
        raise InputError(f"vLLM runs a draft model at tensor parallelism 1 or the target's ({target_tp}) "
                         "(vllm/config/speculative.py:1530-1551 @v0.34.0)", file=file,
                         field=f"arms[{index}].draft_tensor_parallel", value=tp, valid=f"1 or {target_tp}")
    if tp > 1 and (draft.num_heads % tp or draft.num_kv_heads % tp and tp % draft.num_kv_heads):
        raise InputError(f"the draft model's {draft.num_heads} heads do not split over {tp} GPUs (vLLM runs it at "
                         "the target's tensor parallelism unless draft_tensor_parallel is 1)", file=file, field=field,
                         value=arm.draft_model,
                         valid=f"a model whose heads split {tp} ways, or draft_tensor_parallel: 1")
    priced = with_draft_model(cost, draft, tp, roofline)
    if priced is None or not priced.kv_cache_tokens():
        raise InputError(f"the draft model's weights leave no KV space beside {target.name}", file=file, field=field,
                         value=arm.draft_model, valid="a smaller draft model, or more GPUs")
    if getattr(cost, "operations_config", None) is not None:  # kind: operations: the small model's own operations
        from simlab.hardware.draft_model_operations import with_operations_draft_model

        priced = with_operations_draft_model(priced, cost, draft, tp, roofline)
    return priced
