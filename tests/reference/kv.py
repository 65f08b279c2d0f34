"""A replica's KV cache: the reserve and paged policies (docs/engine.md section 6) and the prefix cache
(section 7).

KV is counted in *units*: tokens under ``reserve``, blocks of ``block_size`` tokens under ``paged``. A running
request holds ``own_kv`` units of its own; the prefix cache holds its blocks (each charged ``units(tokens)``),
pinned by the running requests that use them. A request's own KV never includes the tokens of the prefix
blocks it pins: they are the cache's.
"""

from __future__ import annotations

from collections import OrderedDict

from .state import Request


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class PrefixCache:
    """Section 7: prefix blocks by hash id, least recently used first; each with its tokens and the ids of the
    running requests that pin it."""

    def __init__(self) -> None:
        self.blocks: OrderedDict[object, tuple[int, set[int]]] = OrderedDict()

    def leading_run(self, request: Request) -> list[tuple[object, int]]:
        """The longest run of the request's leading prefix blocks found in the cache."""
        run = []
        for hash_id, tokens in request.prefix_blocks:
            if hash_id not in self.blocks:
                break
            run.append((hash_id, tokens))
        return run

    def touch_and_pin(self, blocks: list[tuple[object, int]], request: Request) -> None:
        """Section 7 (hit): the blocks used become the most recent, in prompt order, and are pinned."""
        for hash_id, _ in blocks:
            self.blocks.move_to_end(hash_id)
            self.blocks[hash_id][1].add(request.id)
            request.pinned.append(hash_id)

    def insert(self, request: Request) -> list[int]:
        """Section 7 (insert): the request's prefix blocks not yet cached are added (most recent), pinned by it.
        Returns the tokens of each block added."""
        added = []
        for hash_id, tokens in request.prefix_blocks:
            if hash_id in self.blocks:
                continue
            self.blocks[hash_id] = (tokens, {request.id})
            request.pinned.append(hash_id)
            added.append(tokens)
        return added

    def unpin(self, request: Request) -> None:
        for hash_id in request.pinned:
            self.blocks[hash_id][1].discard(request.id)
        request.pinned = []

    def least_recent_unpinned(self):
        for hash_id, (_, pins) in self.blocks.items():
            if not pins:
                return hash_id
        return None


