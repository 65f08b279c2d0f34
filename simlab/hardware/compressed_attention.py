"""DeepSeek-V4's hybrid attention: a sliding window in every layer, plus compressed KV in most.

Each layer keeps the last ``window_tokens`` tokens' KV (one shared 512-wide latent head, K and V alike), and by
its compression ratio one of (docs/research/deepseek-v4-configs.md, section 4):

- **CSA** (ratio 4): every 4 tokens compressed into one entry; a lightning indexer (``index_heads`` x
  ``index_head_dim``, its own key per compressed entry) scores every compressed entry and the layer attends the
  ``index_topk`` best;
- **HCA** (ratio 128): every 128 tokens compressed into one entry, all of them attended;
- neither (SWA only): the window alone.

So what a decode token reads and computes per request at context ``c`` has a part linear in ``c`` (the indexer's
keys of CSA layers, HCA's entries) and a part capped by the window and the top-k (``min(c, W)`` window entries in
every layer, ``min(c / 4, topk)`` selected entries in CSA layers). The roofline prices the capped part at the mean
context of the step's requests (``C / R``), which overestimates it a little when lengths differ (``min`` is
concave). The window's KV is fixed per sequence, not per token: the roofline reserves it for vLLM's default 256
sequences out of the KV budget and counts only the compressed caches per token.

Bytes per entry follow vLLM's FP8 layout (448 no-rope dims in FP8, 64 rope dims in bf16, 7 scale bytes and one of
padding: 584 B; an indexer key of 128 FP8 values and an fp32 scale: 132 B); in bf16 an entry is 512 x 2 B and an
indexer key 128 x 2 B, which gives DeepSeek's published 9.62 GiB a sequence at 1M tokens for V4-Pro.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

CSA_RATIO = 4
HCA_RATIO = 128
NOPE_SCALE_GROUP = 64  # FP8 layout: one scale byte per 64 no-rope dims
INDEX_SCALE_GROUP = 128  # one fp32 scale per 128 indexer dims


@dataclass(frozen=True)
class CompressedAttention:
    """The layer mix and sizes of DeepSeek-V4's attention (the model's ``head_dim`` and ``qk_rope_head_dim``
    give the entry's width; its ``num_layers`` less the CSA and HCA layers are SWA only)."""

    num_csa_layers: int
    num_hca_layers: int
    index_topk: int
    window_tokens: int = 128
    index_heads: int = 64
    index_head_dim: int = 128
    o_lora_rank: int = 1024  # grouped low-rank output projection: o_groups x o_lora_rank
    o_groups: int = 8
    hc_mult: int = 4  # mHC: parallel residual streams

    # ------------------------------------------------------------------------------------------ bytes
    def entry_bytes(self, head_dim: int, rope_dim: int, bytes_per_element: float) -> float:
        """One KV entry (window or compressed) of one layer."""
        if bytes_per_element >= 2:
            return head_dim * bytes_per_element
        nope = head_dim - rope_dim
        return nope * bytes_per_element + rope_dim * 2 + nope // NOPE_SCALE_GROUP + 1

    def index_entry_bytes(self, bytes_per_element: float) -> float:
        """One indexer key (CSA layers, one per compressed entry)."""
        if bytes_per_element >= 2:
            return self.index_head_dim * bytes_per_element
        return self.index_head_dim * bytes_per_element + 4 * (self.index_head_dim // INDEX_SCALE_GROUP)

    def stored_bytes_per_token(self, entry: float, index_entry: float) -> float:
        """KV held per context token (every layer): CSA's entries and indexer keys, HCA's entries."""
        return (self.num_csa_layers * (entry + index_entry) / CSA_RATIO
                + self.num_hca_layers * entry / HCA_RATIO)

    def read_bytes_per_context_token(self, entry: float, index_entry: float) -> float:
        """KV one decode query reads per context token, the part linear in context: the indexer scores every
        compressed entry of CSA layers, HCA layers attend all theirs."""
        return self.num_csa_layers * index_entry / CSA_RATIO + self.num_hca_layers * entry / HCA_RATIO

    def capped_entries(self, num_layers: int, context: Any) -> Any:
        """Entries read per request at ``context`` (scalar or array) beyond the linear part: the window in every
        layer and the top-k selected entries in CSA layers."""
        if isinstance(context, np.ndarray):
            return (num_layers * np.minimum(context, self.window_tokens)
                    + self.num_csa_layers * np.minimum(context / CSA_RATIO, self.index_topk))
        c = float(context)
        return (num_layers * min(c, float(self.window_tokens))
                + self.num_csa_layers * min(c / CSA_RATIO, float(self.index_topk)))

    def window_bytes_per_sequence(self, num_layers: int, entry: float) -> float:
        """The sliding window's KV, fixed per sequence once it is ``window_tokens`` long."""
        return num_layers * self.window_tokens * entry

    # ------------------------------------------------------------------------------------------ FLOPs
    def index_flops_per_entry(self) -> int:
        """The lightning indexer's score of one compressed entry for one query (2 FLOPs per dim and head)."""
        return 2 * self.index_heads * self.index_head_dim

    def flops_per_context_token(self, pair_flops: int) -> float:
        """Attention FLOPs of one query per context token, summed over layers, the part linear in context: HCA's
        pairs and the indexer's scores over CSA's compressed entries."""
        return (self.num_hca_layers * pair_flops / HCA_RATIO
                + self.num_csa_layers * self.index_flops_per_entry() / CSA_RATIO)

    # ------------------------------------------------------------------------------------------ parameters
    def attention_params_per_layer(self, hidden: int, heads: int, head_dim: int, q_lora: int) -> int:
        """Low-rank q (wq_a, wq_b), the shared KV projection (wkv), the grouped low-rank output (wo_a, wo_b)."""
        return (hidden * q_lora + q_lora * heads * head_dim + hidden * head_dim
                + self.o_lora_rank * heads * head_dim + hidden * self.o_groups * self.o_lora_rank)

    def compressor_params(self, hidden: int, head_dim: int, q_lora: int) -> int:
        """Every layer's compressor (its KV and gate projections; CSA's overlap two windows, so twice as wide) and
        CSA's indexer (its query from the q latent, head weights and its own compressor), over all layers."""
        csa = (2 * 2 * head_dim * hidden + self.index_heads * self.index_head_dim * q_lora
               + self.index_heads * hidden + 2 * 2 * self.index_head_dim * hidden)
        hca = 2 * head_dim * hidden
        return self.num_csa_layers * csa + self.num_hca_layers * hca

    def small_params_per_layer(self, hidden: int, heads: int, head_dim: int, q_lora: int) -> int:
        """Norms (attention, MLP, q latent, KV), the attention sinks and mHC's mixing weights of one layer
        (``(2 + m) m`` outputs over the ``m h``-wide streams, before attention and before the MLP)."""
        m = self.hc_mult
        return 2 * hidden + q_lora + head_dim + heads + 2 * (2 + m) * m * m * hidden
