"""What-if over a disaggregated engine's split (``--vary engine.disaggregation``): per arm, the fewest replicas
P + D (hence GPUs) at which some prefill:decode split meets the SLA, and which split.

At each total N every split P = 1 .. N-1 is simulated (the SLA is two-sided in P: too few prefill replicas
miss TTFT, too few decode replicas miss TPOT); N meets the SLA when some split does. Over N the search brackets
and bisects as for ``engine.replicas`` (more replicas never hurt), so it simulates every split of a few totals.
At the answer the split chosen is the one whose median user is fastest (ties: fewer prefill replicas). The
search itself is the what-if's (whatif._search); this module says what a split is and what the answer holds.
"""

from __future__ import annotations

from simlab.studies.search import Answer
from simlab.studies.labels import split_label

SPLIT_FIELD = "engine.disaggregation"
DEFAULT_HIGH_FACTOR = 4  # without --high: up to 4 x the scenario's own total


def splits(total: int) -> list[dict]:
    """Every split of ``total`` replicas into two non-empty pools."""
    return [{"prefill_replicas": p, "decode_replicas": total - p} for p in range(1, total)]


def total_of(split: dict) -> int:
    return int(split["prefill_replicas"]) + int(split["decode_replicas"])


def best_split(probes: list, arm: int, total: int):
    """The probe of ``arm``'s chosen split at ``total``: meeting the SLA, fastest median user, fewest prefill."""
    meeting = [p for p in probes if p.arm == arm and p.meets and total_of(p.value) == total]
    if not meeting:
        return None
    return max(meeting, key=lambda p: ((p.metrics.get("median_user_tok_s") or 0.0), -p.value["prefill_replicas"]))


def answer_entry(probes: list, arm: int, answer: Answer) -> dict:
    """whatif.json's entry of one arm: ``load`` is the fewest replicas, ``split`` the chosen one, and every
    split that met the SLA at that total."""
    mine = [p for p in probes if p.arm == arm]
    chosen = best_split(probes, arm, answer.value) if answer.value is not None else None
    meeting = [split_label(p.value) for p in mine if p.meets and answer.value is not None
               and total_of(p.value) == answer.value]
    by_total: dict[int, bool] = {}
    for p in mine:
        by_total[total_of(p.value)] = by_total.get(total_of(p.value), False) or p.meets
    totals = sorted(by_total)
    monotone = all(by_total[a] <= by_total[b] for a, b in zip(totals, totals[1:]))
    return {"load": answer.value, "split": dict(chosen.value) if chosen else None,
            "metrics": chosen.metrics if chosen else None, "meeting_splits": meeting,
            "at_bound": answer.at_bound, "num_probes": len(mine), "monotone": monotone}
