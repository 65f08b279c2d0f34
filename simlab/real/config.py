"""Model configurations for real mode: the Qwen3-style target and the DFlash/DSpark block drafter.

Plain dataclasses with no torch import, so that presets can be listed and sized without torch installed.
Field names follow the Hugging Face Qwen3 ``config.json`` where one exists.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

DraftLayout = Literal["dspark", "dflash"]


@dataclass(frozen=True)
class TargetConfig:
    """A decoder-only transformer in the Qwen3 architecture.

    RMSNorm (pre-norm), rotary position embeddings, grouped-query attention with per-head RMSNorm on queries
    and keys, SwiGLU MLP, optional tied input embedding and LM head.
    """

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1_000_000.0
    max_position_embeddings: int = 40_960
    tie_word_embeddings: bool = False
    attention_bias: bool = False

    def __post_init__(self) -> None:
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_key_value_heads ({self.num_key_value_heads})"
            )
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even for rotary embeddings, got {self.head_dim}")

    @property
    def num_parameters(self) -> int:
        """Parameter count (embedding and LM head counted once when tied)."""
        h, kv = self.hidden_size, self.num_key_value_heads * self.head_dim
        q = self.num_attention_heads * self.head_dim
        attention = h * q + 2 * h * kv + q * h + 2 * self.head_dim
        if self.attention_bias:
            attention += q + 2 * kv
        mlp = 3 * h * self.intermediate_size
        per_layer = attention + mlp + 2 * h
        embeddings = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        return self.num_hidden_layers * per_layer + embeddings + h

    def kv_bytes_per_token(self, bytes_per_value: int = 2) -> int:
        """Bytes of K and V cached per token over all layers."""
        return 2 * self.num_hidden_layers * self.num_key_value_heads * self.head_dim * bytes_per_value

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TargetConfig":
        """Build from a dict with exactly this class's field names (unknown keys raise)."""
        _check_fields(cls, data)
        return cls(**data)


@dataclass(frozen=True)
class DrafterConfig:
    """A DFlash/DSpark block drafter attached to a target.

    layout:            ``dspark``: the query block is ``[anchor, MASK x (gamma-1)]`` and every position,
                       the anchor's included, predicts the next token (gamma predictions from gamma inputs);
                       ``dflash``: ``[anchor, MASK x gamma]`` and only the mask positions predict (the anchor
                       is a known token, not a prediction).
    target_layer_ids:  which target layers' hidden states (outputs of decoder layer i, 0-based) are fused.
    markov_rank:       rank r of the DSpark Markov head B(x_{k-1}, .) = W1[x_{k-1}] W2 (0: no head, DFlash).
    confidence_head:   whether the drafter has the head c_k = sigmoid(w^T [h_k; W1[x_{k-1}]]).
    block_size:        the gamma the drafter was trained with (inference may use a smaller gamma).
    """

    num_hidden_layers: int
    target_layer_ids: tuple[int, ...]
    layout: DraftLayout = "dspark"
    markov_rank: int = 256
    confidence_head: bool = True
    block_size: int = 7
    intermediate_size: int | None = None  # None: the target's
    num_attention_heads: int | None = None
    num_key_value_heads: int | None = None
    head_dim: int | None = None

    def __post_init__(self) -> None:
        if self.layout not in ("dspark", "dflash"):
            raise ValueError(f"layout must be 'dspark' or 'dflash', got {self.layout!r}")
        if self.confidence_head and self.markov_rank <= 0:
            raise ValueError("the confidence head reads the Markov embedding W1[x]; it needs markov_rank > 0")
        if not self.target_layer_ids:
            raise ValueError("target_layer_ids must name at least one target layer")
        object.__setattr__(self, "target_layer_ids", tuple(int(i) for i in self.target_layer_ids))

    @property
    def anchor_predicts(self) -> bool:
        """True when the anchor position's output is the first prediction (DSpark layout)."""
        return self.layout == "dspark"

    def block_length(self, gamma: int) -> int:
        """Query tokens in a block that yields ``gamma`` predictions."""
        return gamma if self.anchor_predicts else gamma + 1

    def backbone(self, target: TargetConfig) -> TargetConfig:
        """The shape of the draft layers: the target's, with this config's overrides."""
        return dataclasses.replace(
            target,
            num_hidden_layers=self.num_hidden_layers,
            intermediate_size=self.intermediate_size or target.intermediate_size,
            num_attention_heads=self.num_attention_heads or target.num_attention_heads,
            num_key_value_heads=self.num_key_value_heads or target.num_key_value_heads,
            head_dim=self.head_dim or target.head_dim,
        )

    def validate_for(self, target: TargetConfig) -> None:
        """Raise ValueError when the chosen target layers do not exist in ``target``."""
        bad = [i for i in self.target_layer_ids if not 0 <= i < target.num_hidden_layers]
        if bad:
            raise ValueError(
                f"target_layer_ids {bad} out of range for a target with {target.num_hidden_layers} layers"
            )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        data = dataclasses.asdict(self)
        data["target_layer_ids"] = list(self.target_layer_ids)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "DrafterConfig":
        """Build from a dict with this class's field names (unknown keys raise)."""
        _check_fields(cls, data)
        return cls(**{**data, "target_layer_ids": tuple(data["target_layer_ids"])})


