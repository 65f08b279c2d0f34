"""KV over a block's steps: paged growth with preemption at an iteration's start, how many steps a block may
take before growth could fail, and the KV tokens in use at each step (the steps table's ``kv_tokens``)."""

from __future__ import annotations

from typing import Callable

import numpy as np

from simlab.engine.kv import KVPool


def _units(kv: KVPool, tokens: np.ndarray) -> np.ndarray:
    return -(-tokens // kv.unit_tokens)


def _needed(kv: KVPool, request_id: np.ndarray, context: np.ndarray, max_len: np.ndarray, slots=None) -> np.ndarray:
    """Blocks each request must hold to write its context and lookahead slots (``max_len``, or for a tree arm
    ``slots[max_len]``: the tree's nodes that deep), less the cached blocks it shares."""
    lookahead = max_len if slots is None else slots[max_len]
    return _units(kv, context + lookahead) - kv.num_shared[request_id] * kv.block_units


def grow(kv: KVPool, decode, prefilling: list[list[int]], gamma: int, preempt: Callable[[int], None], slots=None
         ) -> None:
    """Give each decoding request, in admission order, the blocks of this iteration's lookahead; when none are
    free (after evicting unpinned cached blocks), ``preempt`` the newest running request, possibly itself."""
    request_id = decode.request_id
    need = _needed(kv, request_id, decode.context, np.minimum(gamma, decode.remaining - 1), slots)
    deficit = np.maximum(need - kv.own[request_id], 0)
    total = int(np.add.reduce(deficit))
    if total == 0:
        return
    if kv.make_room(total):
        kv.own[request_id] += deficit
        kv.own_total += total
        return
    newest_last = [int(r) for r in request_id] + [entry[0] for entry in prefilling]
    gone: set[int] = set()
    for row, rid in enumerate(request_id.tolist()):
        if rid in gone:
            continue
        more = int(need[row] - kv.own[rid])
        while more > 0 and not kv.grow(rid, more):
            victim = newest_last.pop()
            gone.add(victim)
            preempt(victim)
            if victim == rid:
                break


def safe_steps(kv: KVPool, decode, prefilling: list[list[int]], gamma: int, max_steps: int, slots=None) -> int:
    """How many iterations from now no growth can fail: in the worst case every request emits 1 + gamma tokens
    per step, and requests completing their prefill now decode from the next step."""
    ids = np.concatenate([decode.request_id, np.array([e[0] for e in prefilling], dtype=np.int64)])
    context = np.concatenate([decode.context, np.array([e[2] + 1 for e in prefilling], dtype=np.int64)])
    if not len(ids):
        return max_steps
    own = kv.own[ids]
    later = np.arange(1, max_steps)[:, None] * (1 + gamma)  # [J, 1] worst-case tokens emitted by step j
    need = _needed(kv, ids[None, :], context[None, :] + later, np.full(1, gamma), slots)
    deficit = np.add.reduce(np.maximum(need - own[None, :], 0), axis=1)  # [J], non-decreasing
    fits = deficit <= kv.free
    return 1 + (int(fits.argmin()) if not np.logical_and.reduce(fits) else max_steps - 1)


def series(kv: KVPool, roster, block, count: int, finish_step: np.ndarray | None, finishing: list[int], gamma: int,
           slots=None) -> np.ndarray:
    """KV tokens in use at each of the block's first ``count`` steps (after that step's growth); for paged KV
    the growth of steps 1.. is applied to the pool for the requests still running after the block. A request
    finishing at step k holds its KV through k (the finish callback releases it). ``finish_step`` may be None
    with reserved KV when no request of the roster finishes in the block."""
    if kv.paged:
        units = _paged_units(kv, roster, block, count, finish_step, gamma, kv.own[roster.request_id], slots)
    elif finish_step is None:
        units = np.full(count, kv.used, dtype=np.int64)
    else:  # what a request holds does not change: the pool loses each finished one's after its step
        own0 = kv.own[roster.request_id]
        released = np.bincount(np.minimum(finish_step, count - 1) + 1, weights=own0, minlength=count + 1)
        units = kv.used - np.add.accumulate(released[:count]).astype(np.int64)
    if finishing and count > 1:  # requests whose completing prefill emitted their last token: gone after step 0
        units[1:] -= int(np.add.reduce(kv.own[np.array(finishing, dtype=np.int64)]))
    return units * kv.unit_tokens


def _paged_units(kv: KVPool, roster, block, count: int, finish_step: np.ndarray, gamma: int, own0: np.ndarray,
                 slots=None) -> np.ndarray:
    """Paged KV units in use at each step: each running request's blocks grow with what it emitted."""
    ids = roster.request_id
    others = kv.used - int(np.add.reduce(own0))  # units of requests outside the roster and of cached blocks
    holding = np.arange(count)[:, None] <= finish_step[None, :]  # [count, N]: not finished before step k
    held = own0[None, :]
    if count > 1:
        emitted = block.emitted[:count]
        before = np.add.accumulate(emitted, axis=0) - emitted
        left = roster.remaining[None, :] - before
        need = np.where(block.active[:count], _needed(kv, ids[None, :], roster.context[None, :] + before,
                                                      np.minimum(gamma, left - 1), slots), 0)
        held = np.maximum(np.maximum.accumulate(need, axis=0), held)  # blocks are kept until release
        stays = finish_step >= count
        kv.own[ids[stays]] = held[count - 1, stays]
        kv.own_total += int(np.add.reduce(held[count - 1, stays] - own0[stays]))
    return np.add.reduce(np.where(holding, held, 0), axis=1) + others
