"""The figures of a sweep report, one PNG each, one panel per facet (the varied fields other than the load)."""

from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd

from simlab.studies.figures import (arm_colours, field_label, format_value, metric_label, new_figure, pareto_mask,
                                    png_bytes, short_field)
from simlab.studies.sweep_data import SweepData

PERCENTILE_STYLES = (("median", "-", "p50"), ("p90", "--", "p90"), ("p99", ":", "p99"))


def _panels(data: SweepData, **kwargs):
    facets = list(data.facet_frames())
    fig, axes = new_figure(len(facets), **kwargs)
    return fig, list(zip(axes, facets))


def _x_axis(ax, data: SweepData) -> None:
    ax.set_xlabel(field_label(data.x))
    if not data.x_numeric:
        categories = data.x_categories
        ax.set_xticks(range(len(categories)), [format_value(c) for c in categories], rotation=20, fontsize=8)
    elif _spans_decades(data.table[data.x]):
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(_plain_formatter())


def _spans_decades(values: pd.Series) -> bool:
    positive = values[values > 0]
    return len(positive) > 2 and positive.max() / positive.min() >= 16


def _plain_formatter():
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda v, _: f"{v:g}")


def _arm_series(frame: pd.DataFrame, data: SweepData, arm: str) -> pd.DataFrame:
    mine = frame[frame["arm"] == arm].copy()
    mine["_x"] = data.x_values(mine)
    return mine.sort_values("_x")


