"""Transformer building blocks of the Qwen3 architecture: RMSNorm, rotary embeddings, GQA attention
projections, the SwiGLU MLP and the attention call itself.

Tensors use the layout ``[batch, heads, query tokens, head_dim]`` for attention and
``[batch, query tokens, hidden]`` elsewhere.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from simlab.real.config import TargetConfig


class RMSNorm(nn.Module):
    """Root-mean-square layer norm computed in (at least) float32, scaled by a learned weight (HF Qwen3)."""

    def __init__(self, size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        wide = x.to(torch.promote_types(dtype, torch.float32))  # float32 for bf16/fp16, float64 stays
        wide = wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * wide.to(dtype)


def rotary_cos_sin(
    positions: torch.Tensor, head_dim: int, theta: float, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin for ``positions`` [B, Q], shaped [B, 1, Q, head_dim] (halves repeated, as HF does)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=positions.device, dtype=torch.float32) / head_dim))
    angles = positions.to(torch.float32)[..., None] * inv_freq  # [B, Q, D/2]
    angles = torch.cat([angles, angles], dim=-1)[:, None]
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` [B, H, Q, D] by the angles in cos/sin [B, 1, Q, D] (rotate-half convention)."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


class AttentionProjections(nn.Module):
    """Q/K/V/O projections with per-head RMSNorm on queries and keys (Qwen3), and grouped-query heads."""

    def __init__(self, config: TargetConfig) -> None:
        super().__init__()
        h, d = config.hidden_size, config.head_dim
        self.num_heads, self.num_kv_heads, self.head_dim = config.num_attention_heads, config.num_key_value_heads, d
        bias = config.attention_bias
        self.q_proj = nn.Linear(h, self.num_heads * d, bias=bias)
        self.k_proj = nn.Linear(h, self.num_kv_heads * d, bias=bias)
        self.v_proj = nn.Linear(h, self.num_kv_heads * d, bias=bias)
        self.o_proj = nn.Linear(self.num_heads * d, h, bias=False)
        self.q_norm = RMSNorm(d, config.rms_norm_eps)
        self.k_norm = RMSNorm(d, config.rms_norm_eps)

    def query(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """Normalised, rotated queries [B, Hq, Q, D] for hidden states ``x`` [B, Q, hidden]."""
        b, q, _ = x.shape
        query = self.q_norm(self.q_proj(x).view(b, q, self.num_heads, self.head_dim)).transpose(1, 2)
        return apply_rotary(query, cos, sin)

    def key_value(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Normalised, rotated keys and values [B, Hkv, Q, D] for ``x`` [B, Q, hidden]."""
        b, q, _ = x.shape
        key = self.k_norm(self.k_proj(x).view(b, q, self.num_kv_heads, self.head_dim)).transpose(1, 2)
        value = self.v_proj(x).view(b, q, self.num_kv_heads, self.head_dim).transpose(1, 2)
        return apply_rotary(key, cos, sin), value

    def output(self, attended: torch.Tensor) -> torch.Tensor:
        """Merge heads [B, Hq, Q, D] -> [B, Q, hidden] through the output projection."""
        b, _, q, _ = attended.shape
        return self.o_proj(attended.transpose(1, 2).reshape(b, q, self.num_heads * self.head_dim))


def attend(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None, *, causal: bool = False
) -> torch.Tensor:
    """Scaled dot-product attention with grouped-query heads.

    query [B, Hq, Q, D]; key/value [B, Hkv, T, D]; ``mask`` a boolean [B, 1, Q, T] (True = may attend) or None.
    ``causal`` (only without a mask) applies the standard lower-triangular mask for Q == T.
    """
    key = key.to(query.dtype)
    value = value.to(query.dtype)
    return F.scaled_dot_product_attention(
        query, key, value, attn_mask=mask, is_causal=causal and mask is None,
        enable_gqa=query.shape[1] != key.shape[1],
    )


class SwiGLU(nn.Module):
    """down(silu(gate(x)) * up(x))."""

    def __init__(self, hidden_size: int, intermediate_size: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    """Pre-norm block: x + attn(norm(x)), then x + mlp(norm(x)).

    Where the keys and values come from (a KV cache, injected target features) is decided by the model that
    owns the layer, so the attention half is composed there from ``self_attn``'s projections and :func:`attend`.
    """

    def __init__(self, config: TargetConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = AttentionProjections(config)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = SwiGLU(config.hidden_size, config.intermediate_size)

    def mlp_block(self, x: torch.Tensor) -> torch.Tensor:
        """x + mlp(norm(x))."""
        return x + self.mlp(self.post_attention_layernorm(x))


__all__ = [
    "AttentionProjections", "DecoderLayer", "RMSNorm", "SwiGLU", "apply_rotary", "attend", "rotary_cos_sin",
]
