"""``report.html``: one self-contained page (images embedded as base64 PNG, no scripts, no links out) for a run,
a sweep or a what-if folder, written beside the PNGs it embeds. It records the command that made the results
and the SHA-256 of their scenario."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any, Optional

import pandas as pd

from simlab.common.errors import InputError
from simlab.common.outputs import check_out_file, read_manifest, write_file_atomic
from simlab.studies.html_parts import GainCell, page_html, figure_html, meta_html, opening_html, table_html
from simlab.studies.labels import split_label

RUN_COLUMNS = (("output_throughput", "tok/s", "{:,.0f}"), ("output_throughput_per_gpu", "tok/s/GPU", "{:,.0f}"),
               ("num_gpus", "GPUs", "{}"), ("median_user_tok_s", "user tok/s", "{:.1f}"),
               ("median_ttft_ms", "TTFT p50 ms", "{:,.1f}"), ("p99_ttft_ms", "TTFT p99 ms", "{:,.1f}"),
               ("median_tpot_ms", "TPOT p50 ms", "{:.2f}"), ("p99_tpot_ms", "TPOT p99 ms", "{:.2f}"),
               ("spec_decode_acceptance_length", "τ", "{:.2f}"),
               ("mean_verify_tokens_per_request_step", "verify/req", "{:.2f}"),
               ("request_goodput", "goodput req/s", "{:.2f}"))


def folder_kind(folder: Path) -> str:
    """``run``, ``sweep``, ``whatif`` or ``plan``, from the folder's files."""
    if (folder / "plan.json").is_file():
        return "plan"
    if (folder / "whatif.json").is_file():
        return "whatif"
    if (folder / "sweep.json").is_file() and (folder / "sweep.csv").is_file():
        return "sweep"
    if (folder / "summary.json").is_file():
        return "run"
    raise InputError("is not a results folder of simlab run, sweep, whatif or plan", file=folder,
                     valid="a folder holding summary.json, sweep.json + sweep.csv, whatif.json, or plan.json")


INPUTS = {"run": ("summary.json", "requests.csv", "steps.csv.gz"),
          "sweep": ("sweep.json", "sweep.csv", "positions.csv", "timing.csv"),
          "whatif": ("whatif.json", "probes.csv"),
          "plan": ("plan.json", "plan.csv")}
IMAGES = {"run": ("report.png",),
          "sweep": ("report-pareto.png", "report-latency.png", "report-goodput.png", "report-acceptance.png",
                    "report-verify.png"),
          "whatif": ("report-pareto.png", "report-sla.png"),
          "plan": ("plan-pareto.png", "plan-arms.png")}


