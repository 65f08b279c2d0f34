"""A decoder-only transformer's shape as the model-level roofline prices it (one dataclass: simlab.hardware.specs
holds the catalogue of them, simlab.hardware.model_description builds one from a config.json)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from simlab.hardware.compressed_attention import CompressedAttention
from simlab.hardware.hybrid_layers import HybridLayers

BF16_BYTES = 2


@dataclass(frozen=True)
class ModelConfig:
    """A decoder-only transformer's shape, as in its public ``config.json`` (bf16 weights and KV cache)."""

    name: str
    hf_id: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tied_embeddings: bool
    qk_norm: bool  # per-head RMSNorm on q and k (Qwen3)
    # a mixture of experts (0 experts: dense): routed experts of moe_intermediate_size, experts_per_token of them
    # per token, num_shared_experts always on; the first num_dense_layers layers keep a dense MLP
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    num_shared_experts: int = 0
    num_dense_layers: int = 0
    # multi-head latent attention (DeepSeek): q and KV through low-rank latents; the KV cache holds the latent
    kv_lora_rank: int = 0  # 0: grouped-query attention
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    # DeepSeek-V4's sliding-window + compressed attention (simlab.hardware.compressed_attention): one shared KV
    # head of head_dim (its last qk_rope_head_dim dims rotary), low-rank q through q_lora_rank
    compressed: Optional[CompressedAttention] = None
    # a config's sliding-window, linear-attention and Mamba layers (simlab.hardware.hybrid_layers); None: every
    # layer full attention (or MLA)
    hybrid: Optional[HybridLayers] = None

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def num_kv_layers(self) -> int:
        """The layers whose KV cache grows with context (all but a hybrid model's window and state layers)."""
        return self.hybrid.num_full_layers if self.hybrid is not None else self.num_layers

    @property
    def capped_attention(self):
        """What the roofline prices per request beyond the KV that grows with context: DeepSeek-V4's compressed
        attention or a hybrid model's windows and states (None for neither)."""
        return self.compressed if self.compressed is not None else self.hybrid

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def attention_params_per_layer(self) -> int:
        """q, k, v and o projections (no biases); with MLA the down- and up-projections of q and of the KV latent."""
        if self.compressed is not None:
            return self.compressed.attention_params_per_layer(self.hidden_size, self.num_heads, self.head_dim,
                                                              self.q_lora_rank)
        if self.is_mla:
            qk = self.head_dim + self.qk_rope_head_dim  # head_dim is the no-rope part of q and k
            q = (self.hidden_size * self.q_lora_rank + self.q_lora_rank * self.num_heads * qk if self.q_lora_rank
                 else self.hidden_size * self.num_heads * qk)
            kv = (self.hidden_size * (self.kv_lora_rank + self.qk_rope_head_dim)
                  + self.kv_lora_rank * self.num_heads * (self.head_dim + self.v_head_dim))
            return q + kv + self.num_heads * self.v_head_dim * self.hidden_size
        q_dim = self.num_heads * self.head_dim
        kv_dim = self.num_kv_heads * self.head_dim
        return self.hidden_size * (q_dim + 2 * kv_dim) + q_dim * self.hidden_size

    @property
    def attention_params(self) -> int:
        """Every layer's attention matmuls (with compressed attention, its compressors and indexers too)."""
        if self.hybrid is not None:
            return self.hybrid.mixer_params
        total = self.num_layers * self.attention_params_per_layer
        if self.compressed is not None:
            total += self.compressed.compressor_params(self.hidden_size, self.head_dim, self.q_lora_rank)
        return total

    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.num_dense_layers if self.is_moe else 0

    @property
    def expert_params(self) -> int:
        """One routed expert's gate, up and down projections."""
        return 3 * self.hidden_size * self.moe_intermediate_size

    @property
    def routed_expert_params(self) -> int:
        """Every routed expert of every MoE layer: what a decode step reads only in part (the experts its tokens
        route to)."""
        return self.num_moe_layers * self.num_experts * self.expert_params

    @property
    def active_routed_params(self) -> int:
        """The routed experts' parameters one token multiplies through (experts_per_token per MoE layer)."""
        return self.num_moe_layers * self.experts_per_token * self.expert_params

    @property
    def mlp_params_per_layer(self) -> int:
        """Gated MLP: gate, up and down projections. For a mixture of experts, the parameters one token uses in an
        MoE layer (router, shared and chosen experts): a dense-equivalent layer, as the drafters' shapes take it."""
        if self.is_moe:
            return (self.hidden_size * self.num_experts
                    + (self.num_shared_experts + self.experts_per_token) * self.expert_params)
        return 3 * self.hidden_size * self.intermediate_size

    @property
    def active_intermediate_size(self) -> int:
        """The MLP width one token's activation runs over (MoE: its shared and chosen experts)."""
        if self.is_moe:
            return (self.num_shared_experts + self.experts_per_token) * self.moe_intermediate_size
        return self.intermediate_size

    @property
    def norm_params_per_layer(self) -> int:
        if self.compressed is not None:
            return self.compressed.small_params_per_layer(self.hidden_size, self.num_heads, self.head_dim,
                                                          self.q_lora_rank)
        if self.is_mla:
            return 2 * self.hidden_size + self.kv_lora_rank + self.q_lora_rank
        return 2 * self.hidden_size + (2 * self.head_dim if self.qk_norm else 0)

    @property
    def layer_params(self) -> int:
        """A dense layer's parameters (for a mixture of experts, see :attr:`total_params`)."""
        return (self.attention_params_per_layer + 3 * self.hidden_size * self.intermediate_size
                + self.norm_params_per_layer)

    @property
    def always_read_matmul_params(self) -> int:
        """Matmul parameters every decode step reads whatever its tokens: attention, dense MLPs, routers and
        shared experts (dense: :attr:`body_matmul_params`)."""
        if not self.is_moe:
            return self.body_matmul_params
        moe_fixed = self.hidden_size * self.num_experts + self.num_shared_experts * self.expert_params
        return (self.attention_params
                + self.num_dense_layers * 3 * self.hidden_size * self.intermediate_size
                + self.num_moe_layers * moe_fixed)

    @property
    def _dense_layers_params(self) -> int:
        """Every layer of a dense model (a hybrid's mixers as they are, not as full attention)."""
        if self.hybrid is not None:
            return self.attention_params + self.num_layers * (self.layer_params - self.attention_params_per_layer)
        return self.num_layers * self.layer_params

    @property
    def lm_head_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def total_params(self) -> int:
        """Every parameter held in memory (the embedding counted once when tied to the LM head)."""
        embedding = self.vocab_size * self.hidden_size
        untied_head = 0 if self.tied_embeddings else self.lm_head_params
        if self.is_moe:
            return (self.always_read_matmul_params + self.routed_expert_params
                    + self.num_layers * self.norm_params_per_layer + self.hidden_size + embedding + untied_head)
        return self._dense_layers_params + self.hidden_size + embedding + untied_head

    @property
    def read_params(self) -> int:
        """Parameters read from HBM by one decode forward: the layers, the final norm and the LM head (for a
        mixture of experts, all but the routed experts, which :func:`expected_experts` prices).

        The input embedding is a row lookup, not a full read."""
        if self.is_moe:
            return (self.always_read_matmul_params + self.num_layers * self.norm_params_per_layer + self.hidden_size
                    + self.lm_head_params)
        return self._dense_layers_params + self.hidden_size + self.lm_head_params

    @property
    def body_matmul_params(self) -> int:
        """Matmul parameters each token multiplies through in the decoder layers (2 FLOPs each)."""
        if self.is_moe:
            return self.always_read_matmul_params + self.active_routed_params
        return self.attention_params + self.num_layers * self.mlp_params_per_layer

    @property
    def active_params(self) -> int:
        """Parameters one token uses: its decoder-layer matmuls, the norms, the final norm and the LM head."""
        return (self.body_matmul_params + self.num_layers * self.norm_params_per_layer + self.hidden_size
                + self.lm_head_params)

    @property
    def weight_bytes(self) -> int:
        return self.total_params * BF16_BYTES

    def weight_bytes_at(self, bytes_per_matmul_weight: float, bytes_per_expert_weight: Optional[float] = None
                        ) -> float:
        """Bytes of every parameter held in memory when the decoder layers' matmul weights take
        ``bytes_per_matmul_weight`` each, the routed experts ``bytes_per_expert_weight`` (default the same), and
        the embedding, LM head and norms stay bf16."""
        matmul = self.always_read_matmul_params + self.routed_expert_params
        total = matmul * bytes_per_matmul_weight + (self.total_params - matmul) * BF16_BYTES
        if bytes_per_expert_weight is not None:
            total += self.routed_expert_params * (bytes_per_expert_weight - bytes_per_matmul_weight)
        return total

    def read_bytes_at(self, bytes_per_matmul_weight: float) -> float:
        """Bytes one decode forward always reads (:attr:`read_params`), matmul weights at
        ``bytes_per_matmul_weight``."""
        matmul = self.always_read_matmul_params
        return matmul * bytes_per_matmul_weight + (self.read_params - matmul) * BF16_BYTES

    def kv_bytes_per_token(self, kv_heads: int | None = None, bytes_per_element: float = BF16_BYTES) -> float:
        """K and V for one token in every layer: 2 * layers * kv_heads * head_dim * bytes per element (2: bf16).
        With MLA the cache holds the KV latent and the rope key: layers * (kv_lora_rank + qk_rope_head_dim).
        With compressed attention, the compressed caches (the window's fixed KV is per sequence)."""
        if self.compressed is not None:
            entry, index_entry = self.kv_entry_bytes(bytes_per_element)
            return self.compressed.stored_bytes_per_token(entry, index_entry)
        if self.is_mla:
            return self.num_kv_layers * (self.kv_lora_rank + self.qk_rope_head_dim) * bytes_per_element
        heads = self.num_kv_heads if kv_heads is None else kv_heads
        return 2 * self.num_kv_layers * heads * self.head_dim * bytes_per_element

    def kv_entry_bytes(self, bytes_per_element: float, kv_heads: int | None = None) -> tuple[float, float]:
        """Compressed attention: the bytes of one KV entry and of one indexer key. A hybrid model: one window
        layer's K and V of one token (``kv_heads`` of them, default all), and no indexer."""
        if self.hybrid is not None:
            heads = self.num_kv_heads if kv_heads is None else kv_heads
            return 2.0 * heads * self.head_dim * bytes_per_element, 0.0
        assert self.compressed is not None
        return (self.compressed.entry_bytes(self.head_dim, self.qk_rope_head_dim, bytes_per_element),
                self.compressed.index_entry_bytes(bytes_per_element))

    def kv_read_bytes_per_context_token(self, kv_heads: int | None = None,
                                        bytes_per_element: float = BF16_BYTES) -> float:
        """KV bytes a decode query reads per context token of its request, the part linear in context: all of
        the cache for GQA and MLA; for compressed attention the indexer keys and HCA entries (the window and
        CSA's selected entries are capped: :meth:`CompressedAttention.capped_entries`)."""
        if self.compressed is not None:
            entry, index_entry = self.kv_entry_bytes(bytes_per_element)
            return self.compressed.read_bytes_per_context_token(entry, index_entry)
        return self.kv_bytes_per_token(kv_heads, bytes_per_element)

    @property
    def attention_flops_per_context_token(self) -> float:
        """Attention FLOPs of one query per token of its context, summed over layers (the linear part with
        compressed attention)."""
        if self.compressed is not None:
            return self.compressed.flops_per_context_token(self.attention_flops_per_pair)
        return 1.0 * self.num_kv_layers * self.attention_flops_per_pair

    @property
    def attention_flops_per_pair(self) -> int:
        """FLOPs of one (query token, context token) pair in one layer: QK^T and PV, 2 each per element. MLA's
        decode runs in the latent (absorbed): scores over kv_lora_rank + rope dims, values over kv_lora_rank."""
        if self.is_mla:
            return 2 * self.num_heads * (2 * self.kv_lora_rank + self.qk_rope_head_dim)
        return 4 * self.num_heads * self.head_dim  # compressed attention too: K and V one 512-wide entry

    @property
    def prefill_attention_flops_per_pair(self) -> int:
        """FLOPs of one (query, context token) pair in one layer of a prefill: MLA's prefill runs as multi-head
        attention on the up-projected keys and values (qk over nope + rope dims, values over v_head_dim), not in
        the latent as its decode does; GQA as in decode."""
        if self.is_mla:
            return 2 * self.num_heads * (self.head_dim + self.qk_rope_head_dim + self.v_head_dim)
        return self.attention_flops_per_pair
