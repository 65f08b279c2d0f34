"""The figures of a what-if report: every probe on the Pareto plane with the SLA drawn on it, and each SLA
metric against the varied field with its limit and each arm's answer."""

from __future__ import annotations

from typing import Optional

import pandas as pd
from matplotlib.ticker import MaxNLocator

from simlab.studies.figures import (arm_colours, field_label, format_value, metric_label, new_figure, place_labels,
                                    png_bytes)


def sla_lines(sla: dict) -> list[tuple[str, float, str]]:
    """SLA conditions that are lines on the Pareto plane (x: tokens/s per user, y: tokens/s per GPU)."""
    lines = []
    for metric, (op, value) in sla.items():
        if metric == "median_user_tok_s":
            lines.append(("x", value, f"SLA: {metric} {op} {value:g}"))
        elif metric == "median_tpot_ms" and value > 0:
            lines.append(("x", 1000.0 / value, f"SLA: {metric} {op} {value:g} (≈ {1000.0 / value:.3g} tok/s/user)"))
        elif metric == "output_throughput_per_gpu":
            lines.append(("y", value, f"SLA: {metric} {op} {value:g}"))
    return lines


def pareto_png(doc: dict, probes: pd.DataFrame, colours: dict) -> bytes:
    fig, (ax,) = new_figure(1, width=8.0, height=5.5)
    field = doc["vary"] if "at" not in doc else doc["at"]["field"]
    labels: list = []
    for arm in doc["arms"]:
        mine = probes[probes["arm"] == arm]
        if mine.empty:
            continue
        colour = colours[arm]
        meets = mine["meets"].astype(bool)
        ax.scatter(mine.loc[meets, "median_user_tok_s"], mine.loc[meets, "output_throughput_per_gpu"],
                   color=colour, s=28, label=f"{arm} (filled: meets the SLA)")
        ax.scatter(mine.loc[~meets, "median_user_tok_s"], mine.loc[~meets, "output_throughput_per_gpu"],
                   facecolors="none", edgecolors=colour, s=28)
        labels += [(row["median_user_tok_s"], row["output_throughput_per_gpu"], format_value(row[field]), colour,
                    1.0 if row["meets"] else 0.6) for _, row in mine.iterrows()]
        answer = _answer_metrics(doc, arm)
        if answer is not None:
            ax.scatter([answer["median_user_tok_s"]], [answer["output_throughput_per_gpu"]], marker="*", s=180,
                       color=colour, edgecolors="black", linewidths=0.6, zorder=5)
    for kind, value, text in sla_lines(doc["sla"]):
        if kind == "x":
            ax.axvline(value, color="black", linestyle="--", linewidth=1)
            ax.annotate(text, (value, 0.02), xycoords=("data", "axes fraction"), xytext=(3, 0),
                        textcoords="offset points", fontsize=7, rotation=90)
        else:
            ax.axhline(value, color="black", linestyle="--", linewidth=1)
            ax.annotate(text, (0.02, value), xycoords=("axes fraction", "data"), xytext=(0, 3),
                        textcoords="offset points", fontsize=7)
    ax.set_xlabel(metric_label("median_user_tok_s"))
    ax.set_ylabel(metric_label("output_throughput_per_gpu"))
    ax.set_title(f"every probe (labels: {field}, where they do not overlap; hollow: misses the SLA; star: each "
                 "arm's answer)", fontsize=9)
    ax.grid(alpha=0.3)
    place_labels(ax, labels)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return png_bytes(fig)


def _answer_metrics(doc: dict, arm: str) -> Optional[dict]:
    entry = doc["arms"][arm]
    if "at" in doc:
        return entry["metrics"]
    return entry.get("metrics")


def split_sla_png(doc: dict, probes: pd.DataFrame, colours: dict) -> bytes:
    """A split search: each SLA metric against the prefill replicas, at each arm's answer (or the most replicas
    it tried), the limit as a line, the chosen split starred."""
    conditions = list(doc["sla"].items())
    fig, axes = new_figure(len(conditions), max_columns=2)
    for ax, (metric, (op, value)) in zip(axes, conditions):
        for arm, entry in doc["arms"].items():
            mine = probes[probes["arm"] == arm]
            if mine.empty or metric not in mine:
                continue
            total = entry["load"] if entry["load"] is not None else int(mine["replicas"].max())
            at = mine[mine["replicas"] == total].sort_values("prefill_replicas")
            ax.plot(at["prefill_replicas"], at[metric], marker="o", color=colours[arm],
                    label=f"{arm} ({total} replicas)")
            if entry.get("split"):
                chosen = at[at["prefill_replicas"] == entry["split"]["prefill_replicas"]]
                ax.scatter(chosen["prefill_replicas"], chosen[metric], marker="*", s=160, color=colours[arm],
                           edgecolors="black", linewidths=0.6, zorder=5)
        _sla_axis(ax, metric, op, value, "prefill replicas (the rest decode)",
                  f"{metric} {op} {value:g} at each arm's fewest replicas (star: its split)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    return png_bytes(fig)


def _sla_axis(ax, metric: str, op: str, value: float, xlabel: str, title: str) -> None:
    """The SLA's limit as a dashed line, the labels, the grid and the legend of one SLA-metric panel."""
    ax.axhline(value, color="black", linestyle="--", linewidth=1, label=f"SLA {op} {value:g}")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(metric_label(metric))
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def sla_metrics_png(doc: dict, probes: pd.DataFrame, colours: dict) -> Optional[bytes]:
    """Each SLA metric against the varied field, the limit as a line, each arm's answer dotted."""
    if "at" in doc:
        return None
    if doc.get("split_search"):
        return split_sla_png(doc, probes, colours)
    field = doc["vary"]
    conditions = list(doc["sla"].items())
    fig, axes = new_figure(len(conditions), max_columns=2)
    for ax, (metric, (op, value)) in zip(axes, conditions):
        for arm in doc["arms"]:
            mine = probes[probes["arm"] == arm].sort_values(field)
            if mine.empty or metric not in mine:
                continue
            ax.plot(mine[field], mine[metric], marker="o", color=colours[arm], label=arm)
            load = doc["arms"][arm]["load"]
            if load is not None:
                ax.axvline(load, color=colours[arm], linestyle=":", linewidth=1)
        _sla_axis(ax, metric, op, value, field_label(field), f"{metric} {op} {value:g} (dotted: each arm's answer)")
    fig.tight_layout()
    return png_bytes(fig)


def figures(doc: dict, probes: pd.DataFrame) -> dict[str, tuple[str, bytes]]:
    colours = arm_colours(list(doc["arms"]))
    out = {"report-pareto.png": ("Every probe on the Pareto plane, with the SLA where it is a line there; "
                                 "the star is each arm's answer.", pareto_png(doc, probes, colours))}
    metrics = sla_metrics_png(doc, probes, colours)
    if metrics:
        caption = ("Each SLA metric against the prefill replicas at each arm's fewest replicas, split by split."
                   if doc.get("split_search") else "Each SLA metric against the varied field, probe by probe.")
        out["report-sla.png"] = (caption, metrics)
    return out
