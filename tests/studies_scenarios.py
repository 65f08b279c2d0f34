"""Scenarios for the studies tests whose answers are known by hand.

``linear_table``: a decode step over B batch tokens costs A_S + B_S * B seconds; prefill costs nothing, so a
closed loop of c users with equal lengths runs in lockstep: one free prefill step, then output - 1 decode steps
of c requests each. With no speculation TPOT is exactly A_S + B_S * c. With ``alpha = 1`` every draft is
accepted, so a fixed γ = 3 arm emits 4 tokens per step (96 decode tokens = 24 steps) and TPOT is
(A_S + B_S * 4c + DRAFT_S) / 4.
"""

from __future__ import annotations

A_S = 0.010
B_S = 0.0005
DRAFT_S = 0.002
OUTPUT_TOKENS = 97  # 96 decode tokens: a whole number of 4-token steps


def linear_table() -> dict:
    return {
        "kind": "table",
        "verify": {"batch_tokens": [1, 4096], "step_s": [A_S + B_S, A_S + B_S * 4096]},
        "draft": {"parallel": {"step_s": DRAFT_S}},
        "kv_cache_tokens": 10_000_000,
    }


def tpot_ms(concurrency_per_replica: int, gamma: int = 0) -> float:
    """The exact TPOT of the lockstep closed loop (all drafts accepted when gamma > 0)."""
    if gamma == 0:
        return (A_S + B_S * concurrency_per_replica) * 1e3
    tokens = gamma + 1
    return (A_S + B_S * tokens * concurrency_per_replica + DRAFT_S) / tokens * 1e3


def linear_scenario(**workload) -> dict:
    """No speculation and DFlash γ = 3 (every draft accepted) in a closed loop on the linear table."""
    return {
        "name": "linear",
        "seed": 3,
        "workload": {"kind": "closed_loop", "concurrency": 8, "num_requests": 400, "prompt_tokens": 16,
                     "output_tokens": OUTPUT_TOKENS, **workload},
        "hardware": linear_table(),
        "engine": {"max_num_seqs": 256, "max_batch_tokens": 8192},
        "acceptance": {"kind": "iid", "alpha": 1.0},
        "arms": [{"name": "no-spec", "method": "none"}, {"name": "dflash-3", "method": "dflash", "gamma": 3}],
    }


def small_sweep_scenario(sweep: dict) -> dict:
    """A cheap scenario (a few dozen requests, iid acceptance, three arms) holding ``sweep``."""
    return {
        "name": "small",
        "seed": 11,
        "workload": {"kind": "closed_loop", "concurrency": 4, "num_requests": 40, "prompt_tokens": 64,
                     "output_tokens": {"dist": "uniform", "low": 8, "high": 48}},
        "hardware": linear_table(),
        "engine": {"max_num_seqs": 64, "max_batch_tokens": 4096},
        "acceptance": {"kind": "iid", "alpha": 0.7},
        "slo": {"tpot_ms": 8.0},
        "arms": [
            {"name": "no-spec", "method": "none"},
            {"name": "dflash-3", "method": "dflash", "gamma": 3, "calibration": "none"},
            {"name": "dflash-hw", "method": "dflash", "gamma": 5, "calibration": "none",
             "scheduler": {"kind": "hardware_aware"}},
        ],
        "sweep": sweep,
    }


def closed_loop_throughput(concurrency: int, num_requests: int, gamma: int = 0) -> float:
    """Output tokens/s of the lockstep closed loop: full rounds of ``concurrency`` users, then one round of the
    rest; every round is a free prefill step and then its decode steps."""
    steps = (OUTPUT_TOKENS - 1) // (gamma + 1)
    draft_s = DRAFT_S if gamma else 0.0

    def round_s(users: int) -> float:
        return steps * (A_S + B_S * (gamma + 1) * users + draft_s)

    full, rest = divmod(num_requests, concurrency)
    duration_s = full * round_s(concurrency) + (round_s(rest) if rest else 0.0)
    return num_requests * OUTPUT_TOKENS / duration_s
