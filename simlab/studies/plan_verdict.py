"""A plan's answer in two or three sentences, from plan.json: the deployment to run (drafter, γ, scheduler, GPUs,
layout), what it costs per hour and per million output tokens, what it achieves against each SLA term with its
headroom, and what it saves against serving without speculation (or what speculation would buy at the same
price). The report page opens with it and ``simlab plan`` prints it last."""

from __future__ import annotations

import math
from typing import Optional

from simlab.studies.labels import deployment_label, gpus_label, replicas_label

RULES = {
    "simplest": "at equal cost, no speculation before speculation, fewer moving parts before more, then the most "
                "headroom against the SLA",
    "fastest": "at equal cost, the faster median user first",
}


def usd_per_million_tokens(d: dict) -> Optional[float]:
    """A deployment's dollars per million output tokens at the simulated load."""
    rate = (d.get("metrics") or {}).get("output_throughput")
    return d["usd_per_hour"] / (rate * 3600.0 / 1e6) if rate else None


def _money(d: dict) -> str:
    per_mtok = usd_per_million_tokens(d)
    return f"${d['usd_per_hour']:,.2f}/h" + (f", ${per_mtok:,.3f} per million output tokens" if per_mtok else "")


def _speculation(d: dict) -> str:
    parts = d.get("moving_parts") or []
    return "without speculation" if not parts else f"with arm {d['arm']} ({', '.join(parts)})"


def _achieved(doc: dict, d: dict) -> str:
    terms = []
    for metric, (op, limit) in doc["sla"].items():
        value = (d.get("metrics") or {}).get(metric)
        if not isinstance(value, (int, float)):
            continue
        slack = (d.get("headroom") or {}).get(f"{metric}{op}{limit:g}")
        room = f", {slack:.0%} headroom" if isinstance(slack, (int, float)) and math.isfinite(slack) else ""
        terms.append(f"{metric} {value:,.4g} against {op} {limit:g}{room}")
    return "; ".join(terms)


def _binding_metric(doc: dict) -> Optional[str]:
    metrics = list(doc["sla"])
    return next((m for m in metrics if "tpot" in m), metrics[0] if metrics else None)


def _cheapest(entries: list[dict], metric: Optional[str] = None) -> Optional[dict]:
    """The cheapest of ``entries``; at equal price the best at ``metric`` (lower is better for a latency)."""
    def key(d: dict) -> tuple:
        value = (d.get("metrics") or {}).get(metric) if metric else None
        return d["usd_per_hour"], value if isinstance(value, (int, float)) else math.inf

    return min(entries, key=key) if entries else None


