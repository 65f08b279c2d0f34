"""The DFlash/DSpark block drafter.

One forward of ``num_hidden_layers`` draft layers fills a whole block. Every draft layer attends
bidirectionally inside the block and, through K/V injection, to the fused target context features::

    H_ctx = RMSNorm(W_c [H^(l_1); ...; H^(l_m)])          (target hidden states of the chosen layers)
    K_i = [W_K^i H_ctx ; W_K^i H_d],  V_i = [W_V^i H_ctx ; W_V^i H_d]

The projected context keys/values are cached per draft layer in a :class:`StaticKVCache` whose lengths follow
the target's (accepted tokens only). Embedding and LM head are the target's (shared, frozen: they are passed in,
never owned). The DSpark sequential part adds a Markov bias ``B(x_{k-1}, .) = W1[x_{k-1}] W2`` to the parallel
logits position by position, and the confidence head estimates ``c_k = sigmoid(w^T [h_k; W1[x_{k-1}]] + b)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from simlab.real.config import DrafterConfig, TargetConfig
from simlab.real.kv_cache import StaticKVCache
from simlab.real.layers import DecoderLayer, RMSNorm, attend, rotary_cos_sin
from simlab.real.sampling import sample_from_probs, widen
from simlab.real.target import INIT_STD, TargetModel, init_weights

ContextFn = Callable[[int, DecoderLayer], tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class DraftBlock:
    """The parallel part of one draft: hidden states [B, G, hidden] and base logits U [B, G, V] of the G
    predicting positions (float32)."""

    hidden: torch.Tensor
    base_logits: torch.Tensor


@dataclass(frozen=True)
class DraftSample:
    """Tokens drafted left to right with the Markov correction.

    tokens:      [B, G] drafted tokens x_1..x_G.
    probs:       [B, G, V] the distributions they were sampled from (one-hot at temperature 0).
    confidence:  [B, G] the confidence head's c_k (NaN without a head).
    """

    tokens: torch.Tensor
    probs: torch.Tensor
    confidence: torch.Tensor


class Drafter(nn.Module):
    """Block drafter for a target with config ``target_config`` (see module docstring)."""

    def __init__(self, config: DrafterConfig, target_config: TargetConfig) -> None:
        super().__init__()
        config.validate_for(target_config)
        self.config = config
        self.target_config = target_config
        backbone = config.backbone(target_config)
        self.backbone_config = backbone
        hidden = target_config.hidden_size
        self.fuse = nn.Linear(len(config.target_layer_ids) * hidden, hidden, bias=False)
        self.fuse_norm = RMSNorm(hidden, target_config.rms_norm_eps)
        self.mask_embedding = nn.Parameter(torch.zeros(hidden))
        self.layers = nn.ModuleList(DecoderLayer(backbone) for _ in range(config.num_hidden_layers))
        self.norm = RMSNorm(hidden, target_config.rms_norm_eps)
        rank = config.markov_rank
        self.markov_in = nn.Embedding(target_config.vocab_size, rank) if rank > 0 else None  # W1
        self.markov_out = nn.Linear(rank, target_config.vocab_size, bias=False) if rank > 0 else None  # W2
        self.confidence_head = nn.Linear(hidden + rank, 1) if config.confidence_head else None
        init_weights(self)
        nn.init.normal_(self.mask_embedding, std=INIT_STD)
        if self.markov_out is not None:
            nn.init.zeros_(self.markov_out.weight)  # start as DFlash: no bias until trained

    @property
    def target_layer_ids(self) -> tuple[int, ...]:
        """Target layers whose hidden states are fused."""
        return self.config.target_layer_ids

    # ----------------------------------------------------------------------------------------- context
    def fuse_features(self, layer_hidden: torch.Tensor) -> torch.Tensor:
        """H_ctx [B, Q, hidden] from the target's chosen layers [B, Q, m, hidden]."""
        b, q, m, h = layer_hidden.shape
        return self.fuse_norm(self.fuse(layer_hidden.reshape(b, q, m * h).to(self.fuse.weight.dtype)))

    def new_context_cache(
        self, max_num_seqs: int, max_seq_len: int, *, dtype: torch.dtype | None = None
    ) -> StaticKVCache:
        """A cache for the projected context keys/values of every draft layer."""
        c = self.backbone_config
        weight = self.fuse.weight
        return StaticKVCache(
            c.num_hidden_layers, max_num_seqs, max_seq_len, c.num_key_value_heads, c.head_dim,
            dtype=dtype or weight.dtype, device=weight.device,
        )

    def append_context(
        self, cache: StaticKVCache, layer_hidden: torch.Tensor, slot_ids: torch.Tensor, query_lengths: torch.Tensor
    ) -> None:
        """Project the first ``query_lengths[b]`` tokens' target features into every draft layer's K/V and
        append them to the slots' context (positions continue each slot's length)."""
        batch = cache.plan(slot_ids, query_lengths, layer_hidden.shape[1])
        if batch.packed:  # padded rows (a prompt chunk beside decode rows): only the real tokens are projected
            layer_hidden = batch.pack(layer_hidden)
        features = self.fuse_features(layer_hidden)
        cos, sin = rotary_cos_sin(batch.positions, self.backbone_config.head_dim, self.backbone_config.rope_theta,
                                  features.dtype)
        if batch.packed:
            cos, sin = (batch.pack(c[:, 0])[:, None] for c in (cos, sin))
        for index, layer in enumerate(self.layers):
            key, value = layer.self_attn.key_value(features, cos, sin)
            if batch.packed:
                key, value = batch.unpack_heads(key), batch.unpack_heads(value)
            cache.write(index, batch, key, value)
        cache.commit(batch)

    # ----------------------------------------------------------------------------------------- backbone
    def _run_layers(
        self, x: torch.Tensor, positions: torch.Tensor, context: ContextFn, mask: torch.Tensor
    ) -> torch.Tensor:
        """Draft layers over block inputs ``x`` [B, N, hidden]; ``mask`` [B, 1, N, T + N] covers the context
        keys (first T) then the block keys."""
        cos, sin = rotary_cos_sin(positions, self.backbone_config.head_dim, self.backbone_config.rope_theta, x.dtype)
        for index, layer in enumerate(self.layers):
            attn = layer.self_attn
            h = layer.input_layernorm(x)
            query = attn.query(h, cos, sin)
            block_key, block_value = attn.key_value(h, cos, sin)
            context_key, context_value = context(index, layer)
            key = torch.cat([context_key.to(block_key.dtype), block_key], dim=2)
            value = torch.cat([context_value.to(block_value.dtype), block_value], dim=2)
            x = x + attn.output(attend(query, key, value, mask))
            x = layer.mlp_block(x)
        return self.norm(x)

    def _block_inputs(self, target: TargetModel, anchor_ids: torch.Tensor, block_length: int) -> torch.Tensor:
        """[emb(anchor), MASK, ...] embeddings [..., block_length, hidden] for anchors of any leading shape."""
        anchor = target.embed_tokens(anchor_ids).to(self.mask_embedding.dtype)
        masks = self.mask_embedding.expand(*anchor_ids.shape, block_length - 1, -1)
        return torch.cat([anchor[..., None, :], masks], dim=-2)

    def _predicting(self, hidden: torch.Tensor, gamma: int) -> torch.Tensor:
        """The gamma predicting positions of a block's outputs (all for DSpark, all but the anchor for DFlash)."""
        return hidden[..., -gamma:, :] if not self.config.anchor_predicts else hidden[..., :gamma, :]

    def draft(
        self, target: TargetModel, cache: StaticKVCache, slot_ids: torch.Tensor, anchor_ids: torch.Tensor, gamma: int
    ) -> DraftBlock:
        """One block forward for requests in ``slot_ids`` whose last emitted (not yet cached) token is
        ``anchor_ids`` [B]; the block starts at each slot's context length."""
        block_length = self.config.block_length(gamma)
        ctx_lengths = cache.lengths[slot_ids]
        num_context = int(ctx_lengths.max()) if slot_ids.numel() else 0
        x = self._block_inputs(target, anchor_ids, block_length)
        positions = ctx_lengths[:, None] + torch.arange(block_length, device=x.device)
        context_visible = torch.arange(num_context, device=x.device)[None, :] < ctx_lengths[:, None]  # [B, T]
        mask = torch.cat(
            [context_visible[:, None, None, :].expand(-1, 1, block_length, -1),
             torch.ones(x.shape[0], 1, block_length, block_length, dtype=torch.bool, device=x.device)],
            dim=-1,
        )

        def context(index: int, _layer: DecoderLayer) -> tuple[torch.Tensor, torch.Tensor]:
            return cache.read_prefix(index, slot_ids, num_context)

        hidden = self._predicting(self._run_layers(x, positions, context, mask), gamma)
        return DraftBlock(hidden=hidden, base_logits=target.logits(hidden))

    def training_forward(
        self,
        target: TargetModel,
        layer_hidden: torch.Tensor,
        token_ids: torch.Tensor,
        anchors: torch.Tensor,
        gamma: int,
    ) -> torch.Tensor:
        """Hidden states [N, A, gamma, hidden] of A blocks per sequence, all in one forward.

        ``layer_hidden`` [N, S, m, hidden] are the target's features of sequences ``token_ids`` [N, S];
        ``anchors`` [N, A] are block start positions. Block a sees context positions < anchors[a] (never the
        anchor's own features, as at inference) and its own tokens; blocks do not see each other.
        """
        n, seq_len = token_ids.shape
        num_blocks = anchors.shape[1]
        block_length = self.config.block_length(gamma)
        features = self.fuse_features(layer_hidden)
        ctx_positions = torch.arange(seq_len, device=token_ids.device).expand(n, seq_len)
        cos, sin = rotary_cos_sin(ctx_positions, self.backbone_config.head_dim, self.backbone_config.rope_theta,
                                  features.dtype)
        anchor_ids = torch.gather(token_ids, 1, anchors)
        x = self._block_inputs(target, anchor_ids, block_length).reshape(n, num_blocks * block_length, -1)
        offsets = torch.arange(block_length, device=token_ids.device)
        positions = (anchors[..., None] + offsets).reshape(n, -1)
        query_anchor = anchors[..., None].expand(-1, -1, block_length).reshape(n, -1)  # [N, A*G]
        context_visible = ctx_positions[:, None, :] < query_anchor[:, :, None]  # [N, A*G, S]
        block_id = torch.arange(num_blocks, device=token_ids.device).repeat_interleave(block_length)
        same_block = (block_id[:, None] == block_id[None, :]).expand(n, -1, -1)
        mask = torch.cat([context_visible, same_block], dim=-1)[:, None]

        def context(_index: int, layer: DecoderLayer) -> tuple[torch.Tensor, torch.Tensor]:
            return layer.self_attn.key_value(features, cos, sin)

        hidden = self._run_layers(x, positions, context, mask).reshape(n, num_blocks, block_length, -1)
        return self._predicting(hidden, gamma)

    # ----------------------------------------------------------------------------------------- DSpark heads
    def markov_bias(self, previous_ids: torch.Tensor) -> torch.Tensor | None:
        """B(x_{k-1}, .) = W1[x_{k-1}] W2, shape [..., V] (float32), or None without a Markov head."""
        if self.markov_in is None or self.markov_out is None:
            return None
        return widen(self.markov_out(self.markov_in(previous_ids)))

    def confidence_logit(self, hidden: torch.Tensor, previous_ids: torch.Tensor) -> torch.Tensor | None:
        """w^T [h_k; W1[x_{k-1}]] + b, shape [...], or None without the confidence head."""
        if self.confidence_head is None or self.markov_in is None:
            return None
        features = torch.cat([hidden.to(self.markov_in.weight.dtype), self.markov_in(previous_ids)], dim=-1)
        return self.confidence_head(features).squeeze(-1)

    def confidence(self, hidden: torch.Tensor, previous_ids: torch.Tensor) -> torch.Tensor | None:
        """c_k = sigmoid(w^T [h_k; W1[x_{k-1}]] + b), shape [...] (float32), or None without the head."""
        logit = self.confidence_logit(hidden, previous_ids)
        return None if logit is None else torch.sigmoid(widen(logit))

    def sample(
        self, block: DraftBlock, anchor_ids: torch.Tensor, temperature: float, uniforms: torch.Tensor | None = None
    ) -> DraftSample:
        """Draft left to right: p_k = softmax((U_k + B(x_{k-1}, .)) / T), x_0 = the anchor.

        At temperature 0 the argmax is taken (``uniforms`` unused); otherwise x_k is drawn by inverse CDF with
        ``uniforms`` [B, G] in [0, 1).
        """
        b, gamma, vocab = block.base_logits.shape
        dtype = widen(block.base_logits).dtype
        tokens = torch.empty(b, gamma, dtype=torch.long, device=anchor_ids.device)
        probs = torch.empty(b, gamma, vocab, dtype=dtype, device=anchor_ids.device)
        confidence = torch.full((b, gamma), float("nan"), dtype=dtype, device=anchor_ids.device)
        previous = anchor_ids
        for k in range(gamma):
            logits = block.base_logits[:, k]
            bias = self.markov_bias(previous)
            if bias is not None:
                logits = logits + bias
            conf_k = self.confidence(block.hidden[:, k], previous)
            if conf_k is not None:
                confidence[:, k] = conf_k
            if temperature == 0.0:
                token = logits.argmax(dim=-1)
                probs[:, k] = torch.nn.functional.one_hot(token, vocab).to(dtype)
            else:
                if uniforms is None:
                    raise ValueError("sampling at temperature > 0 needs uniforms")
                p = torch.softmax(logits / temperature, dim=-1)
                token = sample_from_probs(p, uniforms[:, k])
                probs[:, k] = p
            tokens[:, k] = token
            previous = token
        return DraftSample(tokens=tokens, probs=probs, confidence=confidence)


__all__ = ["DraftBlock", "DraftSample", "Drafter"]
