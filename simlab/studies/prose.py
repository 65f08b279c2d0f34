"""Write the results paragraph of each shipped study in docs/shipped-studies.md from its committed report
(reports/<study>/),
between the markers ``<!-- BEGIN study results: NAME -->`` and ``<!-- END study results: NAME -->``: every number in
those paragraphs is read from the same report the page shows.

    python scripts/study_prose.py            # rewrite the paragraphs (after python scripts/make_reports.py)
    python scripts/study_prose.py --check    # exit 1 if a paragraph differs from its report
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path

import pandas as pd

ORACLE_ARM = "oracle"  # the miscalibration study's arm label (a label, not a scheduler branch)
REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "shipped-studies.md"
THR, USER, VERIFY = "output_throughput_per_gpu", "median_user_tok_s", "mean_verify_tokens_per_request_step"


def _pct(x: float) -> str:
    return f"{x:+.0%}" if abs(x) >= 0.095 else f"{x:+.1%}"


def _range(low: float, high: float, spec: str = "{:.2f}") -> str:
    return spec.format(low) if spec.format(low) == spec.format(high) else f"{spec.format(low)}-{spec.format(high)}"


def _pivot(table: pd.DataFrame, value: str, index: str = "workload.concurrency") -> pd.DataFrame:
    return table.pivot(index=index, columns="arm", values=value)


def _sweep(name: str):
    from simlab.studies.sweep_data import read_sweep_folder

    return read_sweep_folder(REPO / "reports" / name)


def _first_below(thr: pd.DataFrame, arm: str, other: str):
    below = [load for load in thr.index if thr.loc[load, arm] < thr.loc[load, other]]
    return below[0] if below else None


def _best_runs(thr: pd.DataFrame, arms: list[str], prefix: str) -> list[str]:
    """The best of ``arms`` (named ``PREFIX<gamma>``) by load, as runs: ``γ = 7 at 1-8``."""
    best = thr[arms].idxmax(axis=1)
    runs, start = [], thr.index[0]
    for i, load in enumerate(thr.index):
        nxt = thr.index[i + 1] if i + 1 < len(thr.index) else None
        if nxt is None or best[nxt] != best[load]:
            runs.append(f"{best[load].replace(prefix, 'γ = ')} at {start}" + (f"-{load}" if load != start else ""))
            start = nxt
    return runs


def crossover() -> str:
    table = _sweep("crossover").table
    thr, user, verify = _pivot(table, THR), _pivot(table, USER), _pivot(table, VERIFY)
    fixed = ["fixed-3", "fixed-5", "fixed-7"]
    top = thr.index.max()
    runs = _best_runs(thr, fixed, "fixed-")
    hw_below = _first_below(thr, "hardware-aware", "no-spec")
    adaptive_vs_best = thr["adaptive"] / thr[fixed].max(axis=1) - 1
    best_arm_top = thr.loc[top].drop("no-spec").idxmax()
    return " ".join([
        f"One user gets {user.loc[1, 'fixed-7']:.0f} tokens/s with DSpark γ = 7 against {user.loc[1, 'no-spec']:.0f} "
        f"without speculation ({user.loc[1, 'fixed-7'] / user.loc[1, 'no-spec']:.1f}×).",
        f"The best fixed γ (output tokens/s per GPU) by users: {', '.join(runs)}.",
        f"Fixed γ = 7 against no speculation: {_pct(thr.loc[1, 'fixed-7'] / thr.loc[1, 'no-spec'] - 1)} at one user, "
        f"{_pct(thr.loc[128, 'fixed-7'] / thr.loc[128, 'no-spec'] - 1)} at 128 and "
        f"{_pct(thr.loc[top, 'fixed-7'] / thr.loc[top, 'no-spec'] - 1)} at {top} "
        f"({thr.loc[top, 'fixed-7']:,.0f} against {thr.loc[top, 'no-spec']:,.0f}); γ = 3 "
        f"{_pct(thr.loc[top, 'fixed-3'] / thr.loc[top, 'no-spec'] - 1)} at {top}.",
        f"The hardware-aware scheduler verifies {verify.loc[8, 'hardware-aware']:.2f} drafts per request and step at 8 "
        f"users, {verify.loc[32, 'hardware-aware']:.2f} at 32 and {verify.loc[top, 'hardware-aware']:.2f} at {top}; "
        + (f"from {hw_below} users on it gives less than no speculation "
           f"({_pct(thr.loc[top, 'hardware-aware'] / thr.loc[top, 'no-spec'] - 1)} at {top})."
           if hw_below is not None else "it never falls below no speculation."),
        f"`goodput` and `async_topk` give {_pct(thr.loc[top, 'goodput'] / thr.loc[top, 'no-spec'] - 1)} and "
        f"{_pct(thr.loc[top, 'async-topk'] / thr.loc[top, 'no-spec'] - 1)} over no speculation at {top} users.",
        f"`adaptive` is {_pct(adaptive_vs_best.loc[1])} against the best fixed γ at one user and "
        f"{_pct(adaptive_vs_best.loc[4:].min())} to {_pct(adaptive_vs_best.loc[4:].max())} from 4 users on; "
        f"the best arm at {top} users is `{best_arm_top}`.",
    ])


LAYOUTS = {"tp8": "tensor parallelism 8", "tp1 ep8": "eight attention groups with expert parallelism 8"}


def _layout(facet: str) -> str:
    """A facet title (``hardware=h200 deepseek-v3 fp8, tp8``) as the layout's name."""
    for key, name in sorted(LAYOUTS.items(), key=lambda kv: -len(kv[0])):
        if f", {key}" in facet:
            return name
    return facet


