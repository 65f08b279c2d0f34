"""A sweep's question and its answer in a few sentences, computed from its results: what was simulated (model,
GPUs, engine and release, load in requests/s or users, the SLO), which arm wins at the lightest and the heaviest
load and by how much over the baseline, from which load speculation stops paying, and where an SLA stops being
reachable. The report page opens with it, sweep.json holds it (``verdict``) and ``simlab sweep`` prints it last.
"""

from __future__ import annotations

from typing import Optional

import pandas as pd

from simlab.studies import study_setting
from simlab.studies.figures import format_value, short_field
from simlab.studies.gains import THROUGHPUT, no_spec_arm, sla_table
from simlab.studies.sweep_data import SweepData

PAYS = 0.01  # an arm "beats" the baseline at a load when it gives more than 1 % more of the measure there
GOODPUT = "request_goodput"
SLO_SHARE = 0.9  # the SLO is reachable at a load where some arm serves this share of its requests within it


def baseline_arm(data: SweepData) -> str:
    """The arm gains are stated against: the sweep's ``baseline``, else the no-speculation arm, else the first."""
    return data.doc.get("baseline") or no_spec_arm(data) or data.arms[0]


def measure(data: SweepData) -> tuple[str, str]:
    """The figure an arm wins on: goodput where arrivals are open (a trace or a rate: what is served within the
    SLO is the point), else output tokens/s per GPU."""
    settings = data.settings
    if (data.x_is_rate and settings and settings[0].get("slo") and GOODPUT in data.table
            and data.table[GOODPUT].notna().any()):
        return GOODPUT, "goodput (requests/s meeting the SLO)"
    return THROUGHPUT, "output tokens/s per GPU"


def load_words(data: SweepData, row: pd.Series, served: bool = True) -> str:
    """A point's load in words: its users (and requests/s served), its arrival rate, or the varied field."""
    setting = data.point_settings.get(row["point"]) or {}
    if data.x == "workload.concurrency":
        rate_served = row.get("request_throughput") if served else None
        rate = (f" ({rate_served:.3g} requests/s served)" if isinstance(rate_served, float) and pd.notna(rate_served)
                else "")
        users = int(row[data.x])
        return f"{users} user{'s' if users != 1 else ''}{rate}"
    if setting.get("arrival_rate_rps") and data.x.startswith("workload."):
        return f"{setting['arrival_rate_rps']:.3g} requests/s ({short_field(data.x)} {format_value(row[data.x])})"
    return f"{short_field(data.x)} {format_value(row[data.x])}"


def _where(facet: str) -> str:
    return f" ({facet})" if facet else ""


def _number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _deployable(data: SweepData) -> list[str]:
    """The arms a person can run: not a scheduler that reads the outcomes (an oracle)."""
    from simlab.schedulers.registry import REGISTRY

    def knows_truth(arm: str) -> bool:
        entry = REGISTRY.get(data.arm_kinds.get(arm, {}).get("scheduler", ""))
        return entry is not None and entry.reads_truth

    return [a for a in data.arms if not knows_truth(a)]


def _winner(frame: pd.DataFrame, key: str, arms: list[str]) -> Optional[pd.Series]:
    scored = frame[frame[key].notna() & frame["arm"].isin(arms)]
    return scored.loc[scored[key].idxmax()] if len(scored) else None


def _gain(frame: pd.DataFrame, arm: str, base: str, key: str) -> Optional[float]:
    mine, theirs = frame[frame["arm"] == arm][key], frame[frame["arm"] == base][key]
    if mine.empty or theirs.empty or not theirs.iloc[0]:
        return None
    return float(mine.iloc[0]) / float(theirs.iloc[0]) - 1.0


def _pct(gain: float) -> str:
    """A gain as a signed percentage, a decimal kept below 5 % (``+0.4%``, ``+23%``)."""
    return f"{gain:+.1%}" if abs(gain) < 0.05 else f"{gain:+.0%}"


def _span(gains: list[float]) -> str:
    low, high = _pct(min(gains)), _pct(max(gains))
    return low if low == high else f"{low} to {high}"


