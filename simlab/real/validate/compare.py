"""What ``simlab validate`` compares, per arm, and the document it writes (``validation.json``).

Each compared metric is a METRICS key of the results folder; the error of a metric is the relative error of the
simulation, ``(simulated - real) / real``. Per-position acceptance is compared position by position (a list).
Three metrics carry the target bound (|error| <= 5 %): output throughput, mean TPOT and tau; the others are
reported for reading, without a bound.
"""

from __future__ import annotations

from typing import Any, Optional

COMPARED = (
    "output_throughput",
    "mean_tpot_ms", "median_tpot_ms", "p90_tpot_ms",
    "mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms",
    "spec_decode_acceptance_length",
    "spec_decode_per_position_acceptance_rates",
    "mean_verify_tokens_per_step",
)
BOUNDED = {"output_throughput": 0.05, "mean_tpot_ms": 0.05, "spec_decode_acceptance_length": 0.05}
"""The target: |relative error| <= 5 % on throughput, mean TPOT and tau (docs/validation.md)."""


def relative_error(simulated: Any, real: Any) -> Any:
    """(simulated - real) / real; a list compares element by element; None where either is missing or real is 0."""
    if isinstance(real, list) or isinstance(simulated, list):
        real, simulated = list(real or []), list(simulated or [])
        size = max(len(real), len(simulated))
        real += [None] * (size - len(real))
        simulated += [None] * (size - len(simulated))
        return [relative_error(s, r) for s, r in zip(simulated, real)]
    if real is None or simulated is None or real == 0:
        return None
    return (float(simulated) - float(real)) / float(real)


def arm_comparison(real: dict, simulated: dict, bounds: Optional[dict[str, float]] = None) -> dict:
    """``{"real": {METRICS}, "simulated": {METRICS}, "error": {metric: relative error}, "bounds": {...},
    "within_bounds": bool}`` for one arm (the compared metrics only)."""
    bounds = BOUNDED if bounds is None else bounds
    real_part = {key: real.get(key) for key in COMPARED}
    simulated_part = {key: simulated.get(key) for key in COMPARED}
    error = {key: relative_error(simulated_part[key], real_part[key]) for key in COMPARED}
    within = all(error[key] is not None and abs(error[key]) <= bound for key, bound in bounds.items())
    return {"real": real_part, "simulated": simulated_part, "error": error, "bounds": dict(bounds),
            "within_bounds": within}


def failures(document: dict) -> list[str]:
    """``ARM METRIC error (bound)`` for every bounded error that exceeds its bound (or is missing)."""
    out = []
    for arm, part in document["arms"].items():
        for key, bound in part["bounds"].items():
            err = part["error"].get(key)
            if err is None or abs(err) > bound:
                shown = "missing" if err is None else f"{err:+.1%}"
                out.append(f"{arm} {key} {shown} (bound {bound:.0%})")
    return out


__all__ = ["BOUNDED", "COMPARED", "arm_comparison", "failures", "relative_error"]