def write_report(folder: str | Path, out: Optional[str | Path] = None) -> Path:
    """Write ``report.html`` (default: in ``folder``; ``out`` names another ``.html`` file) and the PNGs it
    embeds beside it; returns the page's path. Every file written may replace only a file simlab wrote, never
    one of the folder's results (checked before anything is drawn)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError("no such folder", file=folder, valid="a results folder of simlab run, sweep or whatif")
    kind = folder_kind(folder)
    page = Path(out) if out is not None else folder / "report.html"
    if page.suffix.lower() not in (".html", ".htm"):
        raise InputError("a report is an HTML page", field="--out", value=str(page),
                         valid="a path ending in .html" + (", or FILE.png for the run's figure alone"
                                                           if kind == "run" else ""))
    inputs = [folder / name for name in INPUTS[kind]]
    for target in (page, *(page.parent / name for name in IMAGES[kind])):
        check_out_file(target, inputs=inputs)
    builders = {"run": _run_page, "sweep": _sweep_page, "whatif": _whatif_page, "plan": _plan_page}
    title, body, images = builders[kind](folder)
    for name, payload in images.items():  # the images first: the page appears only when they are there
        write_file_atomic(page.parent / name, payload)
    write_file_atomic(page, page_html(title, body))
    return page


def _plan_page(folder: Path):
    from simlab.studies.plan_report import plan_page

    return plan_page(json.loads((folder / "plan.json").read_text(encoding="utf-8")))


def _fmt(value: Any, spec: str = "{:,.1f}") -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "–"
    try:
        return spec.format(value)
    except (ValueError, TypeError):
        return str(value)


# ------------------------------------------------------------------------------------------------------- run
def _run_page(folder: Path):
    from simlab.results.figure import render_png
    from simlab.results.folder import load_results
    from simlab.studies.grid import data_sha256

    summary, requests, steps = load_results(folder)
    png = render_png(summary, requests, steps)
    manifest = read_manifest(folder) or {}
    name = summary["scenario"]["name"]
    rows = [[arm, *(_fmt(m.get(k), spec) for k, _, spec in RUN_COLUMNS)] for arm, m in summary["arms"].items()]
    body = [meta_html(manifest.get("command"), None, data_sha256(summary["scenario"])),
            "<h2>Arms</h2>", table_html(["arm", *(h for _, h, _ in RUN_COLUMNS)], rows),
            "<h2>Figure</h2>", figure_html("report.png", "The run's report figure.", png)]
    return f"simlab run: {name}", body, {"report.png": png}


# ----------------------------------------------------------------------------------------------------- sweep
def _sweep_page(folder: Path):
    from simlab.studies import gains, sweep_plots
    from simlab.studies.figures import format_value
    from simlab.studies.sweep_data import read_sweep_folder

    from simlab.studies.study_warnings import study_warnings
    from simlab.studies.sweep_verdict import setting_sentence, sweep_question, sweep_verdict

    data = read_sweep_folder(folder)
    doc = data.doc
    images = sweep_plots.figures(data)
    points = len(doc["points"])
    body = [*opening_html(sweep_question(data), setting_sentence(data), sweep_verdict(data),
                          study_warnings(data.settings, data.arm_kinds)),
            meta_html(doc.get("command"), doc.get("scenario_file"), doc["scenario_sha256"]),
            f"<p>{points} points × {len(data.arms)} arms; varied: "
            + ", ".join(f"<code>{html.escape(f)}</code>" for f in doc["fields"])
            + f"; load axis <code>{html.escape(data.x)}</code>. {len(data.failed['point'].unique())} points failed."
            + "</p>"]
    if len(data.failed):
        failed = data.failed.drop_duplicates("point")
        body += ["<h2>Failed points</h2>",
                 table_html(["point", *doc["fields"], "error"],
                        [[r["point"], *(format_value(r[f]) for f in doc["fields"]), r["error"]]
                         for _, r in failed.iterrows()], text_columns=2 + len(doc["fields"]))]
    for name, (caption, payload) in images.items():
        body.append(figure_html(name, caption, payload))
    facet = [] if not data.facets else ["facet"]  # the column only when other fields vary beside the load

    def cells(row, *rest):
        return ([row["facet"]] if facet else []) + list(rest)

    if doc.get("sla_user_tok_s"):
        table = gains.sla_table(data, list(doc["sla_user_tok_s"]), doc.get("baseline"))
        body += [f"<h2>Output tokens/s per GPU at a per-user speed SLA (vs {html.escape(table['baseline'].iloc[0])})"
                 "</h2>", "<p>For each level, each arm's best point of the sweep whose median tokens/s per user "
                 "meets it.</p>",
                 table_html([*facet, "tok/s/user ≥", "arm", "tok/s/GPU", data.x, "user tok/s", "vs baseline"],
                        [cells(r, f"{r['level']:g}", r["arm"], _fmt(r["output_throughput_per_gpu"], "{:,.0f}"),
                               _fmt(r["load"], "{:g}"), _fmt(r["median_user_tok_s"]), GainCell(r["vs_baseline"]))
                         for _, r in table.iterrows()], text_columns=len(facet) + 2)]
    table = gains.gain_table(data)
    if len(table):
        body += ["<h2>Gain at each load</h2>",
                 "<p>Each arm's output tokens/s per GPU and median tokens/s per user, against the no-speculation "
                 "arm and the best fixed-γ arm at the same load (best by that figure).</p>",
                 table_html([*facet, data.x, "arm", "tok/s/GPU", "vs no-spec", "best fixed-γ", "vs best fixed-γ",
                         "user tok/s", "vs no-spec", "best fixed-γ", "vs best fixed-γ"],
                        [cells(r, format_value(r["load"]), r["arm"], _fmt(r["output_throughput_per_gpu"], "{:,.0f}"),
                               GainCell(r["vs_no_spec"]), r["best_fixed"] or "–", GainCell(r["vs_best_fixed"]),
                               _fmt(r["median_user_tok_s"]), GainCell(r["user_vs_no_spec"]),
                               r["best_fixed_user"] or "–", GainCell(r["user_vs_best_fixed"]))
                         for _, r in table.iterrows()],
                        text_columns=len(facet) + 2)]
    return f"simlab sweep: {doc['name']}", body, {name: payload for name, (_, payload) in images.items()}


# ---------------------------------------------------------------------------------------------------- whatif
def _whatif_page(folder: Path):
    from simlab.studies import whatif_plots
    from simlab.studies.whatif_verdict import whatif_question, whatif_verdict

    doc = json.loads((folder / "whatif.json").read_text(encoding="utf-8"))
    probes = pd.read_csv(folder / "probes.csv", dtype={"arm": str}) if (folder / "probes.csv").is_file() \
        else pd.DataFrame()
    images = whatif_plots.figures(doc, probes)
    sla = ", ".join(f"{m} {op} {v:g}" for m, (op, v) in doc["sla"].items())
    body = [*opening_html(whatif_question(doc), doc.get("setting", ""), whatif_verdict(doc), doc.get("warnings", [])),
            meta_html(doc.get("command"), doc.get("scenario_file"), doc["scenario_sha256"]),
            f"<p>SLA: <code>{html.escape(sla)}</code>; baseline arm <code>{html.escape(doc['baseline'])}</code>.</p>"]
    if "at" in doc:
        at = doc["at"]
        body.append(f"<h2>At {html.escape(at['field'])} = {html.escape(str(at['value']))}</h2>")
        rows = [[arm, "yes" if e["meets"] else "no", ", ".join(e["failing"]) or "–",
                 _fmt(e["median_user_tok_s"]), _fmt(e["output_throughput_per_gpu"], "{:,.0f}"),
                 GainCell(e["gain_vs_baseline"])] for arm, e in doc["arms"].items()]
        body.append(table_html(["arm", "meets", "fails", "user tok/s", "tok/s/GPU", "vs baseline"], rows,
                           text_columns=3))
    else:
        find = "largest" if doc["find"] == "largest" else "smallest"
        tolerance = "exact (integer)" if doc["integer"] else f"within {doc['rtol']:.0%}"
        split = bool(doc.get("split_search"))
        if split:
            body.append("<h2>The fewest replicas (prefill + decode) meeting the SLA, per arm, and the split</h2>")
            body.append(f"<p>Searched {doc['range'][0]:g} to {doc['range'][1]:g} replicas by bracketing and "
                        "bisection; at each total every prefill:decode split was simulated.</p>")
        else:
            body.append(f"<h2>The {find} <code>{html.escape(doc['vary'])}</code> meeting the SLA, per arm</h2>")
            body.append(f"<p>Searched {doc['range'][0]:g} to {doc['range'][1]:g} by bracketing and bisection, "
                        f"{tolerance}.</p>")
        rows = []
        for arm, e in doc["arms"].items():
            m = e["metrics"] or {}
            note = "meets the SLA nowhere in the range" if e["load"] is None else (
                "meets it up to the range's end" if e["at_bound"] else "")
            if not e.get("monotone", True):
                note = (note + "; " if note else "") + "probes disagree with one threshold"
            chosen = [split_label(e["split"]) if e.get("split") else "–"]
            rows.append([arm, _fmt(e["load"], "{:g}"), *(chosen if split else []), _fmt(m.get("median_user_tok_s")),
                         _fmt(m.get("output_throughput_per_gpu"), "{:,.0f}"), _fmt(m.get("num_gpus"), "{}"),
                         *(_fmt(m.get(k), "{:,.2f}") for k in doc["sla"]), GainCell(e["gain_vs_baseline"]),
                         e["num_probes"], note])
        varied = ["replicas", "split P:D"] if split else [doc["vary"]]
        body.append(table_html(["arm", *varied, "user tok/s", "tok/s/GPU", "GPUs", *doc["sla"], "vs baseline",
                            "probes", "note"], rows))
    for name, (caption, payload) in images.items():
        body.append(figure_html(name, caption, payload))
    return f"simlab whatif: {doc['name']}", body, {name: payload for name, (_, payload) in images.items()}
