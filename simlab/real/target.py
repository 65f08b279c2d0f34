"""The target model: a Qwen3-architecture decoder-only transformer with a static, ragged KV cache."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from torch import nn

from simlab.real.config import TargetConfig
from simlab.real.kv_cache import CacheBatch, StaticKVCache
from simlab.real.layers import DecoderLayer, RMSNorm, attend, rotary_cos_sin

INIT_STD = 0.02


@dataclass(frozen=True)
class TargetOutput:
    """hidden: [B, Q, hidden] after the final norm (feed to :meth:`TargetModel.logits`);
    layer_hidden: [B, Q, m, hidden] outputs of the requested decoder layers (before the final norm), or None."""

    hidden: torch.Tensor
    layer_hidden: torch.Tensor | None


def init_weights(module: nn.Module, std: float = INIT_STD) -> None:
    """Normal(0, std) linear and embedding weights, zero biases; norms keep their ones."""
    for sub in module.modules():
        if isinstance(sub, nn.Linear):
            nn.init.normal_(sub.weight, std=std)
            if sub.bias is not None:
                nn.init.zeros_(sub.bias)
        elif isinstance(sub, nn.Embedding):
            nn.init.normal_(sub.weight, std=std)


class TargetModel(nn.Module):
    """Qwen3-style causal LM. Parameter names match Hugging Face's ``Qwen3ForCausalLM`` after dropping the
    leading ``model.`` (see :mod:`simlab.real.hf_checkpoint`).

    Build on the meta device for the large presets (``with torch.device("meta"): TargetModel(cfg)``) to size
    them without allocating weights.
    """

    def __init__(self, config: TargetConfig) -> None:
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        init_weights(self)
        self.tie_weights()

    def tie_weights(self) -> None:
        """Share the embedding matrix with the LM head when the config says so (call after moving devices)."""
        if self.config.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight

    @property
    def dtype(self) -> torch.dtype:
        """Dtype of the weights."""
        return self.embed_tokens.weight.dtype

    @property
    def device(self) -> torch.device:
        """Device of the weights."""
        return self.embed_tokens.weight.device

    def new_cache(
        self, max_num_seqs: int, max_seq_len: int, *, dtype: torch.dtype | None = None
    ) -> StaticKVCache:
        """A static KV cache sized for this model."""
        c = self.config
        return StaticKVCache(
            c.num_hidden_layers, max_num_seqs, max_seq_len, c.num_key_value_heads, c.head_dim,
            dtype=dtype or self.dtype, device=self.device,
        )

    def forward(
        self,
        input_ids: torch.Tensor,
        *,
        cache: StaticKVCache | None = None,
        slot_ids: torch.Tensor | None = None,
        query_lengths: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        hidden_layer_ids: Sequence[int] = (),
        row_groups: Sequence[int] | None = None,
    ) -> TargetOutput:
        """Run ``input_ids`` [B, Q].

        With a ``cache``: row b is request slot ``slot_ids[b]`` (default: row b), its first
        ``query_lengths[b]`` tokens (default: all Q) are real and continue the slot's cached sequence; their
        keys/values are written and the slot's length advances by ``query_lengths[b]``. Roll back with
        :meth:`StaticKVCache.truncate`. ``row_groups`` (sizes of contiguous row groups) attends each group padded
        to its own longest row. Without a cache: plain causal attention over the Q tokens at ``positions``
        (default 0..Q-1).
        """
        b, q = input_ids.shape
        x = self.embed_tokens(input_ids)
        batch = None
        if cache is not None:
            if slot_ids is None:
                slot_ids = torch.arange(b, device=input_ids.device)
            if query_lengths is None:
                query_lengths = torch.full((b,), q, dtype=torch.long, device=input_ids.device)
            batch = cache.plan(slot_ids, query_lengths, q, tuple(row_groups) if row_groups else None)
            positions = batch.positions
        elif positions is None:
            positions = torch.arange(q, device=input_ids.device).expand(b, q)
        cos, sin = rotary_cos_sin(positions, self.config.head_dim, self.config.rope_theta, x.dtype)
        layer_ids = {int(layer_id) for layer_id in hidden_layer_ids}
        if len(layer_ids) != len(hidden_layer_ids) or not all(0 <= i < len(self.layers) for i in layer_ids):
            raise ValueError(f"hidden_layer_ids {list(hidden_layer_ids)} must be distinct layers of this model")
        x, layer_hidden = self.run_layers(x, cos, sin, hidden_layer_ids, cache, batch)
        if batch is not None:
            cache.commit(batch)
        return TargetOutput(hidden=self.norm(x), layer_hidden=layer_hidden)

    def run_layers(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, hidden_layer_ids: Sequence[int] = (),
        cache: StaticKVCache | None = None, batch: CacheBatch | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The decoder layers over embeddings ``x`` [B, Q, hidden]: the last layer's output and the stacked outputs
        of ``hidden_layer_ids`` [B, Q, m, hidden] (None when empty). With a cache plan ``batch``, keys/values are
        written to ``cache`` and each row attends to its slot's context (the lengths are not committed); without,
        plain causal attention. A plan with padded rows (``batch.token_index``) runs packed: projections, norms
        and MLPs over the real tokens only, attention per row; the outputs are zero at the padding."""
        wanted = {int(layer_id): i for i, layer_id in enumerate(hidden_layer_ids)}
        packed = batch is not None and batch.packed
        if packed:
            x = batch.pack(x)
            cos, sin = (batch.pack(c[:, 0])[:, None] for c in (cos, sin))
        collected: list[torch.Tensor] = [x] * len(wanted)
        for index, layer in enumerate(self.layers):
            attn = layer.self_attn
            h = layer.input_layernorm(x)
            query = attn.query(h, cos, sin)
            key, value = attn.key_value(h, cos, sin)
            if batch is None:
                attended = attend(query, key, value, None, causal=True)
            elif not packed:
                attended = _attend_cached(cache, index, batch, query, key, value)
            elif batch.groups is None:
                attended = batch.pack_heads(_attend_cached(cache, index, batch, *(batch.unpack_heads(t) for t in (
                    query, key, value))))
            else:  # each group padded to its own longest row
                attended = torch.cat([
                    group.pack_heads(_attend_cached(cache, index, group, *(
                        group.unpack_heads(t[:, :, first:end]) for t in (query, key, value))))
                    for group, (first, end) in zip(batch.groups, batch.group_tokens)], dim=2)
            x = x + attn.output(attended)
            x = layer.mlp_block(x)
            if index in wanted:
                collected[wanted[index]] = x
        layer_hidden = torch.stack(collected, dim=2) if collected else None
        if packed:
            x = batch.unpack(x)
            layer_hidden = batch.unpack(layer_hidden) if layer_hidden is not None else None
        return x, layer_hidden

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """LM-head logits for final hidden states, in float32 or better (float64 models keep float64)."""
        logits = self.lm_head(hidden)
        return logits.to(torch.promote_types(logits.dtype, torch.float32))


def _attend_cached(cache: StaticKVCache, layer: int, batch: CacheBatch, query: torch.Tensor, key: torch.Tensor,
                   value: torch.Tensor) -> torch.Tensor:
    """Write the batch's keys/values [B, Hkv, Q, D] to the cache, then attend each row to its slot's context."""
    cache.write(layer, batch, key, value)
    key, value = cache.read(layer, batch)
    return attend(query, key, value, batch.mask)


__all__ = ["INIT_STD", "TargetModel", "TargetOutput", "init_weights"]
