"""One replica's prefix cache: full 512-token prompt blocks, least-recently-used order, pinned while in use.

A request's cacheable blocks are the leading hash ids that cover full blocks of its prompt
(``floor(prompt / PREFIX_BLOCK_TOKENS)``; a partial last block is never cached, as vLLM caches full blocks
only). See docs/engine.md section 7.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from simlab.config.workload import PREFIX_BLOCK_TOKENS


class PrefixCache:
    """Cached prefix blocks by hash id, least recent first; each holds ``PREFIX_BLOCK_TOKENS`` tokens of KV
    and a pin count (the running requests using it)."""

    def __init__(self) -> None:
        self._pins: OrderedDict[int, int] = OrderedDict()  # hash id -> requests using it; order: LRU first
        self.num_unpinned = 0

    def __len__(self) -> int:
        return len(self._pins)

    def __contains__(self, block: int) -> bool:
        return block in self._pins

    def match(self, blocks: np.ndarray, prompt_tokens: int) -> int:
        """How many leading ``blocks`` (a request's cacheable hash ids) are cached, keeping at least one prompt
        token to compute (a fully cached prompt recomputes its last block)."""
        count = 0
        for block in blocks.tolist():
            if block not in self._pins:
                break
            count += 1
        while count and count * PREFIX_BLOCK_TOKENS > prompt_tokens - 1:
            count -= 1
        return count

    def use(self, blocks: list[int]) -> None:
        """A request starts using these cached blocks: most recent now, pinned."""
        for block in blocks:
            pins = self._pins.pop(block)
            if pins == 0:
                self.num_unpinned -= 1
            self._pins[block] = pins + 1

    def protect(self, blocks: tuple[int, ...]) -> None:
        """Pin ``blocks`` for a moment (while making room for the request that will use them), in place."""
        for block in blocks:
            pins = self._pins[block]
            if pins == 0:
                self.num_unpinned -= 1
            self._pins[block] = pins + 1

    def unprotect(self, blocks: tuple[int, ...]) -> None:
        """Undo :meth:`protect` (the order is unchanged)."""
        for block in blocks:
            pins = self._pins[block] - 1
            self._pins[block] = pins
            if pins == 0:
                self.num_unpinned += 1

    def insert(self, blocks: list[int]) -> list[int]:
        """Add the blocks not cached yet (most recent, pinned by their request); returns those added."""
        added = [b for b in blocks if b not in self._pins]
        for block in added:
            self._pins[block] = 1
        return added

    def release(self, blocks: list[int]) -> None:
        """A request stops using these blocks (it finished or was preempted)."""
        for block in blocks:
            pins = self._pins[block] - 1
            self._pins[block] = pins
            if pins == 0:
                self.num_unpinned += 1

    def evict(self, num_blocks: int) -> int:
        """Drop up to ``num_blocks`` unpinned blocks, least recent first; returns how many were dropped."""
        dropped = 0
        if num_blocks <= 0 or self.num_unpinned == 0:
            return 0
        for block in [b for b, pins in self._pins.items() if pins == 0][:num_blocks]:
            del self._pins[block]
            dropped += 1
        self.num_unpinned -= dropped
        return dropped


def cacheable_blocks(requests) -> list[np.ndarray]:
    """Each request's cacheable prefix block ids: the leading hash ids that cover full blocks of its prompt
    (none when the workload names no prefix blocks)."""
    full = requests.prompt_tokens // PREFIX_BLOCK_TOKENS
    empty = np.zeros(0, dtype=np.int64)
    if requests.prefix_ids is None:
        return [empty] * len(requests)
    offsets, ids = requests.prefix_ids
    starts = offsets[:-1]
    ends = np.minimum(offsets[1:], starts + full)
    return [ids[a:b] for a, b in zip(starts.tolist(), ends.tolist())]
