"""A preallocated (static) KV cache with per-request lengths.

Storage is ``[layers, slots, kv_heads, max_seq_len + 1, head_dim]``: one slot per running request, and one
extra *scratch* position per slot where padding tokens of a ragged batch write their keys and values, so that
a padded query never overwrites a real entry. A request's cache holds positions ``0 .. lengths[slot] - 1``;
rolling back rejected tokens is setting its length lower (stale entries beyond it are masked, then overwritten).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class CacheBatch:
    """Where one forward's query tokens go in the cache, and what each may attend to.

    slot_ids:        [B] cache slot of each batch row.
    start:           [B] cached tokens of each row before this forward.
    query_lengths:   [B] real query tokens of each row (the rest of the Q columns are padding).
    positions:       [B, Q] absolute position of each query token (used for rotary embeddings).
    write_positions: [B, Q] cache index each token writes to (padding goes to the scratch position).
    mask:            [B, 1, Q, T] True where query i of row b may attend to cached position j (causal).
    num_context:     T, the cached positions read by this forward (max over rows of start + query length).
    token_index:     [N] where the N real tokens sit in the flattened [B * Q] batch, or None when no row is
                     padded. The model then runs everything but attention on the N real tokens only (a packed,
                     "varlen" batch, as serving engines run ragged batches), so padding costs no compute there.
    groups:          contiguous row groups attended separately, each its own plan padded to its own longest
                     row (e.g. decode rows of a few tokens beside prefill chunks of hundreds), or None.
    group_tokens:    [(first, end)] of each group's real tokens in the packed order.
    """

    slot_ids: torch.Tensor
    start: torch.Tensor
    query_lengths: torch.Tensor
    positions: torch.Tensor
    write_positions: torch.Tensor
    mask: torch.Tensor
    num_context: int
    token_index: torch.Tensor | None = None
    groups: tuple["CacheBatch", ...] | None = None
    group_tokens: tuple[tuple[int, int], ...] | None = None

    @property
    def end(self) -> torch.Tensor:
        """[B] cached tokens of each row after this forward."""
        return self.start + self.query_lengths

    @property
    def packed(self) -> bool:
        """Whether the model runs this batch packed (some row is padded, or rows are attended in groups)."""
        return self.token_index is not None or self.groups is not None

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        """[B, Q, ...] -> [1, N, ...]: the real tokens in row-major order."""
        b, q = x.shape[:2]
        flat = x.reshape(b * q, *x.shape[2:])
        return (flat if self.token_index is None else flat[self.token_index])[None]

    def unpack(self, x: torch.Tensor) -> torch.Tensor:
        """[1, N, ...] -> [B, Q, ...] with zeros at the padding."""
        b, q = self.positions.shape
        if self.token_index is None:
            return x.reshape(b, q, *x.shape[2:])
        out = x.new_zeros((b * q, *x.shape[2:]))
        out[self.token_index] = x[0]
        return out.reshape(b, q, *x.shape[2:])

    def pack_heads(self, x: torch.Tensor) -> torch.Tensor:
        """[B, H, Q, D] -> [1, H, N, D]."""
        return self.pack(x.transpose(1, 2)).transpose(1, 2)

    def unpack_heads(self, x: torch.Tensor) -> torch.Tensor:
        """[1, H, N, D] -> [B, H, Q, D] with zeros at the padding."""
        return self.unpack(x.transpose(1, 2)).transpose(1, 2)


class StaticKVCache:
    """Keys and values for ``num_layers`` layers and ``max_num_seqs`` request slots of ``max_seq_len`` tokens."""

    def __init__(
        self,
        num_layers: int,
        max_num_seqs: int,
        max_seq_len: int,
        num_kv_heads: int,
        head_dim: int,
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ) -> None:
        shape = (num_layers, max_num_seqs, num_kv_heads, max_seq_len + 1, head_dim)
        self.keys = torch.zeros(shape, dtype=dtype, device=device)
        self.values = torch.zeros(shape, dtype=dtype, device=device)
        self.lengths = torch.zeros(max_num_seqs, dtype=torch.long, device=device)
        self.max_seq_len = max_seq_len

    @property
    def max_num_seqs(self) -> int:
        """Number of request slots."""
        return self.lengths.shape[0]

    @property
    def num_bytes(self) -> int:
        """Bytes held by the key and value storage."""
        return 2 * self.keys.numel() * self.keys.element_size()

    def plan(self, slot_ids: torch.Tensor, query_lengths: torch.Tensor, num_query: int,
             row_groups: tuple[int, ...] | None = None) -> CacheBatch:
        """Positions, write indices and the causal mask for a forward of ``num_query`` (padded) tokens per row.

        ``row_groups`` (sizes of contiguous row groups, summing to the rows) has each group attended on its own,
        padded to its own longest row."""
        whole = self._plan(slot_ids, query_lengths, num_query)
        sizes = [size for size in (row_groups or ()) if size > 0]
        if len(sizes) < 2:
            return whole
        if sum(sizes) != whole.slot_ids.numel():
            raise ValueError(f"row groups {list(row_groups or ())} do not cover the {whole.slot_ids.numel()} rows")
        groups, spans, row, token = [], [], 0, 0
        for size in sizes:
            lengths = whole.query_lengths[row: row + size]
            groups.append(self._plan(whole.slot_ids[row: row + size], lengths, int(lengths.max())))
            count = int(lengths.sum())
            spans.append((token, token + count))
            row, token = row + size, token + count
        token_index = whole.token_index
        if token_index is None:  # packing is needed to regroup the tokens, even without padding
            token_index = torch.arange(whole.slot_ids.numel() * num_query, device=whole.positions.device)
        return dataclasses.replace(whole, token_index=token_index, groups=tuple(groups), group_tokens=tuple(spans))

    def _plan(self, slot_ids: torch.Tensor, query_lengths: torch.Tensor, num_query: int) -> CacheBatch:
        device = self.lengths.device
        slot_ids = slot_ids.to(device=device, dtype=torch.long)
        query_lengths = query_lengths.to(device=device, dtype=torch.long)
        start = self.lengths[slot_ids]
        offsets = torch.arange(num_query, device=device)
        positions = start[:, None] + offsets
        end = start + query_lengths
        if slot_ids.numel() and int(end.max()) > self.max_seq_len:
            raise ValueError(f"KV cache overflow: a request needs {int(end.max())} > max_seq_len {self.max_seq_len}")
        if slot_ids.numel() and int(query_lengths.max()) > num_query:
            raise ValueError("a query length exceeds the padded number of query tokens")
        valid = offsets[None, :] < query_lengths[:, None]
        write_positions = torch.where(valid, positions, torch.full_like(positions, self.max_seq_len))
        num_context = int(end.max()) if slot_ids.numel() else 0
        # padded queries see up to their own (nominal) position too: never an empty row, so never NaN
        mask = torch.arange(num_context, device=device)[None, None, :] <= positions[:, :, None]
        padded = slot_ids.numel() and int(query_lengths.sum()) < slot_ids.numel() * num_query
        token_index = torch.nonzero(valid.reshape(-1)).reshape(-1) if padded else None
        return CacheBatch(
            slot_ids=slot_ids, start=start, query_lengths=query_lengths, positions=positions,
            write_positions=write_positions, mask=mask[:, None], num_context=num_context, token_index=token_index,
        )

    def write(self, layer: int, batch: CacheBatch, key: torch.Tensor, value: torch.Tensor) -> None:
        """Store ``key``/``value`` [B, Hkv, Q, D] of layer ``layer`` at the batch's write positions."""
        rows = batch.slot_ids[:, None]
        self.keys[layer][rows, :, batch.write_positions] = key.permute(0, 2, 1, 3).to(self.keys.dtype)
        self.values[layer][rows, :, batch.write_positions] = value.permute(0, 2, 1, 3).to(self.values.dtype)

    def read(self, layer: int, batch: CacheBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values [B, Hkv, T, D] of the batch's slots over the first T = num_context positions."""
        t = batch.num_context
        return self.keys[layer][batch.slot_ids, :, :t], self.values[layer][batch.slot_ids, :, :t]

    def read_prefix(self, layer: int, slot_ids: torch.Tensor, num_context: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values [B, Hkv, num_context, D] of ``slot_ids`` (callers mask positions past each length)."""
        return self.keys[layer][slot_ids, :, :num_context], self.values[layer][slot_ids, :, :num_context]

    def commit(self, batch: CacheBatch) -> None:
        """Count the batch's real query tokens as cached."""
        self.lengths[batch.slot_ids] = batch.end

    def truncate(self, slot_ids: torch.Tensor, lengths: torch.Tensor) -> None:
        """Roll the slots back to ``lengths`` cached tokens (entries beyond are ignored from now on)."""
        lengths = lengths.to(device=self.lengths.device, dtype=torch.long)
        if bool((lengths > self.lengths[slot_ids]).any()):
            raise ValueError("truncate can only shorten a slot's cache")
        self.lengths[slot_ids.to(self.lengths.device)] = lengths

    def reset(self, slot_ids: torch.Tensor) -> None:
        """Empty the slots (for a new request)."""
        self.lengths[slot_ids.to(self.lengths.device)] = 0


__all__ = ["CacheBatch", "StaticKVCache"]
