"""What a what-if writes: whatif.json (the contract's ``sla``, ``vary`` and ``arms``, and how the search went) and
probes.csv (every probe), from :mod:`simlab.studies.whatif`'s question and probes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from simlab.studies.grid import data_sha256
from simlab.studies.labels import split_label
from simlab.studies.search import Answer
from simlab.studies.split_whatif import answer_entry, total_of
from simlab.studies.table_csv import metric_columns

WhatIf = Any  # a simlab.studies.whatif.WhatIf (which imports this module)


@dataclass
class Probe:
    """One simulated value of the varied field for one arm, and whether it met the SLA."""

    value: Any
    arm: int
    meets: bool
    metrics: dict


def whatif_document(question: WhatIf, probes: list[Probe], answers_by_arm: dict[int, Answer],
                    command: Optional[str]) -> dict:
    """whatif.json: the contract's ``sla``, ``vary`` and ``arms`` (``load``, ``metrics``, ``gain_vs_baseline``)
    plus how the search went."""
    from simlab.common.version import __version__

    doc: dict[str, Any] = {
        "generator": f"simlab {__version__}",
        "sla": question.sla.document(),
        "vary": question.field,
        "baseline": question.baseline,
        "scenario_file": str(question.file),
        "scenario_sha256": data_sha256(question.data),
        "command": command,
        "name": question.name,
    }
    by_arm: dict[int, list[Probe]] = {}
    for probe in probes:
        by_arm.setdefault(probe.arm, []).append(probe)
    if question.range is None:
        doc["at"] = {"field": question.field, "value": question.at_value}
        baseline = by_arm[question.arm_labels.index(question.baseline)][0].metrics
        doc["arms"] = {}
        for arm, label in enumerate(question.arm_labels):
            metrics = by_arm[arm][0].metrics
            doc["arms"][label] = {
                "meets": question.sla.meets(metrics), "failing": question.sla.failing(metrics),
                "median_user_tok_s": metrics.get("median_user_tok_s"),
                "output_throughput_per_gpu": metrics.get("output_throughput_per_gpu"),
                "gain_vs_baseline": _gain(metrics, baseline), "metrics": metrics,
            }
        return doc
    rng = question.range
    doc.update({"find": rng.find, "range": [rng.low, rng.high], "integer": rng.integer,
                "rtol": None if rng.integer else rng.rtol, "start": question.start})
    answers: dict[str, dict] = {}
    if question.split:
        doc["split_search"] = True
    for arm, name in enumerate(question.arm_labels):
        answer = answers_by_arm[arm]
        if question.split:
            answers[name] = answer_entry(probes, arm, answer)
            continue
        mine = by_arm.get(arm, [])
        at_answer = next((p.metrics for p in mine if answer.value is not None and p.value == answer.value), None)
        answers[name] = {"load": answer.value, "metrics": at_answer, "at_bound": answer.at_bound,
                         "num_probes": len(mine), "monotone": _monotone(mine, rng.find)}
    base = answers[question.baseline]["metrics"]
    for entry in answers.values():
        entry["gain_vs_baseline"] = _gain(entry["metrics"], base)
    doc["arms"] = answers
    return doc


def _gain(metrics: Optional[dict], baseline: Optional[dict]) -> Optional[float]:
    """Output tokens/s per GPU over the baseline's, minus 1 (each at its own answer)."""
    if not metrics or not baseline:
        return None
    mine, theirs = metrics.get("output_throughput_per_gpu"), baseline.get("output_throughput_per_gpu")
    if mine is None or not theirs:
        return None
    return mine / theirs - 1.0


def _monotone(probes: list[Probe], find: str) -> bool:
    """Whether the probes agree with one threshold (no failing value on the side that should meet)."""
    for a in probes:
        for b in probes:
            lower, upper = (a, b) if a.value < b.value else (b, a)
            if lower.value == upper.value:
                continue
            if find == "largest" and upper.meets and not lower.meets:
                return False
            if find == "smallest" and lower.meets and not upper.meets:
                return False
    return True


def probe_rows(question: WhatIf, probes: list[Probe]) -> tuple[list[str], list[list[Any]]]:
    """probes.csv: probe order, the varied value, arm, whether it met the SLA, every scalar metric."""
    metrics = metric_columns(p.metrics for p in probes)
    if question.split:  # the split as P:D, and its parts
        header = ["probe", question.field, "replicas", "prefill_replicas", "decode_replicas", "arm", "meets",
                  *metrics]
        rows = [[i, split_label(p.value), total_of(p.value), p.value["prefill_replicas"], p.value["decode_replicas"],
                 question.arm_labels[p.arm], p.meets, *(p.metrics.get(k) for k in metrics)]
                for i, p in enumerate(probes)]
        return header, rows
    header = ["probe", question.field, "arm", "meets", *metrics]
    rows = [[i, p.value, question.arm_labels[p.arm], p.meets, *(p.metrics.get(k) for k in metrics)]
            for i, p in enumerate(probes)]
    return header, rows
