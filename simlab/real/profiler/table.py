"""A :class:`ProfileResult` as a simulator hardware profile: the contract's ``kind: table`` mapping with provenance.

- ``verify``: rows by TOTAL context tokens (every context whose row is complete), columns by batch tokens;
- ``draft.parallel``: over ``R x gamma`` block tokens, at the spec's gamma (the gamma sweep is in provenance);
- ``draft.sequential_head`` and ``draft.autoregressive``: over requests R (left out when not measured);
- ``prefill.per_token_s``: the largest prefill chunk's seconds divided by its tokens;
- ``cuda_graph_buckets``: the capture sizes measured with a CUDA graph (only when graphs were used);
- ``kv_cache_tokens``: on CUDA, what vLLM's start-up profiling would leave for the KV cache.

Monotone fix: engines make their measured tables monotone (vLLM takes a running maximum); so does this, in
batch tokens and then in context for the verify grid, and in size for each draft curve. The raw medians are kept
under ``provenance.raw``.
"""

from __future__ import annotations

import platform
from datetime import datetime, timezone
from typing import Any, Optional

import numpy as np

from simlab.common.version import __version__
from simlab.real.profiler.models import ProfiledModels, cpu_description
from simlab.real.profiler.runner import ProfileResult
from simlab.real.profiler.spec import PLACEMENT_NOTE, capture_buckets

SIGNIFICANT_DIGITS = 6
GPU_MEMORY_UTILIZATION = 0.9
KV_BLOCK_TOKENS = 16
METHOD_NOTE = (
    "Each point is built once with static shapes, warmed up, then timed over the replays; the median is kept. "
    "CUDA: the step is captured in a CUDA graph and every replay is timed with CUDA events (eager with events "
    "where capture failed, listed under graph_fallbacks). CPU: time.perf_counter around each run, torch threads "
    "pinned. Host-side batch planning (cache plan, masks) is done before timing, as engines prepare inputs "
    "outside their graphs."
)
DRAFT_NOTES = {
    "parallel": "Drafter.draft's computation: draft layers over R x block_length tokens attending to "
                "draft_context_per_request injected context tokens per request, then the shared LM head over "
                "the gamma predicting positions. Appending the new context features (fc fusion + per-layer K/V "
                "projection after each verify) is not included.",
    "sequential_head": "one position of Drafter.sample at temperature 1 for R requests: W1[x] lookup, rank-r "
                       "projection W2 to the vocabulary added to the block's logits, confidence head, softmax, "
                       "inverse-CDF draw.",
    "autoregressive": "modelled from the drafter's first layer: one target-shaped decoder layer over R tokens "
                      "(one query each, attending to draft_context_per_request cached tokens) + the target's "
                      "full-vocabulary LM head, i.e. an MTP-1-like step; EAGLE-3's 3h->h fusion and reduced "
                      "draft vocabulary are not modelled.",
}


def monotone(values: list[float]) -> list[float]:
    """The running maximum: non-decreasing, as engines make their measured cost tables."""
    return np.maximum.accumulate(np.asarray(values, dtype=float)).tolist() if values else []


def monotone_grid(rows: list[list[float]]) -> list[list[float]]:
    """Running maximum along each row (batch tokens), then down each column (context): monotone in both."""
    grid = np.maximum.accumulate(np.asarray(rows, dtype=float), axis=1)
    return np.maximum.accumulate(grid, axis=0).tolist()


def verify_grid(result: ProfileResult) -> tuple[list[int], list[int], list[list[float]]]:
    """Contexts with a complete row, the batch sizes of the first row, and the raw medians [context][batch]."""
    first = result.spec.context_tokens[0]
    columns = sorted(result.verify.get(first, {}))
    contexts = [c for c in sorted(result.verify) if all(b in result.verify[c] for b in columns)]
    raw = [[result.verify[c][b].median_s for b in columns] for c in contexts]
    return contexts, columns, raw


def table_from_result(result: ProfileResult, models: ProfiledModels, *, name: str, command: str,
                      device_info: dict[str, Any], date: Optional[str] = None) -> dict[str, Any]:
    """The profile mapping (see the module docstring); ``device_info`` from :func:`describe_device`."""
    spec = result.spec
    contexts, columns, raw = verify_grid(result)
    if not columns:
        raise ValueError("the result holds no verify point")
    data: dict[str, Any] = {
        "kind": "table", "name": name,
        "verify": {"batch_tokens": columns, "context_tokens": contexts, "step_s": _round(monotone_grid(raw))},
    }
    draft: dict[str, Any] = {}
    parallel = result.draft_parallel.get(spec.gamma, {})
    if parallel:
        requests = sorted(parallel)
        draft["parallel"] = {"batch_tokens": [r * spec.gamma for r in requests],
                             "step_s": _round(monotone([parallel[r].median_s for r in requests]))}
    for key, curve in (("autoregressive", result.autoregressive), ("sequential_head", result.sequential_head)):
        if curve:
            requests = sorted(curve)
            draft[key] = {"batch_tokens": requests, "step_s": _round(monotone([curve[r].median_s for r in requests]))}
    if draft:
        data["draft"] = draft
    if result.prefill:
        chunk = max(result.prefill)
        data["prefill"] = {"per_token_s": _round(result.prefill[chunk].median_s / chunk)}
    graphed = [b for b in columns if result.verify[contexts[0]][b].cuda_graph]
    buckets = capture_buckets(tuple(graphed)) if graphed else []
    if buckets:
        data["cuda_graph_buckets"] = buckets
    kv = kv_cache_plan(result, models, device_info)
    if kv is not None and kv["kv_cache_tokens"] > 0:
        data["kv_cache_tokens"] = kv["kv_cache_tokens"]
    data["provenance"] = _provenance(result, models, command=command, device_info=device_info, date=date,
                                     raw=raw, contexts=contexts, columns=columns, kv=kv)
    return data