def deepseek_sla() -> str:
    from simlab.studies import gains

    data = _sweep("deepseek-sla")
    doc = json.loads((REPO / "reports" / "deepseek-sla" / "sweep.json").read_text(encoding="utf-8"))
    levels = [level for level in (doc.get("sla_user_tok_s") or []) if level <= 150]
    sla = gains.sla_table(data, levels, "mtp-1")

    def gains_of(arm: str, facet: str) -> str:
        parts = []
        for level in levels:
            rows = sla[(sla["facet"] == facet) & (sla["level"] == level)]
            row, base = rows[rows["arm"] == arm].iloc[0], rows[rows["arm"] == "mtp-1"].iloc[0]
            if pd.isna(row[THR]):
                parts.append(f"none at {level:g}")
            elif pd.isna(base[THR]):
                parts.append(f"{row[THR]:,.0f} tokens/s per GPU at {level:g} (MTP-1: none)")
            else:
                parts.append(f"{_pct(row['vs_baseline'])} at {level:g}")
        return ", ".join(parts)

    table = data.table
    dspark = [a for a in data.arms if a.startswith("dspark-5") and a != "dspark-5-oracle"]

    def best(arm: str, level: float) -> float:
        mine = table[(table["arm"] == arm) & (table[USER] >= level)]
        return float(mine[THR].max()) if len(mine) else float("nan")

    def load_of(arm: str, level: float) -> int:
        mine = table[(table["arm"] == arm) & (table[USER] >= level)]
        return int(mine.loc[mine[THR].idxmax(), data.x])

    either = []
    for level in (35, 80):
        top = max(dspark, key=lambda a: best(a, level))
        name = top.replace("dspark-5-", "") if top != "dspark-5" else "fixed"
        either.append(f"at {level} tokens/s/user DSpark with `{name}` gives {best(top, level):,.0f} output tokens/s "
                      f"per GPU ({load_of(top, level)} users) against MTP-1's {best('mtp-1', level):,.0f} "
                      f"({load_of('mtp-1', level)} users), {_pct(best(top, level) / best('mtp-1', level) - 1)}")
    sentences = []
    for facet, frame in data.facet_frames():
        thr = _pivot(frame, THR)
        hw_below = _first_below(thr, "dspark-5-hw", "no-spec")
        sentences.append(
            f"With {_layout(facet)}, against MTP-1 at a per-user speed SLA (tokens/s/user), the best output tokens/s "
            f"per GPU of DSpark γ = 5 with `goodput` is {gains_of('dspark-5-goodput', facet)}; fixed "
            f"{gains_of('dspark-5', facet)}; "
            + (f"the hardware-aware arm gives less than no speculation from {hw_below} users on."
               if hw_below is not None else "the hardware-aware arm never gives less than no speculation."))
    return " ".join(sentences + [f"Taking the better layout for each arm, {either[0]}; {either[1]}."])


INFERENCEX_TPOT_MS = {8: 12.8, 16: 17.2, 32: 25.6, 64: 34.6}  # issue #870, SGLang v0.5.7, 8 H200, 1k/1k


