"""What ``simlab validate`` compares, per arm, and the document it writes (``validation.json``).

Each compared metric is a METRICS key of the results folder; the error of a metric is the relative error of the
simulation, ``(simulated - real) / real``. Per-position acceptance is compared position by position (a list).
Three metrics carry the target (|error| <= 5 %): output throughput, mean TPOT and tau; the others are reported
for reading, without a bound. Each bounded metric also carries the relative standard error that sampling alone
gives the difference (:mod:`.noise`); its test bound is the larger of the target and ``Z`` such errors, so that a
run too small to resolve 5 % is not failed by chance, and a large enough run is held to the target.
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


def arm_comparison(real: dict, simulated: dict, noise: Optional[dict[str, float]] = None,
                   target: Optional[dict[str, float]] = None) -> dict:
    """One arm's part of ``validation.json`` (the compared metrics only): ``real``, ``simulated`` and ``error``
    per metric; per bounded metric the ``target``, the sampling ``noise`` (relative standard error) and the test
    ``bounds`` (the larger of the target and Z noise); whether the errors are ``within_target`` and
    ``within_bounds``."""
    from simlab.real.validate.noise import Z

    target = BOUNDED if target is None else target
    noise = {key: float((noise or {}).get(key, 0.0)) for key in target}
    real_part = {key: real.get(key) for key in COMPARED}
    simulated_part = {key: simulated.get(key) for key in COMPARED}
    error = {key: relative_error(simulated_part[key], real_part[key]) for key in COMPARED}
    bounds = {key: max(target[key], Z * noise[key]) for key in target}

    def within(limits: dict[str, float]) -> bool:
        return all(error[key] is not None and abs(error[key]) <= limit for key, limit in limits.items())

    return {"real": real_part, "simulated": simulated_part, "error": error, "target": dict(target),
            "noise": noise, "bounds": bounds, "within_target": within(target), "within_bounds": within(bounds)}


def failures(document: dict, *, against: str = "bounds") -> list[str]:
    """``ARM METRIC error (bound)`` for every bounded error beyond its test bound (``against="bounds"``) or the
    target (``"target"``), or missing."""
    out = []
    for arm, part in document["arms"].items():
        for key, bound in part[against].items():
            err = part["error"].get(key)
            if err is None or abs(err) > bound:
                shown = "missing" if err is None else f"{err:+.1%}"
                out.append(f"{arm} {key} {shown} ({'bound' if against == 'bounds' else 'target'} {bound:.1%})")
    return out


__all__ = ["BOUNDED", "COMPARED", "arm_comparison", "failures", "relative_error"]