def spread_layers(num_target_layers: int, num_chosen: int) -> tuple[int, ...]:
    """``num_chosen`` target layers spread evenly from the second layer to the third-from-last (DFlash)."""
    low, high = min(1, num_target_layers - 1), max(num_target_layers - 3, 0)
    if num_chosen <= 1:
        return (high,)
    high = max(high, low)
    return tuple(sorted({round(low + (high - low) * i / (num_chosen - 1)) for i in range(num_chosen)}))


# The byte-level tokenizer of the shipped pair has 256 bytes + 3 special tokens.
BYTE_VOCAB_SIZE = 259

TARGET_PRESETS: dict[str, TargetConfig] = {
    # CPU-trainable, byte-level vocabulary
    "tiny": TargetConfig(
        vocab_size=BYTE_VOCAB_SIZE, hidden_size=64, intermediate_size=192, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, rope_theta=10_000.0,
        max_position_embeddings=2048, tie_word_embeddings=True,
    ),
    "small": TargetConfig(
        vocab_size=BYTE_VOCAB_SIZE, hidden_size=256, intermediate_size=768, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=64, rope_theta=10_000.0,
        max_position_embeddings=4096, tie_word_embeddings=True,
    ),
    # shapes of the public Qwen3 configs (construct on the meta device; weights come from a checkpoint)
    "qwen3-4b": TargetConfig(
        vocab_size=151_936, hidden_size=2560, intermediate_size=9728, num_hidden_layers=36,
        num_attention_heads=32, num_key_value_heads=8, head_dim=128, tie_word_embeddings=True,
    ),
    "qwen3-8b": TargetConfig(
        vocab_size=151_936, hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
        num_attention_heads=32, num_key_value_heads=8, head_dim=128, tie_word_embeddings=False,
    ),
    "qwen3-14b": TargetConfig(
        vocab_size=151_936, hidden_size=5120, intermediate_size=17408, num_hidden_layers=40,
        num_attention_heads=40, num_key_value_heads=8, head_dim=128, tie_word_embeddings=False,
    ),
}


def default_drafter_config(target: TargetConfig, *, layout: DraftLayout = "dspark") -> DrafterConfig:
    """The drafter shape used with a target preset: 5 draft layers and 5 fused target layers for the Qwen3
    shapes (DeepSpec's Qwen3-4B DSpark config), fewer for the CPU-sized targets."""
    if target.num_hidden_layers >= 8:
        return DrafterConfig(
            num_hidden_layers=5, target_layer_ids=spread_layers(target.num_hidden_layers, 5), layout=layout,
            markov_rank=256, confidence_head=layout == "dspark", block_size=7,
        )
    rank = min(256, target.vocab_size)
    return DrafterConfig(
        num_hidden_layers=2 if target.num_hidden_layers >= 4 else 1,
        target_layer_ids=tuple(range(target.num_hidden_layers)),
        layout=layout, markov_rank=rank if layout == "dspark" else 0,
        confidence_head=layout == "dspark", block_size=7,
    )


def target_preset(name: str) -> TargetConfig:
    """A target preset by name (``tiny``, ``small``, ``qwen3-4b``, ``qwen3-8b``, ``qwen3-14b``)."""
    try:
        return TARGET_PRESETS[name]
    except KeyError:
        raise KeyError(f"unknown target preset {name!r}; valid: {sorted(TARGET_PRESETS)}") from None


__all__ = [
    "BYTE_VOCAB_SIZE", "DraftLayout", "DrafterConfig", "TARGET_PRESETS", "TargetConfig",
    "default_drafter_config", "spread_layers", "target_preset",
]


def _check_fields(cls: type, data: dict[str, Any]) -> None:
    """Raise ValueError naming any key of ``data`` that is not a field of the dataclass ``cls``."""
    unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        raise ValueError(f"unknown {cls.__name__} field(s): {sorted(unknown)}")
