"""A replica's KV cache: ``reserve`` (prompt + output tokens held from admission to finish) or ``paged``
(blocks of ``block_size`` tokens allocated as sequences grow, with preemption), either with a prefix cache.

Units are tokens for ``reserve`` and blocks for ``paged``. Each running request holds ``own`` units and pins
the cached prefix blocks it uses (``shared``). Cached blocks count against the capacity; unpinned ones are
evicted, least recent first, when a request needs room. docs/engine.md sections 6 and 7 specify it.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from simlab.engine.prefix_cache import PREFIX_BLOCK_TOKENS, PrefixCache


class KVPool:
    """The KV accounting of one replica (``paged`` when ``block_size`` is given, else ``reserve``)."""

    def __init__(self, capacity_tokens: int, num_requests: int, *, block_size: Optional[int] = None,
                 cache: Optional[PrefixCache] = None) -> None:
        self.paged = block_size is not None
        self.unit_tokens = block_size if block_size is not None else 1
        self.capacity = capacity_tokens // self.unit_tokens
        self.own = np.zeros(num_requests, dtype=np.int64)
        self.own_total = 0
        self.cache = cache
        self.block_units = PREFIX_BLOCK_TOKENS // self.unit_tokens  # units one cached prefix block holds
        self.shared: dict[int, list[int]] = {}  # request -> cached blocks it pins
        self.num_shared = np.zeros(num_requests, dtype=np.int64)

    # ------------------------------------------------------------------------------------------ state
    @property
    def used(self) -> int:
        return self.own_total + (len(self.cache) * self.block_units if self.cache is not None else 0)

    @property
    def free(self) -> int:
        return self.capacity - self.used

    def kv_tokens(self) -> int:
        """KV tokens in use: requests' own units and every cached block, in tokens."""
        return self.used * self.unit_tokens

    def units_for(self, tokens: int) -> int:
        return -(-tokens // self.unit_tokens)

    def make_room(self, units: int, keep: tuple[int, ...] = ()) -> bool:
        """Whether ``units`` are free, after evicting unpinned cached blocks (never those in ``keep``)."""
        short = units - self.free
        if short <= 0:
            return True
        if self.cache is None:
            return False
        wanted = math.ceil(short / self.block_units)
        if keep:
            self.cache.protect(keep)
        try:
            self.cache.evict(wanted)
        finally:
            if keep:
                self.cache.unprotect(keep)
        return units <= self.free

    # ------------------------------------------------------------------------------------------ requests
    def admit(self, request_id: int, units: int, hits: list[int]) -> bool:
        """Allocate ``units`` for a request that uses the cached blocks ``hits``; False (nothing changed)
        when they do not fit even after evicting unpinned cached blocks."""
        if not self.make_room(units, tuple(hits)):
            return False
        self.own[request_id] = units
        self.own_total += units
        if hits:
            self.cache.use(hits)
            self.shared[request_id] = list(hits)
            self.num_shared[request_id] = len(hits)
        return True

    def grow(self, request_id: int, units: int) -> bool:
        """Give a running request ``units`` more; False when they do not fit (nothing changed)."""
        if not self.make_room(units):
            return False
        self.own[request_id] += units
        self.own_total += units
        return True

    def insert_prompt(self, request_id: int, blocks: list[int]) -> None:
        """The request's prompt is complete: its full prefix blocks not cached yet join the cache, pinned by
        it, and their units move from the request to the cache."""
        added = self.cache.insert(blocks)
        if added:
            moved = len(added) * self.block_units
            self.own[request_id] -= moved
            self.own_total -= moved
            self.shared.setdefault(request_id, []).extend(added)
            self.num_shared[request_id] += len(added)

    def release(self, request_id: int) -> None:
        """The request finished or was preempted: its own units are freed and its cached blocks unpinned."""
        self.own_total -= int(self.own[request_id])
        self.own[request_id] = 0
        blocks = self.shared.pop(request_id, None)
        if blocks:
            self.cache.release(blocks)
            self.num_shared[request_id] = 0