class KVCache:
    """Section 6: ``capacity_tokens`` of KV per replica under ``policy`` (reserve | paged), with the prefix cache
    of section 7 when ``prefix_caching``."""

    def __init__(self, policy: str, capacity_tokens: int, block_size: int, prefix_caching: bool,
                 prompt_only: bool = False) -> None:
        if policy not in ("reserve", "paged"):
            raise ValueError(f"kv_policy must be reserve or paged, not {policy!r}")
        self.paged = policy == "paged"
        self.block_size = block_size
        # section 6.2: num_blocks = floor(capacity / block_size)
        self.capacity = capacity_tokens // block_size if self.paged else capacity_tokens
        self.own = 0  # units held by running requests
        self.cache = PrefixCache() if prefix_caching else None
        self.num_evictions = 0
        self.prompt_only = prompt_only

    def units(self, tokens: int) -> int:
        return ceil_div(tokens, self.block_size) if self.paged else tokens

    def cached_units(self) -> int:
        if self.cache is None:
            return 0
        return sum(self.units(tokens) for tokens, _ in self.cache.blocks.values())

    def free(self) -> int:
        return self.capacity - self.own - self.cached_units()

    def tokens_in_use(self) -> int:
        """Section 8 ``kv_tokens``: reserved or allocated tokens plus cached blocks (paged: whole blocks)."""
        used = self.own + self.cached_units()
        return used * self.block_size if self.paged else used

    def make_room(self, need: int) -> bool:
        """Section 7 (capacity): evict unpinned cached blocks, least recent first, while fewer than ``need``
        units are free. Whether ``need`` units are free now."""
        while self.free() < need and self.cache is not None:
            victim = self.cache.least_recent_unpinned()
            if victim is None:
                break
            del self.cache.blocks[victim]
            self.num_evictions += 1
        return self.free() >= need

    # ---------------------------------------------------------------- admission (sections 6.1, 6.2, 7)
    def try_admit(self, request: Request) -> bool:
        """Admit ``request`` if its KV fits: allocate its units, use its cached prefix, set ``done``."""
        hit = self.cache.leading_run(request) if self.cache is not None else []
        while hit and sum(tokens for _, tokens in hit) > request.prefill_target - 1:
            hit.pop()  # section 7: only blocks within the first T - 1 tokens (at least one token is computed)
        hit_tokens = sum(tokens for _, tokens in hit)
        if self.paged:
            # section 6.2: blocks of the whole prefill, less what the cached prefix covers
            need = ceil_div(request.prefill_target, self.block_size) - sum(self.units(t) for _, t in hit)
        elif self.prompt_only:
            # section 9: a prefill replica reserves the prompt only
            need = request.prompt - hit_tokens
        else:
            # section 6.1: prompt + output, held until the request finishes (less what the cache holds)
            need = request.prompt + request.output - hit_tokens
        need = max(need, 0)
        if self.cache is not None:
            for hash_id, _ in hit:  # the blocks about to be used are not evicted to make room for them
                self.cache.blocks[hash_id][1].add(request.id)
        fits = self.make_room(need)
        if self.cache is not None:
            for hash_id, _ in hit:
                self.cache.blocks[hash_id][1].discard(request.id)
        if not fits:
            return False
        self.own += need
        request.own_kv = need
        cached = hit_tokens
        if self.cache is not None:
            self.cache.touch_and_pin(hit, request)
        request.done = cached
        if not request.admitted_before:
            request.cached_at_first_admission = cached
        request.admitted_before = True
        return True

    # ---------------------------------------------------------------- growth (section 6.2)
    def blocks_needed(self, request: Request, lookahead: int) -> int:
        """Blocks a decoding request must hold of its own: its context plus the lookahead slots it may verify,
        less the blocks of the cached prefix it pins."""
        total = ceil_div(request.context + lookahead, self.block_size)
        return max(total - sum(self.units(self.cache.blocks[h][0]) for h in request.pinned), 0)

    def take_one(self, request: Request) -> None:
        self.own += 1
        request.own_kv += 1

    # ---------------------------------------------------------------- prompt completion (section 7)
    def prompt_complete(self, request: Request) -> None:
        """Section 7 (insert): the request's uncached prefix blocks move from its own KV to the cache."""
        if self.cache is None:
            return
        for tokens in self.cache.insert(request):
            moved = self.units(tokens)
            request.own_kv -= moved
            self.own -= moved
        assert request.own_kv >= 0, "prefix blocks must be whole KV blocks except each prompt's last"

    # ---------------------------------------------------------------- disaggregation (section 9)
    def try_admit_remote(self, request: Request) -> bool:
        """A decode replica admits a request whose prompt's KV is on a prefill replica: the prompt's blocks
        (paged) or prompt + output (reserve)."""
        need = ceil_div(request.prompt, self.block_size) if self.paged else request.prompt + request.output
        if not self.make_room(need):
            return False
        self.own += need
        request.own_kv = need
        return True

    def hand_off(self, request: Request) -> None:
        """A prefill replica keeps the request's KV (its own units and pinned blocks) until it lands."""
        request.held_kv, request.own_kv = request.own_kv, 0
        request.held_pinned, request.pinned = request.pinned, []

    def release_held(self, request: Request) -> None:
        self.own -= request.held_kv
        request.held_kv = 0
        if self.cache is not None:
            for hash_id in request.held_pinned:
                self.cache.blocks[hash_id][1].discard(request.id)
        request.held_pinned = []

    def release(self, request: Request) -> None:
        """A request that finishes or is preempted releases its own KV and unpins its prefix blocks."""
        self.own -= request.own_kv
        request.own_kv = 0
        if self.cache is not None:
            self.cache.unpin(request)