def pareto_png(data: SweepData, colours: dict, sla_lines: Optional[list[tuple[str, float, str]]] = None) -> bytes:
    """Output tokens/s per GPU against median tokens/s per user, per arm; each arm's front joined, its dominated
    points faded, every point labelled by its load."""
    fig, panels = _panels(data, width=7.0, height=5.0, max_columns=2)
    for ax, (title, frame) in panels:
        for arm in data.arms:
            mine = _arm_series(frame, data, arm)
            if mine.empty:
                continue
            x, y = mine["median_user_tok_s"].to_numpy(float), mine["output_throughput_per_gpu"].to_numpy(float)
            front = pareto_mask(x, y)
            colour = colours[arm]
            ax.scatter(x[~front], y[~front], color=colour, alpha=0.25, s=22)
            order = np.argsort(x[front])
            ax.plot(x[front][order], y[front][order], marker="o", color=colour, label=arm, markersize=5)
            for xi, yi, load, on_front in zip(x, y, mine[data.x], front):
                ax.annotate(format_value(load), (xi, yi), textcoords="offset points", xytext=(3, 3), fontsize=6,
                            color=colour, alpha=1.0 if on_front else 0.35)
        for kind, value, text in sla_lines or []:
            if kind == "x":
                ax.axvline(value, color="black", linestyle="--", linewidth=0.8, alpha=0.6)
                ax.annotate(text, (value, 0.99), xycoords=("data", "axes fraction"), xytext=(2, 0),
                            textcoords="offset points", fontsize=6, rotation=90, va="top")
            else:
                ax.axhline(value, color="black", linestyle="--", linewidth=0.8, alpha=0.6)
                ax.annotate(text, (0.01, value), xycoords=("axes fraction", "data"), xytext=(0, 2),
                            textcoords="offset points", fontsize=6)
        ax.set_xlabel(metric_label("median_user_tok_s"))
        ax.set_ylabel(metric_label("output_throughput_per_gpu"))
        ax.set_title(("Pareto front per arm" + (f": {title}" if title else "")) +
                     f"\n(labels: {short_field(data.x)}; faded: dominated)", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return png_bytes(fig)


def latency_png(data: SweepData, colours: dict) -> bytes:
    """TTFT and TPOT p50/p90/p99 against load (log scale)."""
    facets = list(data.facet_frames())
    fig, axes = new_figure(2 * len(facets), max_columns=2)
    for i, (title, frame) in enumerate(facets):
        for ax, name in zip(axes[2 * i: 2 * i + 2], ("ttft", "tpot")):
            positive = False
            for arm in data.arms:
                mine = _arm_series(frame, data, arm)
                for stat, style, text in PERCENTILE_STYLES:
                    key = f"{stat}_{name}_ms"
                    if mine.empty or key not in mine or mine[key].isna().all():
                        continue
                    ax.plot(mine["_x"], mine[key], linestyle=style, marker=".", color=colours[arm],
                            label=f"{arm} {text}" if stat == "median" else None)
                    positive = positive or bool((mine[key] > 0).any())
            if positive:  # a log axis needs something above zero (TTFT is 0 where prefill costs nothing)
                ax.set_yscale("log")
            ax.set_ylabel(f"{name.upper()} (ms{', log scale' if positive else ''})")
            _x_axis(ax, data)
            ax.set_title(f"{name.upper()} p50 (solid), p90 (dashed), p99 (dotted)" + (f"\n{title}" if title else ""),
                         fontsize=9)
            ax.grid(alpha=0.3, which="both")
            ax.legend(fontsize=6)
    fig.tight_layout()
    return png_bytes(fig)


def metric_png(data: SweepData, colours: dict, key: str, title: str) -> Optional[bytes]:
    """One metric against load, a line per arm; None when no arm has a value."""
    if key not in data.table or data.table[key].isna().all():
        return None
    fig, panels = _panels(data)
    for ax, (facet, frame) in panels:
        for arm in data.arms:
            mine = _arm_series(frame, data, arm)
            if not mine.empty and mine[key].notna().any():
                ax.plot(mine["_x"], mine[key], marker="o", color=colours[arm], label=arm)
        ax.set_ylabel(metric_label(key))
        _x_axis(ax, data)
        ax.set_title(title + (f"\n{facet}" if facet else ""), fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return png_bytes(fig)


def acceptance_png(data: SweepData, colours: dict) -> Optional[bytes]:
    """τ against load, and per-position acceptance at the lowest (solid) and highest (dashed) load."""
    spec = [a for a in data.arms if data.arm_kinds.get(a, {}).get("method") != "none"]
    if not spec:
        return None
    facets = list(data.facet_frames())
    fig, axes = new_figure(2 * len(facets), max_columns=2)
    for i, (title, frame) in enumerate(facets):
        ax_tau, ax_pos = axes[2 * i], axes[2 * i + 1]
        for arm in spec:
            mine = _arm_series(frame, data, arm)
            if mine.empty:
                continue
            ax_tau.plot(mine["_x"], mine["spec_decode_acceptance_length"], marker="o", color=colours[arm], label=arm)
            if data.positions is None:
                continue
            for row, style in ((mine.iloc[0], "-"), (mine.iloc[-1], "--")):
                rates = data.positions[(data.positions["point"] == row["point"]) & (data.positions["arm"] == arm)]
                if len(rates):
                    label = f"{arm}, {short_field(data.x)}={format_value(row[data.x])}"
                    ax_pos.plot(rates["position"], rates["acceptance_rate"], linestyle=style, marker=".",
                                color=colours[arm], label=label)
        ax_tau.set_ylabel(metric_label("spec_decode_acceptance_length"))
        _x_axis(ax_tau, data)
        ax_tau.set_title("τ: tokens emitted per request-step" + (f"\n{title}" if title else ""), fontsize=9)
        ax_pos.set_xlabel("draft position k (position)")
        ax_pos.set_ylabel("accepted at k ÷ verified at k (fraction)")
        ax_pos.set_ylim(0, 1.02)
        ax_pos.set_title("per-position acceptance, lowest (solid) and highest (dashed) load" +
                         (f"\n{title}" if title else ""), fontsize=9)
        for ax in (ax_tau, ax_pos):
            ax.grid(alpha=0.3)
            ax.legend(fontsize=6)
    fig.tight_layout()
    return png_bytes(fig)


def figures(data: SweepData) -> dict[str, tuple[str, bytes]]:
    """Every figure of a sweep report: file name -> (caption, PNG)."""
    colours = arm_colours(data.arms)
    levels = data.doc.get("sla_user_tok_s") or []
    sla = [("x", level, f"≥ {level:g}") for level in levels]
    caption = ("Output tokens/s per GPU against median tokens/s per user. Each arm's Pareto front is joined; "
               "dominated points are faded; labels give the load."
               + (" Dashed: the per-user speed SLAs of the table below." if levels else ""))
    out = {"report-pareto.png": (caption, pareto_png(data, colours, sla))}
    out["report-latency.png"] = ("Time to first token and time per output token against load.",
                                 latency_png(data, colours))
    goodput = metric_png(data, colours, "request_goodput", "goodput: requests/s meeting every SLO")
    if goodput:
        out["report-goodput.png"] = ("Goodput against load (the scenario's slo:).", goodput)
    acceptance = acceptance_png(data, colours)
    if acceptance:
        out["report-acceptance.png"] = ("τ against load, and the per-position acceptance rate.", acceptance)
    verify = metric_png(data, colours, "mean_verify_tokens_per_request_step", "verify tokens per request per step")
    if verify:
        out["report-verify.png"] = ("Mean verify tokens per request per step: how much of γ each scheduler "
                                    "verifies as load rises.", verify)
    return out