def deepseek_concurrency() -> str:
    data = _sweep("deepseek-concurrency")
    frames = {_layout(facet): frame for facet, frame in data.facet_frames()}
    tp8, dp8 = frames[LAYOUTS["tp8"]], frames[LAYOUTS["tp1 ep8"]]
    tpot = _pivot(tp8, "median_tpot_ms")
    against = ", ".join(f"{tpot.loc[u, 'no-spec']:.1f} ms against {ms} at {u} users" for u, ms in
                        INFERENCEX_TPOT_MS.items())
    sentences = [f"Without speculation at tensor parallelism 8 the median TPOT is {against} (InferenceX, fitted)."]
    fixed = ["dspark-3", "dspark-5", "dspark-7"]
    for name, frame in ((LAYOUTS["tp8"], tp8), (LAYOUTS["tp1 ep8"], dp8)):
        thr = _pivot(frame, THR)
        top = thr.index.max()
        runs = _best_runs(thr, fixed, "dspark-")
        adaptive = thr["adaptive"] / thr[fixed].max(axis=1) - 1
        sentences.append(
            f"With {name}: DSpark γ = 5 over MTP-1 {_pct(thr.loc[1, 'dspark-5'] / thr.loc[1, 'mtp-1'] - 1)} at one "
            f"user, {_pct(thr.loc[64, 'dspark-5'] / thr.loc[64, 'mtp-1'] - 1)} at 64 and "
            f"{_pct(thr.loc[top, 'dspark-5'] / thr.loc[top, 'mtp-1'] - 1)} at {top} (output tokens/s per GPU), over "
            f"no speculation {_pct(thr.loc[top, 'dspark-5'] / thr.loc[top, 'no-spec'] - 1)} at {top}; the best fixed "
            f"γ by users: {', '.join(runs)}; "
            f"`goodput` {_pct(thr.loc[top, 'goodput'] / thr[fixed].max(axis=1).loc[top] - 1)}"
            f" and `adaptive` {_pct(adaptive.loc[top])} against the best fixed γ at {top} users "
            f"({_pct(adaptive.min())} to {_pct(adaptive.max())} over all loads).")
    ratio = _pivot(dp8, THR) / _pivot(tp8, THR) - 1
    top = ratio.index.max()
    sentences.append(
        f"Eight attention groups against tensor parallelism 8: {_pct(ratio.loc[1, 'no-spec'])} at one user and "
        f"{_pct(ratio.loc[top, 'no-spec'])} at {top} without speculation, {_pct(ratio.loc[top, 'dspark-5'])} with "
        f"DSpark γ = 5 at {top}.")
    return " ".join(sentences)


def capacity() -> str:
    doc = json.loads((REPO / "reports" / "capacity" / "whatif.json").read_text(encoding="utf-8"))
    parts = []
    for arm, entry in doc["arms"].items():
        if entry["load"] is None:
            parts.append(f"`{arm}` none in the range")
            continue
        gain = "" if arm == doc["baseline"] else f", {_pct(entry['gain_vs_baseline'])} tokens/s per GPU"
        parts.append(f"`{arm}` {entry['load']:g}{gain}")
    return (f"Fewest replicas meeting the SLA ({', '.join(f'{m} {op} {v:g}' for m, (op, v) in doc['sla'].items())}), "
            f"and the gain in output tokens/s per GPU over `{doc['baseline']}` at its answer: "
            + "; ".join(parts) + ".")


def gpus() -> str:
    table = _sweep("gpus").table
    out = []
    for hardware, frame in table.groupby("hardware", sort=False):
        thr, user = _pivot(frame, THR), _pivot(frame, USER)
        top = thr.index.max()
        best_fixed = thr[["fixed-3", "fixed-7"]].max(axis=1)
        out.append(
            f"{hardware.split('_')[0]}: one user {user.loc[1, 'fixed-7']:.0f} tokens/s with γ = 7 "
            f"({user.loc[1, 'fixed-7'] / user.loc[1, 'no-spec']:.1f}× no speculation); at {top} users γ = 7 "
            f"{_pct(thr.loc[top, 'fixed-7'] / thr.loc[top, 'no-spec'] - 1)}, γ = 3 "
            f"{_pct(thr.loc[top, 'fixed-3'] / thr.loc[top, 'no-spec'] - 1)}, `adaptive` "
            f"{_pct(thr.loc[top, 'adaptive'] / thr.loc[top, 'no-spec'] - 1)} "
            f"({_pct(thr.loc[top, 'adaptive'] / best_fixed.loc[top] - 1)} against the better fixed γ), hardware-aware "
            f"{_pct(thr.loc[top, 'hardware-aware'] / thr.loc[top, 'no-spec'] - 1)} against no speculation")
    return "Per GPU: " + "; ".join(out) + "."


