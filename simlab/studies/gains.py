"""The tables a sweep report prints: each arm's gain at each load, and the throughput per GPU each arm reaches
under a per-user speed SLA.

- **gains**: at each load, each arm's output tokens/s per GPU and median tokens/s per user, and their ratio
  (minus 1) to the no-speculation arm's and to the best fixed-γ arm's at the same load (best by that figure);
- **SLA levels**: for each per-user speed L, each arm's highest output tokens/s per GPU over the sweep's
  points whose median tokens/s per user is at least L (the point on its Pareto front an operator would pick),
  the load there, and the gain over the baseline arm at the same L. The answer is a point of the grid, not an
  interpolation: a denser grid gives a finer answer.
"""

from __future__ import annotations

from typing import Optional

import pandas as pd

from simlab.studies.sweep_data import SweepData

THROUGHPUT = "output_throughput_per_gpu"
USER_SPEED = "median_user_tok_s"


def no_spec_arm(data: SweepData) -> Optional[str]:
    return next((a for a in data.arms if data.arm_kinds.get(a, {}).get("method") == "none"), None)


def fixed_arms(data: SweepData) -> list[str]:
    """The fixed-γ arms: speculative arms whose scheduler reads neither confidences, costs nor outcomes (the
    scheduler registry's capability flags), so they verify every drafted position."""
    from simlab.schedulers.registry import REGISTRY

    def verifies_every_draft(kind: dict) -> bool:
        scheduler = REGISTRY.get(kind.get("scheduler", ""))
        return kind.get("method") not in (None, "none") and scheduler is not None and not (
            scheduler.reads_confidence or scheduler.reads_verify_cost or scheduler.reads_draft_cost
            or scheduler.reads_truth)

    return [a for a in data.arms if verifies_every_draft(data.arm_kinds.get(a, {}))]


def gain_table(data: SweepData) -> pd.DataFrame:
    """One row per facet × load × arm."""
    reference = no_spec_arm(data)
    fixed = fixed_arms(data)
    rows = []
    for facet, frame in data.facet_frames():
        for load, at_load in frame.groupby(data.x, sort=False):
            by_arm = at_load.set_index("arm")

            def value(arm: Optional[str], key: str):
                return by_arm.loc[arm, key] if arm is not None and arm in by_arm.index else None

            fixed_here = by_arm.loc[[a for a in fixed if a in by_arm.index]]
            best_thr = fixed_here[THROUGHPUT].idxmax() if len(fixed_here) else None
            best_user = fixed_here[USER_SPEED].idxmax() if len(fixed_here) and fixed_here[USER_SPEED].notna().any() \
                else None
            for arm in (a for a in data.arms if a in by_arm.index):
                rows.append({
                    "facet": facet, "load": load, "arm": arm,
                    THROUGHPUT: value(arm, THROUGHPUT),
                    "vs_no_spec": _ratio(value(arm, THROUGHPUT), value(reference, THROUGHPUT)),
                    "best_fixed": best_thr,
                    "vs_best_fixed": _ratio(value(arm, THROUGHPUT), value(best_thr, THROUGHPUT)),
                    USER_SPEED: value(arm, USER_SPEED),
                    "user_vs_no_spec": _ratio(value(arm, USER_SPEED), value(reference, USER_SPEED)),
                    "best_fixed_user": best_user,
                    "user_vs_best_fixed": _ratio(value(arm, USER_SPEED), value(best_user, USER_SPEED)),
                })
    return pd.DataFrame(rows)


def sla_table(data: SweepData, levels: list[float], baseline: Optional[str] = None) -> pd.DataFrame:
    """One row per facet × per-user speed level × arm (see the module's docstring)."""
    baseline = baseline or no_spec_arm(data) or data.arms[0]
    rows = []
    for facet, frame in data.facet_frames():
        for level in levels:
            best: dict[str, Optional[pd.Series]] = {}
            for arm in data.arms:
                mine = frame[(frame["arm"] == arm) & (frame[USER_SPEED] >= level)]
                best[arm] = mine.loc[mine[THROUGHPUT].idxmax()] if len(mine) else None
            base = best.get(baseline)
            for arm in data.arms:
                row = best[arm]
                rows.append({
                    "facet": facet, "level": level, "arm": arm,
                    THROUGHPUT: None if row is None else row[THROUGHPUT],
                    "load": None if row is None else row[data.x],
                    USER_SPEED: None if row is None else row[USER_SPEED],
                    "vs_baseline": _ratio(None if row is None else row[THROUGHPUT],
                                          None if base is None else base[THROUGHPUT]),
                    "baseline": baseline,
                })
    return pd.DataFrame(rows)


def _ratio(value, reference) -> Optional[float]:
    if value is None or reference is None or pd.isna(value) or pd.isna(reference) or reference == 0:
        return None
    return float(value) / float(reference) - 1.0
