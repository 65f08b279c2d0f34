"""GPU datasheet figures and public model shapes: the data a roofline is built from.

Sources are cited in docs/hardware.md. Memory sizes are datasheet gigabytes read as GiB (2**30 bytes): HBM
stacks come in binary sizes and the driver reports a little less than that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from simlab.common.errors import InputError
from simlab.hardware.compressed_attention import CompressedAttention

GIB = 2**30
BF16_BYTES = 2


@dataclass(frozen=True)
class GpuSpec:
    """One GPU's peak figures (dense tensor-core FLOP/s, no sparsity; None where it has no such tensor cores)."""

    name: str
    hbm_bytes_per_s: float
    bf16_flop_per_s: float
    memory_bytes: int
    nvlink_bytes_per_s: float  # per direction: half the datasheet's bidirectional figure
    description: str
    fp8_flop_per_s: Optional[float] = None
    fp4_flop_per_s: Optional[float] = None


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

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

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
        return self.num_layers * self.layer_params + self.hidden_size + embedding + untied_head

    @property
    def read_params(self) -> int:
        """Parameters read from HBM by one decode forward: the layers, the final norm and the LM head (for a
        mixture of experts, all but the routed experts, which :func:`expected_experts` prices).

        The input embedding is a row lookup, not a full read."""
        if self.is_moe:
            return (self.always_read_matmul_params + self.num_layers * self.norm_params_per_layer + self.hidden_size
                    + self.lm_head_params)
        return self.num_layers * self.layer_params + self.hidden_size + self.lm_head_params

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
            return self.num_layers * (self.kv_lora_rank + self.qk_rope_head_dim) * bytes_per_element
        heads = self.num_kv_heads if kv_heads is None else kv_heads
        return 2 * self.num_layers * heads * self.head_dim * bytes_per_element

    def kv_entry_bytes(self, bytes_per_element: float) -> tuple[float, float]:
        """Compressed attention: the bytes of one KV entry and of one indexer key."""
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
        return 1.0 * self.num_layers * self.attention_flops_per_pair

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


MOE_AND_MLA_FIELDS = ("num_experts", "experts_per_token", "moe_intermediate_size", "num_shared_experts",
                      "num_dense_layers", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "v_head_dim",
                      "compressed")


def model_fields(model: ModelConfig) -> dict:
    """A model's config as a mapping, without the mixture-of-experts and MLA fields a dense GQA model leaves 0."""
    from dataclasses import asdict

    return {k: v for k, v in asdict(model).items() if not (k in MOE_AND_MLA_FIELDS and v in (0, None))}


def expected_experts(tokens, num_experts: int, experts_per_token: int):
    """The expected number of distinct experts ``tokens`` tokens route to in one MoE layer, each choosing
    ``experts_per_token`` of ``num_experts`` uniformly and independently: ``E (1 - (1 - k/E)^B)`` (an expert is
    missed by one token with probability ``1 - k/E``). One token: exactly k; many: all E. Works on arrays."""
    import numpy as np

    miss = 1.0 - experts_per_token / num_experts
    return num_experts * (1.0 - np.power(miss, np.maximum(tokens, 0.0)))


GPUS: dict[str, GpuSpec] = {
    spec.name: spec
    for spec in (
        GpuSpec("a100-80g", 2.039e12, 312e12, 80 * GIB, 300e9, "NVIDIA A100 80GB SXM (HBM2e)"),
        GpuSpec("h100-sxm", 3.35e12, 989e12, 80 * GIB, 450e9, "NVIDIA H100 SXM5 80GB (HBM3)", fp8_flop_per_s=1979e12),
        GpuSpec("h200", 4.8e12, 989e12, 141 * GIB, 450e9, "NVIDIA H200 SXM 141GB (HBM3e)", fp8_flop_per_s=1979e12),
        GpuSpec("b200", 8.0e12, 2.25e15, 180 * GIB, 900e9, "NVIDIA B200 180GB (HBM3e), HGX B200 figures",
                fp8_flop_per_s=4.5e15, fp4_flop_per_s=9.0e15),
    )
}