def miscalibration() -> str:
    table = _sweep("miscalibration").table
    out = []
    for users, frame in table.groupby("workload.concurrency"):
        cells = frame.groupby(["acceptance.confidence.bias_logit", "acceptance.confidence.noise_logit_sd"])
        hw_verify = frame[frame.arm == "hardware-aware"][VERIFY]
        gaps = {}
        for arm in ("hardware-aware", "goodput", "adaptive"):
            values = [1 - c.set_index("arm").loc[arm, THR] / c.set_index("arm").loc[ORACLE_ARM, THR] for _, c in cells]
            gaps[arm] = (min(values), max(values))
        oracle_verify = frame[frame.arm == ORACLE_ARM][VERIFY]
        out.append(
            f"at {users} users the hardware-aware arm verifies {_range(hw_verify.min(), hw_verify.max())} drafts per "
            f"request and step in every cell (the oracle {_range(oracle_verify.min(), oracle_verify.max())}) and gives "
            f"{_range(*gaps['hardware-aware'], '{:.0%}')} less than the oracle; `goodput` "
            f"{_range(*gaps['goodput'], '{:.1%}')} less, `adaptive` {_range(*gaps['adaptive'], '{:.1%}')} less")
    return "Over the grid of head noise and bias: " + "; ".join(out) + "."


def _pools(split) -> str:
    """A sweep's engine.disaggregation value: None (co-located) or the pools."""
    if not isinstance(split, dict):
        return "co-located"
    return f"{split['prefill_replicas']}:{split['decode_replicas']}"


def disaggregation() -> str:
    table = _sweep("disaggregation").table.copy()
    table["pools"] = table["engine.disaggregation"].map(_pools)
    table["goodput_per_gpu"] = table["request_goodput"] / table["num_gpus"]
    num_gpus = int(table["num_gpus"].iloc[0])
    out = []
    for scale, frame in sorted(table.groupby("workload.time_scale"), key=lambda item: -item[0]):
        good = frame.pivot(index="pools", columns="arm", values="goodput_per_gpu")
        user = frame.pivot(index="pools", columns="arm", values=USER)
        tpot = frame.pivot(index="pools", columns="arm", values="p90_tpot_ms")
        splits = good.drop(index="co-located")
        parts = []
        for arm in ("no-spec", "mtp-1", "dspark-goodput", "dspark-adaptive"):
            best = splits[arm].idxmax()
            parts.append(f"`{arm}` {good.loc['co-located', arm]:.2f} -> {splits.loc[best, arm]:.2f} at {best} (p90 "
                         f"TPOT {tpot.loc['co-located', arm]:.1f} -> {tpot.loc[best, arm]:.1f} ms, median user "
                         f"{user.loc['co-located', arm]:.0f} -> {user.loc[best, arm]:.0f} tokens/s)")
        out.append(f"at time scale {scale:g} ({frame['request_throughput'].max():.0f} requests/s served) "
                   + ", ".join(parts))
    return (f"Goodput per GPU (requests/s meeting both SLOs ÷ {num_gpus}), co-located -> the best prefill:decode "
            "split of the same GPUs: " + "; ".join(out) + ".")


def lookup(name: str) -> str:
    """The prompt-lookup studies (lookup-code-editing, lookup-chat): who wins by load, and each other drafter's gain
    over plain decoding at one user, 32 and the most."""
    thr = _pivot(_sweep(name).table, THR)
    top = thr.index.max()
    arms = [a for a in thr.columns if a != "no-spec"]
    runs = []
    for run in _best_runs(thr, list(thr.columns), "\0"):
        arm, _, users = run.partition(" at ")
        runs.append(f"`{arm}` at {users}")
    gain = {a: thr[a] / thr["no-spec"] - 1 for a in arms}

    def at(arm: str) -> str:
        return f"{_pct(gain[arm].loc[1])}, {_pct(gain[arm].loc[32])} and {_pct(gain[arm].loc[top])}"

    ngram_below = _first_below(thr, "ngram-5", "no-spec")
    parts = [
        f"The most output tokens/s per GPU by users: {', '.join(runs)}.",
        f"Over plain decoding at 1, 32 and {top} users: n-gram (5 drafts) {at('ngram-5')}; TensorRT-LLM's AUTO n-gram "
        f"(3 drafts, off above 32 requests) {at('ngram-auto')}; suffix decoding (8) {at('suffix-8')}; Qwen3-0.6B "
        f"drafting 4 {at('draft-0.6b-4')}"
        + "".join(f"; `{a}` {at(a)}" for a in arms if a not in ("ngram-5", "ngram-auto", "suffix-8", "draft-0.6b-4"))
        + ".",
        (f"N-gram with 5 drafts falls below plain decoding from {ngram_below} users on."
         if ngram_below is not None else f"N-gram with 5 drafts never falls below plain decoding up to {top} users."),
    ]
    return " ".join(parts)


