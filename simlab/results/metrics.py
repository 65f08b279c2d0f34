"""Records to summary metrics, named as vLLM's benchmark names them (times in milliseconds)."""

from __future__ import annotations

from typing import Optional, Union

import numpy as np

from simlab.config.scenario import SLO
from simlab.results.records import ArmRecords

LATENCY_KEYS = ("ttft", "tpot", "itl", "e2el")


def weighted_percentile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """np.percentile (linear) of the array in which values[i] appears weights[i] times, without building it."""
    keep = weights > 0
    values, weights = values[keep], weights[keep]
    if values.size == 0:
        return float("nan")
    order = np.argsort(values, kind="stable")
    values, counts = values[order], np.cumsum(weights[order])
    total = int(counts[-1])
    position = q / 100.0 * (total - 1)
    lower, upper = int(np.floor(position)), int(np.ceil(position))
    value_lower = values[np.searchsorted(counts, lower, side="right")]
    value_upper = values[np.searchsorted(counts, upper, side="right")]
    return float(value_lower + (value_upper - value_lower) * (position - lower))


def _stats(name: str, values_ms: np.ndarray, weights: Optional[np.ndarray] = None) -> dict:
    if weights is None:
        if values_ms.size == 0:
            return {f"{k}_{name}_ms": None for k in ("mean", "median", "p90", "p99")}
        return {
            f"mean_{name}_ms": float(values_ms.mean()),
            f"median_{name}_ms": float(np.median(values_ms)),
            f"p90_{name}_ms": float(np.percentile(values_ms, 90)),
            f"p99_{name}_ms": float(np.percentile(values_ms, 99)),
        }
    if weights.sum() == 0:
        return {f"{k}_{name}_ms": None for k in ("mean", "median", "p90", "p99")}
    return {
        f"mean_{name}_ms": float(np.average(values_ms, weights=weights)),
        f"median_{name}_ms": weighted_percentile(values_ms, weights, 50),
        f"p90_{name}_ms": weighted_percentile(values_ms, weights, 90),
        f"p99_{name}_ms": weighted_percentile(values_ms, weights, 99),
    }


def per_request_latencies(result: ArmRecords, output_tokens: np.ndarray) -> dict[str, np.ndarray]:
    """TTFT, E2E latency and TPOT per request in ms (TPOT is NaN for single-token outputs)."""
    log = result.log
    ttft = (log.first_token_s - log.arrival_s) * 1e3
    e2el = (log.finish_s - log.arrival_s) * 1e3
    decode_s = log.finish_s - log.first_token_s
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(output_tokens > 1, decode_s * 1e3 / (output_tokens - 1), np.nan)
    return {"ttft": ttft, "e2el": e2el, "tpot": tpot}