def _at_load(data: SweepData, load, key: str, name: str, base: str) -> Optional[str]:
    """Who wins at one load. Panels that split the same GPUs (prefill:decode pools) compete with each other;
    other panels (GPUs, layouts, confidence heads) are each their own question, their winners grouped."""
    arms = _deployable(data)
    winners = []
    for facet, frame in data.facet_frames():
        here = frame[frame[data.x] == load]
        row = _winner(here, key, arms)
        if row is not None:
            winners.append((facet, row, _gain(here, row["arm"], base, key)))
    if not winners:
        return None
    load_text = load_words(data, winners[0][1], served=len(winners) == 1)
    if len(winners) == 1 or "engine.disaggregation" in data.facets:
        facet, row, gain = max(winners, key=lambda w: w[1][key])
        versus = f", {_pct(gain)} over {base}" if gain is not None and row["arm"] != base else ""
        return f"at {load_text}, {row['arm']}{_where(facet)} gives the most {name}, {_number(row[key])}{versus}"
    by_arm: dict[str, list] = {}
    for facet, row, gain in winners:
        by_arm.setdefault(row["arm"], []).append(gain)
    parts = []
    for arm, gains in sorted(by_arm.items(), key=lambda kv: -len(kv[1])):
        known = [g for g in gains if g is not None]
        versus = f" ({_span(known)} over {base})" if known and arm != base else ""
        parts.append(f"{arm} in {len(gains)} of {len(winners)} panels{versus}")
    return f"at {load_text}, the most {name} comes from " + ", ".join(parts)


def _stops_paying(data: SweepData, base: str) -> list[str]:
    """Per facet: the load from which no other arm beats the baseline's tokens/s per GPU by more than PAYS;
    panels with the same outcome said once."""
    arms = [a for a in _deployable(data) if a != base]
    outcomes: dict[str, list[str]] = {}
    for facet, frame in data.facet_frames():
        frame = frame.assign(_x=data.x_values(frame)).sort_values("_x")
        loads = list(dict.fromkeys(frame[data.x]))
        beats = []
        for load in loads:
            here = frame[frame[data.x] == load]
            others = here[here["arm"].isin(arms)][THROUGHPUT]
            mine = here[here["arm"] == base][THROUGHPUT]
            beats.append(bool(len(mine) and len(others) and others.max() > float(mine.iloc[0]) * (1 + PAYS)))
        if not beats:
            continue
        if all(beats):
            outcome = f"some arm gives more than {PAYS:.0%} more output tokens/s per GPU than {base} at every load"
        elif not any(beats):
            outcome = f"no arm beats {base}'s output tokens/s per GPU by more than {PAYS:.0%} at any load"
        else:
            last = max(i for i, b in enumerate(beats) if b)
            if last + 1 >= len(loads):
                continue
            first_row = frame[frame[data.x] == loads[last + 1]].iloc[0]
            outcome = (f"from {load_words(data, first_row)} on, no arm beats {base}'s output tokens/s per GPU by "
                       f"more than {PAYS:.0%}")
        outcomes.setdefault(outcome, []).append(facet)
    total = len(list(data.facet_frames()))
    out = []
    for outcome, facets in outcomes.items():
        where = "" if total == 1 else (" in every panel" if len(facets) == total else
                                       f" ({'; '.join(facets)})")
        out.append(outcome + where)
    return out


def _sla_levels(data: SweepData, base: str) -> list[str]:
    """The per-user speed SLAs: the highest one some arm meets, and who gives the most tokens/s per GPU there."""
    levels = list(data.doc.get("sla_user_tok_s") or [])
    if not levels:
        return []
    table = sla_table(data, levels, base)
    met = table[table[THROUGHPUT].notna() & table["arm"].isin(_deployable(data))]
    out = []
    unmet = [lv for lv in levels if lv not in set(met["level"])]
    if len(met):
        top = met["level"].max()
        at_top = met[met["level"] == top]
        row = at_top.loc[at_top[THROUGHPUT].idxmax()]
        gain = row["vs_baseline"]
        versus = f", {_pct(gain)} over {base}" if pd.notna(gain) and row["arm"] != base else (
            f" ({base} does not reach it)" if row["arm"] != base else "")
        out.append(f"the fastest per-user speed SLA some arm meets is ≥ {top:g} tokens/s per user, where "
                   f"{row['arm']}{_where(row['facet'])} gives the most, {row[THROUGHPUT]:,.0f} tokens/s per GPU"
                   f"{versus}")
    reached = sorted(set(met[met["arm"] == base]["level"]))
    best_gains, best_arms = [], []
    for level in reached:  # where the baseline meets the SLA a gain over it is defined
        others = met[(met["level"] == level) & (met["arm"] != base) & met["vs_baseline"].notna()]
        if len(others):
            row = others.loc[others["vs_baseline"].idxmax()]
            best_gains.append(float(row["vs_baseline"]))
            best_arms.append(row["arm"])
    if best_gains:
        arms = ", ".join(dict.fromkeys(best_arms))
        span = f"≥ {reached[0]:g}" if len(reached) == 1 else f"≥ {reached[0]:g} to ≥ {reached[-1]:g}"
        out.append(f"over the per-user speed SLAs {base} meets ({span} tokens/s per user) the best arm ({arms}) "
                   f"gives {_span(best_gains)} tokens/s per GPU over {base}")
    if unmet:
        out.append(f"no arm reaches ≥ {min(unmet):g} tokens/s per user at any load of the sweep")
    return out


