"""A plan's ``report.html``: the answer, the ranked deployments, the Pareto front of tokens/s per GPU against
tokens/s per user with the chosen deployment marked, each arm's cheapest deployment side by side (what
speculation saves), and the launch commands of the top deployments. Self-contained, like every simlab page."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Optional

import numpy as np
from simlab.studies.labels import deployment_label, gpus_label, replicas_label, split_label
from simlab.studies.plan_verdict import plan_warnings, verdict

NUM_RANKED = 30
PARETO_CAPTION = ("Every simulated deployment: USD per million output tokens against the median user's speed "
                  "(grey: misses the SLA)")


def _money(value: Optional[float]) -> str:
    return "–" if value is None else f"${value:,.2f}/h"


def deployment_layout(d: dict) -> str:
    """A DEPLOYMENT of plan.json in words: its replicas (or prefill:decode split), GPU, stack, precision, layout
    and arm."""
    return f"{replicas_label(d)} of {deployment_label(d)}, arm {d['arm']}"


def _deployment_text(d: dict) -> str:
    return f"{deployment_layout(d)}: {gpus_label(d)}, {_money(d['usd_per_hour'])}"


def fleet_label(d: dict) -> str:
    """A deployment's GPUs as a reader counts them: ``2×H100-SXM``."""
    return f"{d['num_gpus']}×{str(d['gpu']).upper()}"