def summarise(result: ArmRecords, prompt_tokens: np.ndarray, output_tokens: np.ndarray, gamma: int,
              slo: Optional[SLO], *, kv_capacity: Union[int, np.ndarray, None] = None, prefix_caching: bool = False,
              num_gpus: int = 1) -> dict:
    """The contract's METRICS for one arm, plus speculation, queueing and KV extras (``kv_capacity``: one
    replica's KV tokens, or each replica's by index when pools differ, for the usage fractions; ``num_gpus``: every
    GPU the arm's replicas occupy, replicas x GPUs per replica, for the per-GPU figures)."""
    log, steps = result.log, result.steps
    completed = int(np.isfinite(log.finish_s).sum())
    start_s = float(np.nanmin(log.arrival_s))
    duration_s = float(np.nanmax(log.finish_s)) - start_s
    lat = per_request_latencies(result, output_tokens)
    multi = output_tokens > 1
    decoding = steps["decode_requests"] > 0
    request_steps = int(steps["decode_requests"].sum())
    verify_tokens = int(steps["verify_tokens"].sum())
    accepted_tokens = int(steps["accepted_tokens"].sum())
    emitted_decode = int(steps["emitted_tokens"].sum())
    drafted_tokens = int(steps["drafted_tokens"].sum())
    metrics: dict = {
        "completed": completed,
        "duration_s": duration_s,
        "request_throughput": completed / duration_s,
        "output_throughput": float(output_tokens.sum()) / duration_s,
        "total_token_throughput": float(prompt_tokens.sum() + output_tokens.sum()) / duration_s,
        "num_gpus": int(num_gpus),
        "output_throughput_per_gpu": float(output_tokens.sum()) / duration_s / num_gpus,
        "request_goodput": _goodput(lat, slo, duration_s),
    }
    metrics.update(_stats("ttft", lat["ttft"]))
    metrics.update(_stats("tpot", lat["tpot"][multi]))
    metrics.update(_stats("itl", steps["step_s"] * 1e3, steps["decode_requests"]))
    metrics.update(_stats("e2el", lat["e2el"]))
    with np.errstate(divide="ignore", invalid="ignore"):
        user_tok_s = (output_tokens[multi] - 1) / (log.finish_s[multi] - log.first_token_s[multi])
    metrics["median_user_tok_s"] = float(np.median(user_tok_s)) if user_tok_s.size else None
    positions = result.positions
    metrics.update(
        {
            "spec_decode_acceptance_length": emitted_decode / request_steps if request_steps else None,
            "spec_decode_acceptance_rate": accepted_tokens / verify_tokens if verify_tokens else None,
            "spec_decode_per_position_acceptance_rates": [
                (int(a) / int(v)) if v else None for a, v in zip(positions.accepted, positions.verified)
            ],
            "spec_decode_conditional_acceptance_rates": [
                (int(a) / int(r)) if r else None for a, r in zip(positions.accepted, positions.reached)
            ],
            "spec_decode_num_verified_per_position": positions.verified.tolist(),
            "spec_decode_num_reached_per_position": positions.reached.tolist(),
            "spec_decode_num_accepted_per_position": positions.accepted.tolist(),
            "mean_verify_tokens_per_step": float(steps["verify_tokens"][decoding].mean()) if decoding.any() else 0.0,
            "mean_batch_requests": float(steps["num_requests"].mean()) if len(steps["num_requests"]) else 0.0,
            "mean_verify_tokens_per_request_step": verify_tokens / request_steps if request_steps else 0.0,
            "verify_utilization": verify_tokens / drafted_tokens if drafted_tokens else None,
            "mean_drafted_tokens_per_step": float(steps["drafted_tokens"][decoding].mean()) if decoding.any() else 0.0,
            "wasted_verify_tokens": verify_tokens - accepted_tokens,
            "num_steps": int(len(steps["step_s"])),
            "mean_step_ms": float(steps["step_s"].mean() * 1e3) if len(steps["step_s"]) else None,
            "little_mean_in_system": result.time_in_system_area / duration_s,
            "little_arrival_rate_x_mean_e2el": completed / duration_s * float(np.mean(lat["e2el"])) / 1e3,
            "sim_wall_s": result.sim_wall_s,
        }
    )
    metrics.update(_kv_metrics(result, prompt_tokens, kv_capacity, prefix_caching))
    return metrics


def _kv_metrics(result: ArmRecords, prompt_tokens: np.ndarray, kv_capacity: Union[int, np.ndarray, None],
                prefix_caching: bool) -> dict:
    """Preemptions, the prefix cache's hit rate, and KV usage over time (step-time weighted, per replica)."""
    counters, steps = result.counters, result.steps
    out: dict = {
        "num_preemptions": counters.num_preemptions,
        "prefix_cache_hit_rate": counters.cached_prompt_tokens / float(prompt_tokens.sum()) if prefix_caching else None,
    }
    step_s, kv = steps["step_s"], steps["kv_tokens"]
    if isinstance(kv_capacity, np.ndarray) and len(step_s) and step_s.sum() > 0:  # by replica: pools differ
        usage = kv / kv_capacity[steps["replica"]]
        out["mean_kv_usage"] = float(np.average(usage, weights=step_s))
        out["max_kv_usage"] = float(usage.max())
    elif kv_capacity and len(step_s) and step_s.sum() > 0:
        out["mean_kv_usage"] = float(np.average(kv, weights=step_s)) / kv_capacity
        out["max_kv_usage"] = float(kv.max()) / kv_capacity
    else:
        out["mean_kv_usage"] = out["max_kv_usage"] = None
    return out


def _goodput(lat: dict[str, np.ndarray], slo: Optional[SLO], duration_s: float) -> Optional[float]:
    if slo is None:
        return None
    ok = np.ones(len(lat["ttft"]), dtype=bool)
    if slo.ttft_ms is not None:
        ok &= lat["ttft"] <= slo.ttft_ms
    if slo.tpot_ms is not None:
        ok &= ~(lat["tpot"] > slo.tpot_ms)  # single-token requests have no TPOT and pass
    if slo.e2el_ms is not None:
        ok &= lat["e2el"] <= slo.e2el_ms
    return float(ok.sum()) / duration_s
