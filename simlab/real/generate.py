"""Plain (non-speculative) batched decoding with the target alone: the reference the engine must reproduce."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from simlab.real import streams
from simlab.real.sampling import sample_from_probs, target_probs
from simlab.real.target import TargetModel


def pad_batch(sequences: Sequence[Sequence[int]], pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids [B, max len] and lengths [B]."""
    lengths = torch.tensor([len(s) for s in sequences], dtype=torch.long)
    ids = torch.full((len(sequences), int(lengths.max()) if len(sequences) else 0), pad_id, dtype=torch.long)
    for row, seq in enumerate(sequences):
        ids[row, : len(seq)] = torch.tensor(list(seq), dtype=torch.long)
    return ids, lengths


@torch.inference_mode()
def plain_generate(
    target: TargetModel,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int | Sequence[int],
    *,
    temperature: float = 0.0,
    seed: int = 0,
    request_ids: Sequence[int] | None = None,
) -> list[list[int]]:
    """Decode one token per step for every prompt (ragged lengths batched in one cache), returning the new
    tokens of each. At temperature > 0, token t of request r uses the keyed uniform (seed, EMIT, r, t)."""
    num = len(prompts)
    budgets = [max_new_tokens] * num if isinstance(max_new_tokens, int) else list(max_new_tokens)
    ids = np.arange(num) if request_ids is None else np.asarray(request_ids)
    if num == 0:
        return []
    max_seq_len = max(len(p) + b for p, b in zip(prompts, budgets))
    cache = target.new_cache(num, max_seq_len)
    device = target.device
    input_ids, lengths = pad_batch(prompts)
    out = target(input_ids.to(device), cache=cache, query_lengths=lengths)
    last = target.logits(out.hidden[torch.arange(num), lengths.to(device) - 1])
    outputs: list[list[int]] = [[] for _ in range(num)]
    for step in range(max(budgets)):
        if temperature == 0.0:
            token = last.argmax(dim=-1)
        else:
            u = streams.uniforms(seed, streams.EMIT, ids, np.full(num, step), device=device)
            token = sample_from_probs(target_probs(last, temperature), u)
        for row in range(num):
            if step < budgets[row]:
                outputs[row].append(int(token[row]))
        if step + 1 >= max(budgets):
            break
        active = torch.tensor([step + 1 < b for b in budgets], dtype=torch.long)
        out = target(token[:, None], cache=cache, query_lengths=active)
        last = target.logits(out.hidden[:, 0])
    return outputs


__all__ = ["pad_batch", "plain_generate"]
