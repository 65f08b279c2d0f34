"""A model is its config: a Hugging Face ``config.json`` read into layers by kind, parameter counts and memory
(``simlab profiles model``), and into the shape the model-level roofline prices.

What a config declares (docs/models.md): dense GQA/MQA attention, mixtures of experts (routed, shared,
first-k-dense and sparse-step layouts), MLA (with DeepSeek-V3.2's indexer), sliding-window and chunked layers
(``layer_types``, ``sliding_window``, gpt-oss's sinks), hybrid linear attention (Gated DeltaNet: Qwen3-Next,
Qwen3.5), Mamba-2 layers (Nemotron-H's ``hybrid_override_pattern``), MTP layers, multimodal wrappers
(``text_config``) and the quantization it names. A field a count needs and the config lacks is an
:class:`~simlab.common.errors.InputError` naming it.

Counts follow the publishers': ``params_total`` is every parameter of the language model (MTP layers apart, as
DeepSeek counts V3's 671 B), ``params_active`` what one token's forward multiplies by, the output projection
included and the input embedding not (as OpenAI counts gpt-oss's 5.1 B).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from simlab.common.errors import InputError
from simlab.hardware.hf_config import CHUNKED, FULL, LINEAR, MAMBA, MLA, SLIDING, ConfigReader, read_config_file
from simlab.hardware.hf_layers import (config_model_type, layer_counts, layer_kinds, mlp_kinds, mtp_params,
                                       num_experts, quantization, routed_expert_params, shared_expert_count,
                                       state_flops_per_token)
from simlab.hardware.hybrid_layers import HybridLayers
from simlab.hardware.model_shape import ModelConfig


@dataclass(frozen=True)
class ModelDescription:
    """What ``simlab profiles model`` prints."""

    name: str
    source: str
    model_type: str
    layers: dict[str, int]
    mlp_layers: dict[str, int]
    params_total: int
    params_active: int
    params_embedding: int
    params_mtp: int
    weight_bytes: float
    kv_bytes_per_token: int
    state_bytes_per_request: int
    quantization: str
    notes: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source, "model_type": self.model_type,
                "params_total": self.params_total, "params_active": self.params_active,
                "params_embedding": self.params_embedding, "params_mtp": self.params_mtp,
                "weight_bytes": self.weight_bytes, "kv_bytes_per_token": self.kv_bytes_per_token,
                "state_bytes_per_request": self.state_bytes_per_request, "layers": dict(self.layers),
                "mlp_layers": dict(self.mlp_layers), "quantization": self.quantization, "notes": list(self.notes)}


def describe_config(data: dict, *, file: str, name: Optional[str] = None) -> ModelDescription:
    """Layers by kind, parameter counts and memory of the model a config declares."""
    cfg = ConfigReader(data, file)
    hidden = cfg.integer("hidden_size", "d_model")
    vocab = cfg.integer("vocab_size")
    kinds = layer_kinds(cfg)
    mlps = mlp_kinds(cfg, len(kinds))
    total = active = kv = state = 0
    for kind, mlp in zip(kinds, mlps):
        counts = layer_counts(cfg, kind, mlp)
        total += counts.mixer_params + counts.mlp_params
        active += counts.mixer_params + counts.mlp_active_params
        kv += counts.kv_bytes_per_token
        state += counts.state_bytes_per_request
    embedding = vocab * hidden
    tied = bool(cfg.get("tie_word_embeddings", cfg.outer.get("tie_word_embeddings", False)))
    head = 0 if tied else vocab * hidden
    total += embedding + head + hidden  # the final norm
    active += vocab * hidden + hidden  # the output projection (tied or not) and the final norm
    quant_name, weight_bytes = quantization(cfg, total, embedding + head, routed_expert_params(cfg, mlps))
    layers: dict[str, int] = {}
    for kind in kinds:
        if kind != "none":  # Nemotron-H's MLP-only blocks
            layers[kind] = layers.get(kind, 0) + 1
    mlp_layers: dict[str, int] = {}
    for mlp in mlps:
        if mlp != "none":
            mlp_layers[mlp] = mlp_layers.get(mlp, 0) + 1
    mtp, num_mtp = mtp_params(cfg, hidden)
    if num_mtp:
        layers["mtp"] = num_mtp
    notes = []
    if cfg.prefix:
        notes.append("read from text_config (a multimodal wrapper); the vision tower is not counted")
    if cfg.has("index_topk"):
        notes.append(f"sparse attention indexer: each query attends its top {cfg.get('index_topk')} tokens")
    return ModelDescription(
        name=name or str(data.get("_name_or_path") or (Path(file).parent.name if Path(file).name == "config.json"
                                                       else Path(file).stem)), source=file,
        model_type=str(cfg.get("model_type", data.get("model_type", "?"))), layers=layers, mlp_layers=mlp_layers,
        params_total=total, params_active=active, params_embedding=embedding, params_mtp=mtp,
        weight_bytes=weight_bytes, kv_bytes_per_token=kv, state_bytes_per_request=state, quantization=quant_name,
        notes=tuple(notes))


def describe_file(path: Path) -> ModelDescription:
    return describe_config(read_config_file(path), file=str(path))


ROOFLINE_KINDS = (FULL, MLA)


def roofline_shape(data: dict, *, file: str, name: str):
    """The :class:`~simlab.hardware.model_shape.ModelConfig` the model-level roofline prices: full-attention (GQA/MQA)
    or MLA layers, with sliding-window, chunked and linear-attention layers beside full-attention ones as
    :class:`~simlab.hardware.hybrid_layers.HybridLayers`, and a dense MLP or a mixture of experts (dense and MoE
    layers by count, interleaved or not). Nemotron-H's
    Mamba and MLP blocks, and MLA mixed with other kinds, are described by ``simlab profiles model`` but not
    priced: an :class:`InputError` naming the field that declares them."""
    cfg = ConfigReader(data, file)
    kinds = layer_kinds(cfg)
    unpriced = (cfg.has("hybrid_override_pattern") or cfg.has("layers_block_type")
                or (MLA in kinds and any(k != MLA for k in kinds)))
    if unpriced or (kinds and FULL not in kinds and MLA not in kinds):
        fields = ("hybrid_override_pattern", "layers_block_type", "layer_types", "full_attention_interval",
                  "sliding_window_pattern", "sliding_window", "kv_lora_rank")
        declared = next((f for f in fields if cfg.has(f)), "num_hidden_layers")
        counts = ", ".join(f"{kinds.count(k)} {k}" for k in sorted(set(kinds) - {"none"}))
        raise InputError(f"the roofline cannot price this layer mix ({counts}): it prices full-attention or MLA "
                         "layers, with window and linear-attention layers beside full attention "
                         "(`simlab profiles model` describes it; see docs/models.md)", file=file,
                         field=cfg.prefix + declared, value=str(cfg.get(declared))[:60],
                         valid="a config of full-attention or MLA layers, or a hybrid of full attention with "
                               "sliding-window, chunked or linear-attention layers")
    hybrid = hybrid_layers(cfg, kinds) if any(k not in ROOFLINE_KINDS for k in kinds) else None
    mlps = mlp_kinds(cfg, len(kinds))
    hidden = cfg.integer("hidden_size", "d_model")
    heads = cfg.integer("num_attention_heads")
    experts = num_experts(cfg)
    # the roofline prices layers by count, not by position: dense layers interleaved with MoE ones (Llama 4,
    # decoder_sparse_step, mlp_only_layers) cost what as many dense layers first would
    num_dense = mlps.count("dense") if experts else 0
    moe: dict[str, int] = {}
    if experts:
        width = cfg.integer("moe_intermediate_size", "intermediate_size")
        shared = shared_expert_count(cfg)
        if cfg.get("shared_expert_intermediate_size"):
            shared += cfg.integer("shared_expert_intermediate_size") // width
        moe = dict(num_experts=experts, experts_per_token=cfg.integer("num_experts_per_tok", "experts_per_token",
                                                                     "num_experts_per_token", "top_k_experts"),
                   moe_intermediate_size=width, num_shared_experts=shared, num_dense_layers=num_dense)
    mla: dict[str, int] = {}
    if cfg.has("kv_lora_rank"):
        mla = dict(kv_lora_rank=cfg.integer("kv_lora_rank"), q_lora_rank=cfg.integer("q_lora_rank", default=0,
                                                                                      minimum=0),
                   qk_rope_head_dim=cfg.integer("qk_rope_head_dim"), v_head_dim=cfg.integer("v_head_dim"))
        head_dim = cfg.integer("qk_nope_head_dim")
    else:
        head_dim = cfg.integer("head_dim", default=hidden // heads)
    return ModelConfig(
        name=name, hf_id=str(data.get("_name_or_path") or name), num_layers=len(kinds), hidden_size=hidden,
        num_heads=heads, num_kv_heads=cfg.integer("num_key_value_heads", default=heads), head_dim=head_dim,
        intermediate_size=cfg.integer("intermediate_size_mlp", "intermediate_size",
                                      default=moe.get("moe_intermediate_size", 0) or None),
        vocab_size=cfg.integer("vocab_size"),
        tied_embeddings=bool(cfg.get("tie_word_embeddings", data.get("tie_word_embeddings", False))),
        qk_norm=config_model_type(cfg).startswith("qwen3"), hybrid=hybrid, **moe, **mla)


def hybrid_layers(cfg: ConfigReader, kinds: list[str]) -> HybridLayers:
    """The window and state layers of a config, as the roofline prices them beside its full-attention layers."""
    hidden = cfg.integer("hidden_size", "d_model")
    heads = cfg.integer("num_attention_heads")
    head_dim = cfg.integer("head_dim", default=hidden // heads)
    qk_norm = config_model_type(cfg).startswith("qwen3")
    norms = 2 * hidden + (2 * head_dim if qk_norm else 0)  # what ModelConfig counts per layer beside the mixer
    window_kinds = [k for k in kinds if k in (SLIDING, CHUNKED)]
    state_kinds = [k for k in kinds if k in (LINEAR, MAMBA)]
    window = 0
    if window_kinds:
        window = cfg.integer("sliding_window") if SLIDING in window_kinds else cfg.integer("attention_chunk_size")
    state_bytes = sum(layer_counts(cfg, k, "none").state_bytes_per_request for k in state_kinds)
    return HybridLayers(
        num_full_layers=kinds.count(FULL), num_window_layers=len(window_kinds), window_tokens=window,
        num_state_layers=len(state_kinds), state_bytes=state_bytes,
        state_flops_per_token=float(sum(state_flops_per_token(cfg, k) for k in state_kinds)),
        mixer_params=sum(layer_counts(cfg, k, "none").mixer_params - norms for k in kinds))


def catalogue_config(model) -> dict:
    """A catalogue :class:`~simlab.hardware.specs.ModelConfig` written as the config.json fields it came from."""
    if model.compressed is not None:
        raise InputError("this model's compressed attention is priced by its own model, not read from a config",
                         field="MODEL", value=model.name, valid="a model without compressed attention, or a path")
    data: dict[str, Any] = {
        "_name_or_path": model.hf_id, "model_type": "qwen3" if model.qk_norm else "llama",
        "hidden_size": model.hidden_size, "intermediate_size": model.intermediate_size,
        "num_hidden_layers": model.num_layers, "num_attention_heads": model.num_heads,
        "num_key_value_heads": model.num_kv_heads, "head_dim": model.head_dim, "vocab_size": model.vocab_size,
        "tie_word_embeddings": model.tied_embeddings}
    if model.is_moe:
        data.update(num_experts=model.num_experts, num_experts_per_tok=model.experts_per_token,
                    moe_intermediate_size=model.moe_intermediate_size, n_shared_experts=model.num_shared_experts,
                    first_k_dense_replace=model.num_dense_layers)
    if model.is_mla:
        data.update(model_type="deepseek_v3", kv_lora_rank=model.kv_lora_rank, q_lora_rank=model.q_lora_rank,
                    qk_rope_head_dim=model.qk_rope_head_dim, qk_nope_head_dim=model.head_dim,
                    v_head_dim=model.v_head_dim)
    return data
