"""A what-if's question and its answer in a few sentences, from whatif.json: what was simulated (model, GPUs,
engine and release, load, the SLA), which arm reaches the most load (or needs the fewest replicas) within the
SLA, by how much against the baseline, and which arms meet it nowhere in the range. The report page opens with
it, whatif.json holds it (``verdict``, first) and ``simlab whatif`` prints it last."""

from __future__ import annotations

from typing import Any, Optional

from simlab.studies import study_setting
from simlab.studies.labels import split_label

REPLICA_FIELDS = ("engine.replicas", "engine.disaggregation")


def sla_text(doc: dict) -> str:
    """The SLA as written: ``p90_ttft_ms <= 1000, p90_tpot_ms <= 15``."""
    return ", ".join(f"{m} {op} {v:g}" for m, (op, v) in doc["sla"].items())


def whatif_question(doc: dict) -> str:
    """What the what-if asks."""
    sla = sla_text(doc)
    if "at" in doc:
        return f"At {doc['at']['field']} = {doc['at']['value']}, which arms meet {sla}, and how fast do they serve?"
    if doc.get("split_search"):
        return (f"How few replicas, split into prefill and decode pools, meet {sla} for each arm, and which split "
                "is it?")
    which = "largest" if doc["find"] == "largest" else "smallest"
    return f"What is the {which} {doc['vary']} at which each arm meets {sla}, and what does speculation change?"


def setting_sentence(setting: Optional[dict]) -> str:
    """Model, GPUs, engine, load and SLO of the what-if's scenario (before the varied field changes)."""
    if not setting:
        return ""
    slo = study_setting.slo_text(setting.get("slo") or {})
    return (f"{study_setting.hardware_text([setting])}; engine {study_setting.engine_text([setting])}; "
            f"{study_setting.load_text([setting])} as the scenario has it" + (f"; SLO {slo}" if slo else "") + ".")


def _value(doc: dict, entry: dict) -> str:
    value = entry["load"]
    if doc.get("split_search"):
        split = entry.get("split")
        return f"{value} replicas ({split_label(split)} prefill:decode)" if split else f"{value} replicas"
    rate = entry.get("arrival_rate_rps")
    text = f"{doc['vary']} {value:g}" if isinstance(value, (int, float)) else f"{doc['vary']} {value}"
    return text + (f" ({rate:.3g} requests/s)" if rate else "")


def _gpus(entry: dict) -> str:
    num = (entry.get("metrics") or {}).get("num_gpus")
    return f", {num} GPU{'s' if num != 1 else ''}" if isinstance(num, (int, float)) else ""


def whatif_verdict(doc: dict) -> str:
    """The answer in words (whatif.json's ``verdict``)."""
    arms, base = doc["arms"], doc["baseline"]
    if "at" in doc:
        meeting = [a for a, e in arms.items() if e["meets"]]
        if not meeting:
            return f"No arm meets {sla_text(doc)} at {doc['at']['field']} = {doc['at']['value']}."
        best = max(meeting, key=lambda a: arms[a].get("output_throughput_per_gpu") or 0.0)
        gain = arms[best].get("gain_vs_baseline")
        versus = f", {gain:+.1%} over {base}" if gain is not None and best != base else ""
        return (f"{len(meeting)} of {len(arms)} arms meet {sla_text(doc)}; {best} serves the most output tokens/s "
                f"per GPU among them, {arms[best]['output_throughput_per_gpu']:,.0f}{versus}.")
    found = {a: e for a, e in arms.items() if e["load"] is not None}
    nowhere = [a for a in arms if a not in found]
    if not found:
        return f"No arm meets {sla_text(doc)} anywhere from {doc['range'][0]:g} to {doc['range'][1]:g}."
    fewest = doc["find"] == "smallest"
    pick = min if fewest else max
    best_value = pick(e["load"] for e in found.values())
    winners = [a for a, e in found.items() if e["load"] == best_value]
    best = max(winners, key=lambda a: (found[a].get("metrics") or {}).get("output_throughput_per_gpu") or 0.0)
    entry = found[best]
    verb = "needs the fewest" if fewest else "reaches the most"
    text = f"{best} {verb}: {_value(doc, entry)}{_gpus(entry)}"
    if len(winners) > 1:
        text += f" (as do {', '.join(a for a in winners if a != best)})"
    if best != base:
        theirs = found.get(base)
        text += (f"; {base} {'needs' if fewest else 'reaches'} {_value(doc, theirs)}{_gpus(theirs)}" if theirs else
                 f"; {base} meets the SLA nowhere in the range")
    gain = entry.get("gain_vs_baseline")
    if gain is not None and best != base:
        text += f"; at its answer it serves {gain:+.1%} output tokens/s per GPU against {base} at {base}'s"
    text += "."
    bound = [a for a, e in found.items() if e.get("at_bound")]
    if bound:
        text += f" {', '.join(bound)} meet{'s' if len(bound) == 1 else ''} it up to the range's end."
    if nowhere:
        text += f" {', '.join(nowhere)} meet{'s' if len(nowhere) == 1 else ''} it nowhere in the range."
    return text


def answer_rates(question, answers: dict) -> dict[str, float]:
    """Each arm's arrival rate (requests/s) at its answer (``answers``: arm index -> search answer) where the
    what-if ``question`` (:class:`simlab.studies.whatif.WhatIf`) varies a field that scales arrivals."""
    from simlab.studies.sweep_data import RATE_FIELDS

    if question.field not in RATE_FIELDS:
        return {}
    rates = {}
    for arm, answer in answers.items():
        if answer.value is not None:
            rate = study_setting.scenario_setting(question.point(answer.value), question.file).get("arrival_rate_rps")
            if rate:
                rates[question.arm_labels[arm]] = rate
    return rates


def with_verdict(doc: dict, data: dict, file: Any, rates: Optional[dict[str, float]] = None) -> dict:
    """whatif.json with its answer first: ``verdict``, ``question``, ``setting`` (the sentence),
    ``warnings``, then the document, its ``scenario_setting`` and each answer's arrival rate where the varied
    field sets one (``rates``, by arm)."""
    from simlab.common.errors import InputError
    from simlab.studies.study_warnings import study_warnings
    from simlab.config import Arm

    try:
        setting = study_setting.scenario_setting(data, file)
    except (InputError, OSError) as err:  # a page without the sentence, never a failed what-if
        setting = {"error": str(err)}
    doc = dict(doc)
    for arm, rate in (rates or {}).items():
        doc["arms"][arm] = {**doc["arms"][arm], "arrival_rate_rps": rate}
    arms = [Arm.model_validate(raw) for raw in data.get("arms", [])]
    kinds = {arm.label: {"method": arm.method} for arm in arms}
    head = {"verdict": whatif_verdict(doc), "question": whatif_question(doc),
            "setting": setting_sentence(setting if "error" not in setting else None),
            "warnings": study_warnings([setting], kinds)}
    return {**head, **doc, "scenario_setting": setting}