def _plan_deployment(d: dict) -> str:
    ep = f" ep{d['expert_parallel']}" if d["expert_parallel"] > 1 else ""
    split = d.get("disaggregation")
    count = f"{split['prefill_replicas']}:{split['decode_replicas']} P:D" if split else f"{d['replicas']} x"
    from simlab.studies.labels import gpus_label

    layout = f"{count} {d['gpu']} {d['precision']} tp{d['tensor_parallel']}{ep}"
    return f"{layout} ({gpus_label(d)}, ${d['usd_per_hour']:.2f}/h)"


def plan(name: str) -> str:
    doc = json.loads((REPO / "reports" / name / "plan.json").read_text(encoding="utf-8"))
    base = doc["best_by_arm"].get("no-spec")
    parts = []
    for arm, d in doc["best_by_arm"].items():
        if d is None:
            parts.append(f"`{arm}` none within max_gpus")
            continue
        saves = ""
        if base is not None and arm != "no-spec":
            saves = f", {1 - d['usd_per_hour'] / base['usd_per_hour']:.0%} cheaper than no speculation"
        parts.append(f"`{arm}` {_plan_deployment(d)}{saves}")
    s = doc["search"]
    sla = ", ".join(f"{m} {op} {v:g}" for m, (op, v) in doc["sla"].items())
    return (f"Cheapest deployment per arm meeting {sla}: " + "; ".join(parts) + f". Chosen: `{doc['best']['arm']}`. "
            f"{s['num_simulated']} of {s['num_candidate_deployments']} candidate deployments simulated.")


STUDIES = {"crossover": crossover, "deepseek-sla": deepseek_sla, "deepseek-concurrency": deepseek_concurrency,
           "capacity": capacity, "gpus": gpus,
           "miscalibration": miscalibration, "disaggregation": disaggregation,
           "lookup-code-editing": lambda: lookup("lookup-code-editing"), "lookup-chat": lambda: lookup("lookup-chat"),
           **{f"plan/{v}": (lambda v=v: plan(f"plan/{v}")) for v in ("qwen3-8b-strict", "qwen3-8b-loose",
                                                                    "qwen3-30b-a3b-strict", "qwen3-30b-a3b-loose")}}


def markers(name: str) -> tuple[str, str]:
    return f"<!-- BEGIN study results: {name} (scripts/study_prose.py) -->", f"<!-- END study results: {name} -->"


def paragraph(name: str) -> str:
    return textwrap.fill(STUDIES[name](), width=116)


def written(text: str, name: str) -> str:
    begin, end = markers(name)
    return text.split(begin, 1)[1].split(end, 1)[0].strip("\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a paragraph differs from its report")
    args = parser.parse_args(argv)
    text = DOC.read_text(encoding="utf-8")
    stale = []
    for name in STUDIES:
        begin, end = markers(name)
        if begin not in text or end not in text:
            print(f"{DOC}: no markers for {name}", file=sys.stderr)
            return 1
        fresh = paragraph(name)
        if written(text, name) != fresh:
            stale.append(name)
            head, rest = text.split(begin, 1)
            text = head + begin + "\n" + fresh + "\n" + end + rest.split(end, 1)[1]
    if args.check:
        if stale:
            print("stale in docs/shipped-studies.md: " + ", ".join(stale) + " (run python scripts/study_prose.py)",
                  file=sys.stderr)
            return 1
        print("docs/shipped-studies.md's study results match the reports")
        return 0
    if stale:
        DOC.write_text(text, encoding="utf-8")
    print(f"wrote {DOC}: " + (", ".join(stale) if stale else "nothing changed"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