def pareto_png(doc: dict) -> Optional[bytes]:
    """Dollars per million output tokens against the median user's tokens/s, every simulated deployment: those
    missing the SLA faded grey and left out of the front, those meeting it by arm, labelled by their GPUs
    (``2×H100-SXM``), the front of cheaper-and-faster drawn, the chosen one starred."""
    from simlab.studies.figures import arm_colours, new_figure, pareto_mask, place_labels, plain_log_axis, png_bytes
    from simlab.studies.plan_verdict import usd_per_million_tokens

    points = [c for c in doc["candidates"] if c["metrics"] and usd_per_million_tokens(c)
              and c["metrics"].get("median_user_tok_s")]
    if not points:
        return None
    arms = list(doc["best_by_arm"])
    colours = arm_colours(arms)
    fig, (ax,) = new_figure(1, width=9.0, height=5.5)
    misses = [c for c in points if not c["meets_sla"]]
    if misses:
        ax.scatter([usd_per_million_tokens(c) for c in misses], [c["metrics"]["median_user_tok_s"] for c in misses],
                   s=18, color="#cccccc", label="misses the SLA (not an option)", zorder=1)
    meeting = [c for c in points if c["meets_sla"]]
    for arm in arms:
        sel = [c for c in meeting if c["arm"] == arm]
        if sel:
            ax.scatter([usd_per_million_tokens(c) for c in sel], [c["metrics"]["median_user_tok_s"] for c in sel],
                       s=30, color=colours[arm], label=f"{arm} (meets the SLA)", zorder=3)
    labels = []
    if meeting:
        cost = np.array([usd_per_million_tokens(c) for c in meeting], dtype=float)
        speed = np.array([c["metrics"]["median_user_tok_s"] for c in meeting], dtype=float)
        front = pareto_mask(-cost, speed)  # cheaper and faster are both better
        order = np.argsort(cost[front])
        ax.plot(cost[front][order], speed[front][order], color="#555", lw=1, ls="--", zorder=2,
                label="front: nothing cheaper is faster")
        first = [c for c in meeting if c == doc["best"]] + [c for c, on in zip(meeting, front) if on]
        labels = [(usd_per_million_tokens(c), c["metrics"]["median_user_tok_s"], fleet_label(c), "black", 1.0)
                  for c in first + [c for c in meeting if c not in first]]
    best = doc["best"]
    if best is not None and usd_per_million_tokens(best):
        ax.scatter([usd_per_million_tokens(best)], [best["metrics"]["median_user_tok_s"]], marker="*", s=320,
                   color="gold", edgecolors="black", zorder=5, label="chosen")
    ax.set_xscale("log")
    plain_log_axis(ax.xaxis)
    ax.set_xlabel("USD per million output tokens (log scale; left is cheaper)")
    ax.set_ylabel("median user speed (output tokens/s per user)")
    ax.set_title("Cost per token against speed per user (labels: GPUs)", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    place_labels(ax, labels, fontsize=7)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return png_bytes(fig)


def arms_png(doc: dict) -> Optional[bytes]:
    """Each arm's cheapest deployment meeting the SLA, in USD per hour, side by side."""
    from simlab.studies.figures import arm_colours, new_figure, png_bytes

    arms = list(doc["best_by_arm"])
    colours = arm_colours(arms)
    found = [(a, d) for a, d in doc["best_by_arm"].items() if d]
    if not found:
        return None
    fig, (ax,) = new_figure(1, width=7.0, height=3.8)
    ax.bar([a for a, _ in found], [d["usd_per_hour"] for _, d in found], color=[colours[a] for a, _ in found])
    for i, (_, d) in enumerate(found):
        ax.text(i, d["usd_per_hour"], f"${d['usd_per_hour']:,.2f}/h\n{d['num_gpus']}x {d['gpu']}", ha="center",
                va="bottom", fontsize=8)
    ax.set_ylabel("USD per hour")
    ax.set_ylim(0, max(d["usd_per_hour"] for _, d in found) * 1.3)
    ax.set_title("Cheapest deployment meeting the SLA, per arm")
    return png_bytes(fig)


def _answer(doc: dict) -> list[str]:
    sla = ", ".join(f"{m} {op} {v:g}" for m, (op, v) in doc["sla"].items())
    question = (f"Which deployment of <code>{html.escape(doc['model'])}</code> meets <code>{html.escape(sla)}</code> "
                f"at the lowest <code>{doc['objective']}</code>?")
    out = [f"<p class=\"question\">{question}</p>",
           f"<p class=\"verdict\"><b>{html.escape(doc.get('verdict') or verdict(doc))}</b></p>"]
    for warning in plan_warnings(doc):
        out.append(f"<p class=\"warning\"><b>Caution:</b> {html.escape(warning)}</p>")
    base = doc["best_by_arm"].get("no-spec") or next((d for d in doc["best_by_arm"].values() if d), None)
    rows = []
    for arm, d in doc["best_by_arm"].items():
        if d is None:
            rows.append([arm, "none within max_gpus", "–", "–", "–"])
            continue
        saves = "–"
        if base is not None and d is not base:
            saved = base["usd_per_hour"] - d["usd_per_hour"]
            saves = f"{saved:+,.2f} ({saved / base['usd_per_hour']:+.0%})"
        rows.append([arm, _deployment_text(d), d["num_gpus"], f"{d['usd_per_hour']:,.2f}", saves])
    from simlab.studies.html_parts import table_html

    out.extend(_sensitivity_table(doc))
    out.append("<h2>Each arm's cheapest deployment</h2>")
    out.append(table_html(["arm", "deployment", "GPUs", "USD/h", "saves vs no-spec USD/h"], rows, text_columns=2))
    return out


def _sensitivity_table(doc: dict) -> list[str]:
    """The chosen deployment at the plan's load and at 20 % less and more (plan.json's ``sensitivity``)."""
    from simlab.studies.html_parts import table_html

    spread, best = doc.get("sensitivity"), doc["best"]
    if not spread or best is None:
        return []
    rows = [["1 (the plan's)", "yes", *(_number(best["metrics"].get(m)) for m in doc["sla"])]]
    for factor, entry in spread["load_factors"].items():
        rows.append([factor, "yes" if entry["meets_sla"] else "no", *(_number(entry["metrics"].get(m))
                                                                       for m in doc["sla"])])
    rows.sort(key=lambda r: float(r[0].split()[0]))
    out = ["<h2>The chosen deployment at other loads</h2>",
           table_html(["load (x the plan's)", "meets the SLA", *doc["sla"]], rows, text_columns=2)]
    other = spread.get("at_higher_load")
    if other:
        out.append(f"<p>At the higher load the cheapest deployment that holds is "
                   f"{html.escape(_deployment_text(other))}.</p>")
    return out


def _number(value) -> str:
    return f"{value:,.4g}" if isinstance(value, (int, float)) else "–"


def _ranked(doc: dict) -> str:
    from simlab.studies.html_parts import table_html

    rows = []
    for rank, c in enumerate(doc["candidates"][:NUM_RANKED], 1):
        m = c["metrics"] or {}
        split = c["disaggregation"]
        rows.append([rank, c["arm"], deployment_label(c), split_label(split) if split else c["replicas"],
                     c["num_gpus"], f"{c['usd_per_hour']:,.2f}", "yes" if c["meets_sla"] else "no",
                     "; ".join(c["failing"]) or "–",
                     *(f"{m[k]:,.1f}" if isinstance(m.get(k), (int, float)) else "–"
                       for k in (*doc["sla"], "median_user_tok_s", "output_throughput_per_gpu"))])
    return table_html(["rank", "arm", "layout", "replicas (P:D)", "GPUs", "USD/h", "meets", "misses", *doc["sla"],
                   "user tok/s", "tok/s/GPU"], rows, text_columns=3)


def _launch(doc: dict) -> list[str]:
    out = ["<h2>Launch commands</h2>", "<p>One command per replica (per pool when disaggregated); vLLM and SGLang "
           "flag names at the releases named in each file. A drafter shown as &lt;...&gt; was not named in the plan "
           "(give an arm <code>drafter:</code>).</p>"]
    for rank, c in enumerate([c for c in doc["candidates"] if c.get("launch")], 1):
        out.append(f"<p>{rank}. {html.escape(_deployment_text(c))}</p>")
        for engine, commands in c["launch"].items():
            out.append(f"<pre>{html.escape(chr(10).join(commands))}</pre>")
    return out


def plan_page(doc: dict) -> tuple[str, list[str], dict[str, bytes]]:
    """The page's title, its body and the PNGs it embeds, from a plan.json document."""
    from simlab.studies.html_parts import figure_html, meta_html, table_html

    search = doc["search"]
    body: list[str] = [*_answer(doc), meta_html(doc.get("command"), doc.get("plan_file"), doc.get("plan_sha256", ""))]
    images: dict[str, bytes] = {}
    for name, caption, draw in (("plan-pareto.png", PARETO_CAPTION, pareto_png),
                                ("plan-arms.png", "What speculation saves: each arm's cheapest deployment", arms_png)):
        payload = draw(doc)
        if payload is not None:
            images[name] = payload
            body.append(figure_html(name, caption, payload))
    body.append("<h2>Deployments, best first</h2>")
    body.append(f"<p>{search['num_simulated']} simulated ({search['num_from_earlier_run']} from an earlier run) of "
                f"{search['num_candidate_deployments']} candidate deployments in {search['num_families']} families "
                f"(layout x arm) over {search['num_layouts']} layouts, in {search['wall_s']:.1f} s; the rest were "
                "ruled out by bounds (see plan.csv for why each lost).</p>")
    body.append(_ranked(doc))
    body.extend(_launch(doc))
    prices = [[g, f"{p['usd_per_hour']:.2f}", p["source"], p.get("date") or "–"] for g, p in doc["prices"].items()]
    body.append("<h2>Prices</h2>" + table_html(["GPU", "USD per GPU-hour", "source", "date"], prices, text_columns=1))
    return f"simlab plan: {doc['name']}", body, images


def write_plan_report(folder: Path, doc: dict) -> Path:
    """Write ``folder/report.html`` (and its PNGs beside it)."""
    from simlab.common.outputs import write_file_atomic
    from simlab.studies.html_parts import page_html

    title, body, images = plan_page(doc)
    for name, payload in images.items():
        write_file_atomic(folder / name, payload)
    page = folder / "report.html"
    write_file_atomic(page, page_html(title, body))
    return page