def kv_cache_plan(result: ProfileResult, models: ProfiledModels, device_info: dict[str, Any]) -> Optional[dict]:
    """vLLM's start-up arithmetic on CUDA: ``floor((0.9 x memory - weights - peak activations) / KV bytes per
    token)`` in whole 16-token blocks, where a token's KV bytes cover the target's layers and the drafter's
    context cache. None off CUDA or without an activation measurement."""
    total = device_info.get("total_memory_bytes")
    if total is None or result.peak_activation_bytes is None:
        return None
    target, drafter = models.target, models.drafter
    element = target.dtype.itemsize
    weights = sum(p.numel() * p.element_size() for p in target.parameters())
    per_token = target.config.kv_bytes_per_token(element)
    if drafter is not None:
        weights += sum(p.numel() * p.element_size() for p in drafter.parameters())
        per_token += drafter.backbone_config.kv_bytes_per_token(element)
    free = GPU_MEMORY_UTILIZATION * total - weights - result.peak_activation_bytes
    tokens = max(0, int(free // per_token) // KV_BLOCK_TOKENS * KV_BLOCK_TOKENS)
    return {"kv_cache_tokens": tokens, "gpu_memory_utilization": GPU_MEMORY_UTILIZATION, "weight_bytes": weights,
            "peak_activation_bytes": result.peak_activation_bytes, "kv_bytes_per_token": per_token,
            "formula": "floor((gpu_memory_utilization x total memory - weight bytes - peak activation bytes of the "
                       "largest verify) / KV bytes per token (target + drafter context cache)), whole 16-token "
                       "blocks"}


def describe_device(device, threads: Optional[int]) -> dict[str, Any]:
    """Name, torch/CUDA versions, memory and threads of the device profiled."""
    import torch

    info: dict[str, Any] = {"type": device.type, "torch_version": str(torch.__version__),
                            "python_version": platform.python_version()}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(name=props.name, total_memory_bytes=int(props.total_memory), cuda_version=str(torch.version.cuda),
                    compute_capability=f"{props.major}.{props.minor}", multiprocessors=props.multi_processor_count)
    else:
        info.update(name=cpu_description(), machine=platform.machine(), torch_threads=torch.get_num_threads(),
                    threads_requested=threads)
    return info


def _provenance(result: ProfileResult, models: ProfiledModels, *, command: str, device_info: dict[str, Any],
                date: Optional[str], raw: list[list[float]], contexts: list[int], columns: list[int],
                kv: Optional[dict]) -> dict[str, Any]:
    spec = result.spec
    measured = {"parallel": bool(result.draft_parallel.get(spec.gamma)),
                "sequential_head": bool(result.sequential_head), "autoregressive": bool(result.autoregressive)}
    skipped = list(result.skipped)
    dropped = [c for c in result.verify if c not in contexts]
    skipped += [{"phase": "verify", "point": f"C={c}", "reason": "incomplete row left out of the grid"}
                for c in dropped]
    out: dict[str, Any] = {
        "generator": "simlab profile",
        "simlab_version": __version__,
        "date": date or datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "measured": True,
        "complete": result.finished and not skipped,
        "command": command,
        "device": device_info,
        "dtype": spec.dtype,
        "method": METHOD_NOTE,
        "warmup": spec.warmup,
        "replays": spec.replays,
        "statistic": "median",
        "cuda_graphs": any(t.cuda_graph for row in result.verify.values() for t in row.values()),
        "placement": PLACEMENT_NOTE,
        "context_axis": "total KV tokens of prior context read by the step (sum over its requests)",
        "query_tokens_per_request": spec.query_tokens_per_request,
        "gamma": spec.gamma,
        "draft_context_per_request": spec.draft_context_per_request,
        "draft_notes": {k: v for k, v in DRAFT_NOTES.items() if measured[k]},
        "monotone": "running maximum in batch tokens then in context (verify) and in size (draft curves), as "
                    "vLLM makes its tables monotone; raw medians under raw",
        "grid": spec.grid(),
        **models.describe(),
        "raw": _raw(result, raw, contexts, columns),
        "elapsed_s": round(result.elapsed_s, 1),
        "time_budget_s": spec.time_budget_s,
    }
    if result.prefill:
        out["prefill_chunk_tokens"] = max(result.prefill)
    if models.drafter is not None and models.drafter.markov_in is None:
        out["sequential_head_missing"] = "the drafter has no Markov head (DFlash): no sequential_head entry"
    if kv is not None:
        out["kv_cache"] = kv
    if skipped:
        out["skipped"] = skipped
    if result.notes:
        out["graph_fallbacks"] = result.notes
    return out


def _raw(result: ProfileResult, raw: list[list[float]], contexts: list[int], columns: list[int]) -> dict[str, Any]:
    out: dict[str, Any] = {"verify_step_s": _round(raw)}
    out["draft_parallel_by_gamma"] = {
        int(g): {"requests": sorted(c), "step_s": _round([c[r].median_s for r in sorted(c)])}
        for g, c in sorted(result.draft_parallel.items()) if c
    }
    for key in ("sequential_head", "autoregressive", "prefill"):
        curve = getattr(result, key)
        if curve:
            out[key] = {"sizes": sorted(curve), "step_s": _round([curve[n].median_s for n in sorted(curve)])}
    return out


def _round(value: Any) -> Any:
    if isinstance(value, list):
        return [_round(v) for v in value]
    return float(f"{float(value):.{SIGNIFICANT_DIGITS}g}")


__all__ = ["describe_device", "kv_cache_plan", "monotone", "monotone_grid", "table_from_result", "verify_grid"]
