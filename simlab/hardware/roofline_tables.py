"""What a table cost model built from another source (the silicon database, the operation model) takes from the
calibrated roofline of the same GPU, model, stack and tensor parallelism: the drafter curves, tabulated per drafter
shape, and the KV cache capacity."""

from __future__ import annotations

from functools import lru_cache
from typing import Optional

from simlab.common.errors import InputError

DRAFT_BATCH_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


@lru_cache(maxsize=16)
def roofline_for(gpu: str, model: str, stack: str, tensor_parallel: int, precision: str = "bf16",
                 kv_precision: str = "bf16", expert_parallel: int = 1):
    """The calibrated roofline for the same GPU, model, stack, TP and EP, weights' precision (which sets the memory
    left for KV) and KV precision (the tokens it holds), or None when it lacks them."""
    try:
        return _build(gpu, model, stack, tensor_parallel, precision, kv_precision, expert_parallel, None)
    except InputError:
        return None


def _build(gpu: str, model: str, stack: str, tensor_parallel: int, precision: str, kv_precision: str,
           expert_parallel: int, file: Optional[str]):
    """The calibrated roofline of these fields, or its :class:`InputError` naming ``file`` and ``hardware``."""
    from simlab.config.hardware import RooflineHardware
    from simlab.hardware.roofline_build import build_roofline

    return build_roofline(RooflineHardware(kind="roofline", gpu=gpu, model=model, stack=stack,
                                           tensor_parallel=tensor_parallel, expert_parallel=expert_parallel,
                                           precision=precision, kv_precision=kv_precision),
                          file=file, field="hardware")


def required_roofline(gpu: str, model: str, stack: str, tensor_parallel: int, precision: str = "bf16",
                      kv_precision: str = "bf16", expert_parallel: int = 1, *, file: Optional[str] = None):
    """:func:`roofline_for`, or its :class:`InputError` naming the ``hardware`` field where it cannot be built (a
    model that does not fit, a tensor-parallel degree it does not split into): a table that takes its KV capacity
    and drafters' host times from it cannot price a layout the roofline refuses."""
    found = roofline_for(gpu, model, stack, tensor_parallel, precision, kv_precision, expert_parallel)
    if found is not None:
        return found
    return _build(gpu, model, stack, tensor_parallel, precision, kv_precision, expert_parallel, file)


def drafter_curves(roofline) -> dict:
    """Drafter cost curves from ``roofline``: the autoregressive step (eagle3's second step less its first) and
    what its round costs once beside its steps (its first step less one step), the parallel block (dflash, over
    its tokens), the sequential head (dspark less dflash), all at no context, and each forward's seconds per token
    of the drafting requests' context (``context_token_s``: the roofline's drafters read it linearly in the
    context, taken at many requests per attention group, a parallel block at 7 drafts); empty without a
    roofline. So a table's eagle3 round of any length costs what the roofline's does."""
    if roofline is None:
        return {}
    points = list(DRAFT_BATCH_TOKENS)
    one = [roofline.draft_s("eagle3", 1, n) for n in points]
    auto = [max(0.0, roofline.draft_s("eagle3", 2, n) - first) for n, first in zip(points, one)]
    round_s = [max(0.0, first - step) for first, step in zip(one, auto)]
    parallel = [roofline.draft_s("dflash", 1, n) for n in points]
    head = [max(0.0, roofline.draft_s("dspark", 1, n) - roofline.draft_s("dflash", 1, n)) for n in points]
    out = {name: {"batch_tokens": points, "step_s": curve}
           for name, curve in (("autoregressive", auto), ("autoregressive_round", round_s), ("parallel", parallel),
                               ("sequential_head", head))}
    if getattr(roofline, "compressed", None) is None:  # a compressed model's drafter keeps a window: not linear
        requests, context = 64 * int(getattr(roofline, "groups", 1) or 1), 1e6

        def added(method: str, gamma: int) -> float:
            return roofline.draft_s(method, gamma, requests, context) - roofline.draft_s(method, gamma, requests, 0.0)

        out["autoregressive"]["context_token_s"] = max(0.0, (added("eagle3", 2) - added("eagle3", 1)) / context)
        # a block's queries blend its KV read with attention FLOPs in the calibrated knee: taken at 7 a request
        out["parallel"]["context_token_s"] = max(0.0, added("dflash", 7) / context)
    return out


def kv_source(roofline) -> Optional[dict]:
    """What a table records of the roofline whose KV it takes (its ``provenance.kv_roofline``), so that the
    drafter's share of the KV per token is known (``TableCostModel.draft_kv_bytes_per_token``)."""
    if roofline is None:
        return None
    return {k: v for k, v in roofline.describe().items() if k in ("kind", "gpu", "model", "tensor_parallel",
                                                                   "parameters")}


def kv_tokens(roofline) -> Optional[int]:
    """The KV cache capacity of ``roofline`` (None without one)."""
    return None if roofline is None else roofline.kv_cache_tokens()