MODELS: dict[str, ModelConfig] = {
    cfg.name: cfg
    for cfg in (
        ModelConfig("qwen3-4b", "Qwen/Qwen3-4B", 36, 2560, 32, 8, 128, 9728, 151936, True, True),
        ModelConfig("qwen3-8b", "Qwen/Qwen3-8B", 36, 4096, 32, 8, 128, 12288, 151936, False, True),
        ModelConfig("qwen3-14b", "Qwen/Qwen3-14B", 40, 5120, 40, 8, 128, 17408, 151936, False, True),
        ModelConfig("qwen3-32b", "Qwen/Qwen3-32B", 64, 5120, 64, 8, 128, 25600, 151936, False, True),
        ModelConfig("llama-3.1-8b", "meta-llama/Llama-3.1-8B", 32, 4096, 32, 8, 128, 14336, 128256, False, False),
        ModelConfig("llama-3-70b", "meta-llama/Meta-Llama-3-70B", 80, 8192, 64, 8, 128, 28672, 128256, False, False),
        # mixtures of experts (config.json of each: moe_intermediate_size, num_experts, num_experts_per_tok, ...)
        ModelConfig("qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B", 48, 2048, 32, 4, 128, 6144, 151936, False, True,
                    num_experts=128, experts_per_token=8, moe_intermediate_size=768),
        ModelConfig("qwen3-235b-a22b", "Qwen/Qwen3-235B-A22B", 94, 4096, 64, 4, 128, 12288, 151936, False, True,
                    num_experts=128, experts_per_token=8, moe_intermediate_size=1536),
        # DeepSeek-V3 (and R1): MLA (q_lora 1536, kv_lora 512, qk nope 128 + rope 64, v 128), 3 dense layers of
        # 18432, then 256 routed experts of 2048 (8 a token) and one shared; head_dim is MLA's qk_nope_head_dim
        ModelConfig("deepseek-v3", "deepseek-ai/DeepSeek-V3", 61, 7168, 128, 128, 128, 18432, 129280, False, False,
                    num_experts=256, experts_per_token=8, moe_intermediate_size=2048, num_shared_experts=1,
                    num_dense_layers=3, kv_lora_rank=512, q_lora_rank=1536, qk_rope_head_dim=64, v_head_dim=128),
        # DeepSeek-V4 (docs/research/deepseek-v4-configs.md): one shared 512-wide KV head (448 + 64 rope), a
        # 128-token window in every layer, CSA (ratio 4, indexer top-k) and HCA (ratio 128) layers; no dense
        # layers (the first 3 route by token hash); intermediate_size is SGLang's default (no layer uses it)
        ModelConfig("deepseek-v4-flash", "deepseek-ai/DeepSeek-V4-Flash", 43, 4096, 64, 1, 512, 2048, 129280, False,
                    False, num_experts=256, experts_per_token=6, moe_intermediate_size=2048, num_shared_experts=1,
                    q_lora_rank=1024, qk_rope_head_dim=64,
                    compressed=CompressedAttention(num_csa_layers=21, num_hca_layers=20, index_topk=512,
                                                   o_groups=8)),
        ModelConfig("deepseek-v4-pro", "deepseek-ai/DeepSeek-V4-Pro", 61, 7168, 128, 1, 512, 3072, 129280, False,
                    False, num_experts=384, experts_per_token=6, moe_intermediate_size=3072, num_shared_experts=1,
                    q_lora_rank=1536, qk_rope_head_dim=64,
                    compressed=CompressedAttention(num_csa_layers=30, num_hca_layers=31, index_topk=1024,
                                                   o_groups=16)),
    )
}

_GPU_ALIASES = {"a100": "a100-80g", "a100-80gb": "a100-80g", "h100": "h100-sxm", "h100-sxm5": "h100-sxm",
                "h200-sxm": "h200"}


def get_gpu(name: str, *, file: str | None = None, field: str = "hardware.gpu") -> GpuSpec:
    """The spec of GPU ``name`` (case-insensitive; a few aliases such as ``h100``)."""
    key = name.strip().lower()
    key = _GPU_ALIASES.get(key, key)
    if key not in GPUS:
        raise InputError("unknown GPU", file=file, field=field, value=name, valid=", ".join(GPUS))
    return GPUS[key]


def get_model(name: str, *, file: str | None = None, field: str = "hardware.model") -> ModelConfig:
    """The config of model ``name``: a short name (``qwen3-8b``) or its Hugging Face id, case-insensitive."""
    key = name.strip().lower()
    by_hf_id = {cfg.hf_id.lower(): cfg.name for cfg in MODELS.values()}
    key = by_hf_id.get(key, key)
    if key not in MODELS:
        raise InputError("unknown model", file=file, field=field, value=name, valid=", ".join(MODELS))
    return MODELS[key]
