"""A disaggregated engine's pools, sized and checked before any arm runs: KV per replica of each pool, and
the KV bytes per token the link moves (docs/engine.md section 9)."""

from __future__ import annotations

from typing import Iterable, Optional

import numpy as np

from simlab.common.errors import InputError
from simlab.engine.simulate import PoolSizes

FIELD = "engine.disaggregation"


def pool_sizes(engine, cost, kv_capacity: int, requests, file, methods: Iterable[str] = ()) -> Optional[PoolSizes]:
    """None for a co-located engine; else the pools' KV and the link's bytes per token. Raises
    :class:`InputError` when the link's bytes are unknown or a request does not fit a replica of its pool."""
    split = engine.disaggregation
    if split is None:
        return None
    if engine.replicas != 1:
        raise InputError(
            "with engine.disaggregation the pools' sizes are disaggregation.prefill_replicas and decode_replicas",
            file=file, field="engine.replicas", value=engine.replicas, valid="1 (or leave it out)")
    if split.decode_router is None and engine.router == "prefix_aware":
        raise InputError(
            "the decode pool keeps no prefix cache; engine.router applies to both pools unless each has its own",
            file=file, field=f"{FIELD}.decode_router", value="(not given)", valid="round_robin or least_loaded")
    bytes_per_token = split.kv_bytes_per_token or cost.kv_transfer_bytes_per_token()
    if bytes_per_token is None:
        raise InputError(
            "the hardware model does not know the KV bytes per token the link moves",
            file=file, field=f"{FIELD}.kv_bytes_per_token", value="(not given)",
            valid="a positive number of bytes (the whole replica's KV per token), or a roofline hardware model",
        )
    prefill_kv = split.prefill_kv_cache_tokens or kv_capacity
    decode_kv = split.decode_kv_cache_tokens or kv_capacity
    prompt = requests.prompt_tokens
    _check_pool_fits(prompt, prefill_kv, engine, "its prompt", "a prefill replica's cache", "prefill_kv_cache_tokens",
                     split.prefill_kv_cache_tokens, file)
    _check_pool_fits(prompt + requests.output_tokens, decode_kv, engine, "prompt + output", "a decode replica's cache",
                     "decode_kv_cache_tokens", split.decode_kv_cache_tokens, file)
    return PoolSizes(prefill_kv_tokens=int(prefill_kv), decode_kv_tokens=int(decode_kv),
                     kv_bytes_per_token=float(bytes_per_token), draft_kv=split.draft_kv,
                     draft_kv_bytes_per_token=_draft_bytes(split, cost, set(methods), file))


def _draft_bytes(split, cost, methods: set[str], file) -> dict[str, float]:
    """The drafter's KV bytes per token of each arm's method (``transfer``), after checking that the hardware
    model can price what ``draft_kv`` asks of it."""
    out = {}
    for method in sorted(methods - {"none"}):
        if split.draft_kv == "recompute":
            known = cost.draft_prefill_s(method, 1) is not None
        else:
            out[method] = split.draft_kv_bytes_per_token or cost.draft_kv_bytes_per_token(method)
            known = out[method] is not None
        if not known:
            raise InputError(
                f"the hardware model does not know the {method} drafter's KV ({split.draft_kv})",
                file=file, field=f"{FIELD}.draft_kv", value=split.draft_kv,
                valid="a roofline hardware model, a profile derived from one, or draft_kv_bytes_per_token")
    return out


def check_fits(need: np.ndarray, capacity: int, engine, *, what: str, where: str, file, field: str, value) -> None:
    """InputError unless every request's KV (``need`` tokens each, whole blocks under paged KV) fits alone in
    ``capacity`` tokens; ``what`` and ``where`` name the need and the cache in the message."""
    block = engine.block_size if engine.kv_policy == "paged" else 1
    need = -(-need // block) * block
    usable = capacity // block * block
    if need.max() <= usable:
        return
    worst = int(np.argmax(need))
    raise InputError(
        f"request {worst} needs {int(need[worst])} KV tokens ({what}) but {where} holds {usable}",
        file=file, field=field, value=value, valid=f"at least {int(need.max())} tokens, or a workload with shorter "
        "requests")


def _check_pool_fits(need: np.ndarray, capacity: int, engine, what: str, where: str, own_field: str,
                     given: Optional[int], file) -> None:
    """:func:`check_fits` for one pool, naming its own capacity field when given, else engine.kv_cache_tokens."""
    field, value = ((f"{FIELD}.{own_field}", given) if given is not None
                    else ("engine.kv_cache_tokens", engine.kv_cache_tokens))
    check_fits(need, capacity, engine, what=what, where=where, file=file, field=field, value=value)
