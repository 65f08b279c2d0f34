"""GPU datasheet figures and public model shapes: the data a roofline is built from.

Sources are cited in docs/hardware.md. Memory sizes are datasheet gigabytes read as GiB (2**30 bytes): HBM
stacks come in binary sizes and the driver reports a little less than that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from simlab.common.errors import InputError

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

    @property
    def attention_params_per_layer(self) -> int:
        """q, k, v and o projections (no biases)."""
        q_dim = self.num_heads * self.head_dim
        kv_dim = self.num_kv_heads * self.head_dim
        return self.hidden_size * (q_dim + 2 * kv_dim) + q_dim * self.hidden_size

    @property
    def mlp_params_per_layer(self) -> int:
        """Gated MLP: gate, up and down projections."""
        return 3 * self.hidden_size * self.intermediate_size

    @property
    def norm_params_per_layer(self) -> int:
        return 2 * self.hidden_size + (2 * self.head_dim if self.qk_norm else 0)

    @property
    def layer_params(self) -> int:
        return self.attention_params_per_layer + self.mlp_params_per_layer + self.norm_params_per_layer

    @property
    def lm_head_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def total_params(self) -> int:
        """Every parameter held in memory (the embedding counted once when tied to the LM head)."""
        embedding = self.vocab_size * self.hidden_size
        untied_head = 0 if self.tied_embeddings else self.lm_head_params
        return self.num_layers * self.layer_params + self.hidden_size + embedding + untied_head

    @property
    def read_params(self) -> int:
        """Parameters read from HBM by one decode forward: the layers, the final norm and the LM head.

        The input embedding is a row lookup, not a full read."""
        return self.num_layers * self.layer_params + self.hidden_size + self.lm_head_params

    @property
    def body_matmul_params(self) -> int:
        """Matmul parameters each token multiplies through in the decoder layers (2 FLOPs each)."""
        return self.num_layers * (self.attention_params_per_layer + self.mlp_params_per_layer)

    @property
    def weight_bytes(self) -> int:
        return self.total_params * BF16_BYTES

    def weight_bytes_at(self, bytes_per_matmul_weight: float) -> float:
        """Bytes of every parameter held in memory when the decoder layers' matmul weights take
        ``bytes_per_matmul_weight`` each (the embedding, LM head and norms stay bf16)."""
        return self.body_matmul_params * bytes_per_matmul_weight + (self.total_params - self.body_matmul_params) * BF16_BYTES

    def read_bytes_at(self, bytes_per_matmul_weight: float) -> float:
        """Bytes one decode forward reads (:attr:`read_params`), matmul weights at ``bytes_per_matmul_weight``."""
        return self.body_matmul_params * bytes_per_matmul_weight + (self.read_params - self.body_matmul_params) * BF16_BYTES

    def kv_bytes_per_token(self, kv_heads: int | None = None, bytes_per_element: float = BF16_BYTES) -> float:
        """K and V for one token in every layer: 2 * layers * kv_heads * head_dim * bytes per element (2: bf16)."""
        heads = self.num_kv_heads if kv_heads is None else kv_heads
        return 2 * self.num_layers * heads * self.head_dim * bytes_per_element


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