def _pools_against_colocated(data: SweepData, key: str, name: str) -> Optional[str]:
    """A disaggregation sweep at its heaviest load: the best prefill:decode split against the best co-located."""
    field = "engine.disaggregation"
    if field not in data.facets:
        return None
    table = data.table[data.table["arm"].isin(_deployable(data))]
    table = table.assign(_x=data.x_values(table))
    here = table[table["_x"] == table["_x"].max()]
    pooled = here[here[field].map(lambda v: bool(v))]
    colocated = here[here[field].map(lambda v: not v)]
    best_pooled, best_colocated = _winner(pooled, key, data.arms), _winner(colocated, key, data.arms)
    if best_pooled is None or best_colocated is None or not best_colocated[key]:
        return None
    gain = float(best_pooled[key]) / float(best_colocated[key]) - 1.0
    return (f"at {load_words(data, best_pooled)} the best split, {format_value(best_pooled[field])} with "
            f"{best_pooled['arm']}, gives {_pct(gain)} {name} against the best co-located replicas "
            f"({best_colocated['arm']}, {_number(best_colocated[key])})")


def _slo_reach(data: SweepData) -> Optional[str]:
    """Up to which load some arm serves SLO_SHARE of its requests within the SLO (goodput over throughput)."""
    if GOODPUT not in data.table or data.table[GOODPUT].isna().all() or not (data.settings and
                                                                            data.settings[0].get("slo")):
        return None
    table = data.table.assign(_x=data.x_values(data.table), _share=data.table[GOODPUT] / data.table[
        "request_throughput"])
    table = table[table["arm"].isin(_deployable(data))]
    held = table[table["_share"] >= SLO_SHARE]
    slo = study_setting.slo_text(data.settings[0]["slo"])
    if held.empty:
        return f"no arm serves {SLO_SHARE:.0%} of its requests within the SLO ({slo}) at any load"
    heaviest = held.loc[held["_x"].idxmax()]
    beyond = table[table["_x"] > heaviest["_x"]]
    if beyond.empty:
        return (f"some arm serves {SLO_SHARE:.0%} of its requests within the SLO ({slo}) at every load, "
                f"{heaviest['arm']} at the heaviest")
    first = beyond.loc[beyond["_x"].idxmin()]
    return (f"the SLO ({slo}) stops being reachable above {load_words(data, heaviest)}: from "
            f"{load_words(data, first)} on no arm serves {SLO_SHARE:.0%} of its requests within it")


def sweep_question(data: SweepData) -> str:
    """What the sweep asks, from what it varies."""
    base = baseline_arm(data)
    if "engine.disaggregation" in data.doc["fields"]:
        return ("Do prefill:decode pools pay against co-located replicas on the same GPUs, with and without "
                f"speculation, as the load rises (arms against {base})?")
    others = [short_field(f) for f in data.facets]
    across = f", across {', '.join(others)}" if others else ""
    return f"Which arm serves best as {short_field(data.x)} changes{across}, and what does it gain over {base}?"


def setting_sentence(data: SweepData) -> str:
    """Model, GPUs, engine, load and SLO, in one sentence."""
    settings = data.settings
    if not settings:
        return ""
    slo = study_setting.slo_text(settings[0].get("slo") or {})
    served = data.table["request_throughput"] if "request_throughput" in data.table else pd.Series(dtype=float)
    load = study_setting.load_text(settings)
    if data.x == "workload.concurrency" and served.notna().any():
        load += f", {served.min():.3g} to {served.max():.3g} requests/s served"
    return (f"{study_setting.hardware_text(settings)}; engine {study_setting.engine_text(settings)}; {load}"
            + (f"; SLO {slo}" if slo else "") + ".")


def sweep_verdict(data: SweepData) -> str:
    """The answer in words (sweep.json's ``verdict``)."""
    if data.table.empty:
        return "No point of the sweep finished: there is no answer."
    key, name = measure(data)
    base = baseline_arm(data)
    ordered = data.table.assign(_x=data.x_values(data.table)).sort_values("_x")
    loads = list(dict.fromkeys(ordered[data.x]))
    parts = [p for p in (_at_load(data, loads[0], key, name, base),
                         _at_load(data, loads[-1], key, name, base) if len(loads) > 1 else None) if p]
    text = "; ".join(parts)
    text = text[:1].upper() + text[1:] + "." if text else ""
    pools = _pools_against_colocated(data, key, name)
    extra = [*([pools] if pools else []), *_stops_paying(data, base), *_sla_levels(data, base)]
    slo = _slo_reach(data)
    if slo:
        extra.append(slo)
    for sentence in extra:
        text += f" {sentence[:1].upper()}{sentence[1:]}."
    return text.strip()