def verdict(doc: dict) -> str:
    """The plan's answer in words (plan.json's ``verdict``)."""
    best = doc["best"]
    incomplete = "" if doc["complete"] else " (the time budget ran out: the best found so far)"
    if best is None:
        near = doc.get("closest")
        text = f"No deployment within the plan's max_gpus meets the SLA{incomplete}."
        if near:
            text += (f" Closest: {replicas_label(near)} of {deployment_label(near)} {_speculation(near)} "
                     f"({gpus_label(near)}, ${near['usd_per_hour']:,.2f}/h), which misses "
                     f"{'; '.join(near['failing'])}.")
        return text
    text = (f"Run {doc['model']} on {replicas_label(best)} of {deployment_label(best)} {_speculation(best)}: "
            f"{gpus_label(best)}, {_money(best)}{incomplete}. Against the SLA: {_achieved(doc, best)}.")
    arms = [d for d in doc["best_by_arm"].values() if d]
    plain = _cheapest([d for d in arms if not d.get("moving_parts")])
    metric = _binding_metric(doc)
    speculative = _cheapest([d for d in arms if d.get("moving_parts")], metric)
    planned_plain = any(not parts for parts in (doc.get("arm_moving_parts") or {}).values())
    if best.get("moving_parts"):
        if plain is not None:
            saved = plain["usd_per_hour"] - best["usd_per_hour"]
            text += (f" It saves ${saved:,.2f}/h ({saved / plain['usd_per_hour']:.0%}) against the cheapest "
                     f"deployment without speculation, {replicas_label(plain)} of {deployment_label(plain)} "
                     f"({gpus_label(plain)}, ${plain['usd_per_hour']:,.2f}/h).")
        elif planned_plain:
            text += " No deployment without speculation meets the SLA within max_gpus."
    elif speculative is not None:
        mine, theirs = ((best.get("metrics") or {}).get(metric), (speculative.get("metrics") or {}).get(metric))
        buys = (f"; it would buy {metric} {theirs:,.4g} against {mine:,.4g}"
                if isinstance(mine, (int, float)) and isinstance(theirs, (int, float)) else "")
        if math.isclose(speculative["usd_per_hour"], best["usd_per_hour"], rel_tol=1e-9):
            text += (f" Speculation (arm {speculative['arm']}) costs the same, ${best['usd_per_hour']:,.2f}/h, and "
                     f"saves nothing at this load{buys}.")
        else:
            text += (f" Speculation costs more here: its cheapest, arm {speculative['arm']}, needs "
                     f"${speculative['usd_per_hour']:,.2f}/h{buys}.")
    text += _sensitivity(doc)
    text += f" Chosen by: the lowest {doc['objective']}; {RULES[doc.get('prefer', 'simplest')]}."
    return text


def _sensitivity(doc: dict) -> str:
    """A sentence on the chosen deployment at 20 % more load (plan.json's ``sensitivity``)."""
    spread = doc.get("sensitivity")
    if not spread:
        return ""
    factors = spread["load_factors"]
    higher = max(factors, key=float)
    share = f"{float(higher) - 1:.0%}"
    entry = factors[higher]
    if entry["meets_sla"]:
        least = min(entry["headroom"].values(), default=None)
        room = f", {least:.0%} headroom on its binding term" if least is not None else ""
        return f" At {share} more load it still meets the SLA{room}."
    missed = [name for name, slack in entry["headroom"].items() if slack < 0]
    text = f" At {share} more load it misses {', '.join(missed) or 'the SLA'}"
    other = spread.get("at_higher_load")
    if other:
        return (text + f"; the cheapest that holds there is {replicas_label(other)} of {deployment_label(other)} "
                f"{_speculation(other)} ({gpus_label(other)}, ${other['usd_per_hour']:,.2f}/h).")
    return text + f"; {spread.get('at_higher_load_note', 'no alternative tried holds there')}."


def plan_warnings(doc: dict) -> list[str]:
    """What a reader must know before acting on the plan: where speculation is in it and its gain on this kind of
    target (dense or a mixture of experts) is stated wrong against public runs (the gain check), and that a
    mixture of experts rests on the MoE calibration (:mod:`simlab.studies.study_warnings`)."""
    from simlab.studies.study_warnings import gain_caution, is_moe_model, moe_notice

    moe = is_moe_model(doc["model"])
    out = [n for n in (moe_notice([doc["model"]]),) if n] + unserved_warnings(doc)
    if moe is None or not any(parts for parts in (doc.get("arm_moving_parts") or {}).values()):
        return out
    return out + [c for c in (gain_caution(moe),) if c]


def unserved_warnings(doc: dict) -> list[str]:
    """An arm the plan could deploy on none of its layouts: the release each stack simulates does not run its
    drafter (the families' "not served" reasons), so the answer leaves it out."""
    families = (doc.get("search") or {}).get("families") or []
    planned = {f["arm"] for f in families if f["status"] != "not served"}
    reasons: dict[str, str] = {}
    for f in families:
        if f["status"] == "not served" and f["arm"] not in planned:
            reasons.setdefault(f["arm"], f["reason"])
    return [f"{arm} is not in this plan: {why}. A plan.stack whose release serves it plans it."
            for arm, why in reasons.items()]

