"""The figures of a sweep report, one PNG each, one panel per facet (the varied fields other than the load)."""

from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd

from simlab.studies.figures import (arm_colours, format_value, metric_label, new_figure, pareto_mask, place_labels,
                                    plain_log_axis, png_bytes, short_field)
from simlab.studies.sweep_data import SweepData

PERCENTILE_STYLES = (("median", "-", "p50"), ("p90", "--", "p90"), ("p99", ":", "p99"))


MAX_ARMS_PER_PANEL = 5  # more lines than this on one panel are not read at a glance


def arm_groups(data: SweepData) -> list[tuple[str, list[str]]]:
    """The arms split into panels of at most MAX_ARMS_PER_PANEL lines, the baseline (and the no-speculation arm)
    on each: the fixed-γ arms and the other schedulers on panels of their own where that takes no more panels
    than the fewest possible, else the arms in order on that fewest number of panels, evenly filled. One group
    (named "") when all fit on one panel."""
    import math

    from simlab.studies.gains import fixed_arms, no_spec_arm

    if len(data.arms) <= MAX_ARMS_PER_PANEL:
        return [("", list(data.arms))]
    base = data.doc.get("baseline") or no_spec_arm(data) or data.arms[0]
    anchors = [a for a in dict.fromkeys([no_spec_arm(data), base]) if a is not None]
    fixed = [a for a in fixed_arms(data) if a not in anchors]
    others = [a for a in data.arms if a not in anchors and a not in fixed]
    size = MAX_ARMS_PER_PANEL - len(anchors)
    fewest = math.ceil((len(fixed) + len(others)) / size)
    by_family = [("fixed γ", fixed), ("load-aware schedulers", others)]
    if sum(math.ceil(len(f) / size) for _, f in by_family) > fewest:
        by_family = [("arms", fixed + others)]
    groups = []
    for name, family in by_family:
        num = math.ceil(len(family) / size)
        bounds = [round(i * len(family) / num) for i in range(num + 1)]  # evenly filled panels
        for n in range(num):
            chunk = family[bounds[n]:bounds[n + 1]]
            label = name + (f" ({n + 1} of {num})" if num > 1 else "")
            groups.append((label, [a for a in data.arms if a in anchors or a in chunk]))
    return groups


def _panels(data: SweepData, per_panel: int = 1, **kwargs):
    """(axes, facet title, group title, rows, arms) for each facet x arm group; ``per_panel`` axes each."""
    facets = list(data.facet_frames())
    groups = arm_groups(data)
    fig, axes = new_figure(len(facets) * len(groups) * per_panel, **kwargs)
    panels = []
    for i, (title, frame) in enumerate(facets):
        for j, (group, arms) in enumerate(groups):
            k = (i * len(groups) + j) * per_panel
            panels.append((axes[k:k + per_panel], title, group, frame, arms))
    return fig, panels


def _title(text: str, facet: str, group: str) -> str:
    """A panel's title: what it shows, then its facet and arm group, wrapped to the panel's width."""
    import textwrap

    where = "; ".join(t for t in (facet, group) if t)
    return "\n".join(textwrap.wrap(text, 62) + textwrap.wrap(where, 62))


def _share(axes: list) -> None:
    """One y axis for the given panels (the same measure, compared across panels)."""
    for ax in axes[1:]:
        ax.sharey(axes[0])


def _x_axis(ax, data: SweepData) -> None:
    ax.set_xlabel(data.x_label)
    if not data.x_numeric and not data.x_is_rate:
        categories = data.x_categories
        ax.set_xticks(range(len(categories)), [format_value(c) for c in categories], rotation=20, fontsize=8)
    elif _spans_decades(data.x_values(data.table)):
        ax.set_xscale("log")
        plain_log_axis(ax.xaxis)


def _spans_decades(values: pd.Series) -> bool:
    positive = values[values > 0]
    return len(positive) > 2 and positive.max() / positive.min() >= 16


def _arm_series(frame: pd.DataFrame, data: SweepData, arm: str) -> pd.DataFrame:
    mine = frame[frame["arm"] == arm].copy()
    mine["_x"] = data.x_values(mine)
    return mine.sort_values("_x")


def _load_label(data: SweepData, row: pd.Series) -> str:
    if data.x_is_rate:
        return f"{row['_x']:.3g}"
    return format_value(row[data.x])


def _legend(ax) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="best", framealpha=0.8)


def pareto_png(data: SweepData, colours: dict, sla_lines: Optional[list[tuple[str, float, str]]] = None) -> bytes:
    """Output tokens/s per GPU against median tokens/s per user, per arm; each arm's front joined, its dominated
    points faded, the front's points labelled by their load (where the labels do not overlap)."""
    fig, panels = _panels(data, width=7.0, height=5.0, max_columns=2, sharey=True)
    load_name = "requests/s" if data.x_is_rate else short_field(data.x)
    labelled = []
    for (ax,), facet, group, frame, arms in panels:
        labels = []
        for arm in arms:
            mine = _arm_series(frame, data, arm)
            if mine.empty:
                continue
            x, y = mine["median_user_tok_s"].to_numpy(float), mine["output_throughput_per_gpu"].to_numpy(float)
            front = pareto_mask(x, y)
            colour = colours[arm]
            ax.scatter(x[~front], y[~front], color=colour, alpha=0.25, s=22)
            order = np.argsort(x[front])
            ax.plot(x[front][order], y[front][order], marker="o", color=colour, label=arm, markersize=5)
            labels += [(xi, yi, _load_label(data, row), colour, 1.0)
                       for xi, yi, on, (_, row) in zip(x, y, front, mine.iterrows()) if on]
        for kind, value, text in sla_lines or []:
            if kind == "x":
                ax.axvline(value, color="black", linestyle="--", linewidth=0.8, alpha=0.6)
                ax.annotate(text, (value, 0.99), xycoords=("data", "axes fraction"), xytext=(2, 0),
                            textcoords="offset points", fontsize=6, rotation=90, va="top")
            else:
                ax.axhline(value, color="black", linestyle="--", linewidth=0.8, alpha=0.6)
        ax.set_xlabel(metric_label("median_user_tok_s"))
        ax.set_ylabel(metric_label("output_throughput_per_gpu"))
        ax.set_title(_title(f"Pareto front per arm (labels: {load_name}; faded: dominated)", facet, group),
                     fontsize=9)
        ax.grid(alpha=0.3)
        ax.tick_params(labelleft=True)
        _legend(ax)
        labelled.append((ax, labels))
    fig.tight_layout()
    for ax, labels in labelled:  # once every panel is drawn: the shared axis's range and the layout are final
        place_labels(ax, labels)
    return png_bytes(fig)


def latency_png(data: SweepData, colours: dict) -> bytes:
    """TTFT and TPOT p50 and p99 against load (log scale), one y axis per measure across the panels."""
    fig, panels = _panels(data, per_panel=2, max_columns=2)
    by_measure: dict[str, list] = {"ttft": [], "tpot": []}
    for axes, facet, group, frame, arms in panels:
        for ax, name in zip(axes, ("ttft", "tpot")):
            by_measure[name].append(ax)
            for arm in arms:
                mine = _arm_series(frame, data, arm)
                for stat, style, text in PERCENTILE_STYLES:
                    key = f"{stat}_{name}_ms"
                    if mine.empty or key not in mine or mine[key].isna().all() or stat == "p90":
                        continue
                    ax.plot(mine["_x"], mine[key], linestyle=style, marker=".", color=colours[arm],
                            linewidth=1.4 if stat == "median" else 0.9,
                            label=arm if stat == "median" else None)
            ax.set_title(_title(f"{name.upper()} p50 (solid) and p99 (dotted)", facet, group), fontsize=9)
            _x_axis(ax, data)
            ax.grid(alpha=0.3, which="both")
            _legend(ax)
    for name, axes in by_measure.items():
        _share(axes)
        positive = any((line.get_ydata() > 0).any() for ax in axes for line in ax.get_lines())
        for ax in axes:
            if positive:  # a log axis needs something above zero (TTFT is 0 where prefill costs nothing)
                ax.set_yscale("log")
                plain_log_axis(ax.yaxis)
            ax.set_ylabel(f"{name.upper()} (ms{', log scale' if positive else ''})")
    fig.tight_layout()
    return png_bytes(fig)


def metric_png(data: SweepData, colours: dict, key: str, title: str) -> Optional[bytes]:
    """One metric against load, a line per arm, one y axis across the panels; None when no arm has a value."""
    if key not in data.table or data.table[key].isna().all():
        return None
    fig, panels = _panels(data, sharey=True)
    for (ax,), facet, group, frame, arms in panels:
        for arm in arms:
            mine = _arm_series(frame, data, arm)
            if not mine.empty and mine[key].notna().any():
                ax.plot(mine["_x"], mine[key], marker="o", color=colours[arm], label=arm)
        ax.set_ylabel(metric_label(key))
        _x_axis(ax, data)
        ax.set_title(_title(title, facet, group), fontsize=9)
        ax.grid(alpha=0.3)
        ax.tick_params(labelleft=True)
        _legend(ax)
    fig.tight_layout()
    return png_bytes(fig)


def acceptance_png(data: SweepData, colours: dict) -> Optional[bytes]:
    """τ against load, and per-position acceptance at the lowest (solid) and highest (dashed) load."""
    spec = [a for a in data.arms if data.arm_kinds.get(a, {}).get("method") != "none"]
    if not spec:
        return None
    fig, panels = _panels(data, per_panel=2, max_columns=2)
    taus, positions = [], []
    for (ax_tau, ax_pos), facet, group, frame, arms in panels:
        taus.append(ax_tau)
        positions.append(ax_pos)
        for arm in (a for a in arms if a in spec):
            mine = _arm_series(frame, data, arm)
            if mine.empty:
                continue
            ax_tau.plot(mine["_x"], mine["spec_decode_acceptance_length"], marker="o", color=colours[arm], label=arm)
            if data.positions is None:
                continue
            for row, style in ((mine.iloc[0], "-"), (mine.iloc[-1], "--")):
                rates = data.positions[(data.positions["point"] == row["point"]) & (data.positions["arm"] == arm)]
                if len(rates):
                    ax_pos.plot(rates["position"], rates["acceptance_rate"], linestyle=style, marker=".",
                                color=colours[arm], label=arm if style == "-" else None)
        ax_tau.set_ylabel(metric_label("spec_decode_acceptance_length"))
        _x_axis(ax_tau, data)
        ax_tau.set_title(_title("τ: tokens emitted per request-step", facet, group), fontsize=9)
        ax_pos.set_xlabel("draft position k (position)")
        ax_pos.set_ylabel("accepted at k ÷ verified at k (fraction)")
        ax_pos.set_ylim(0, 1.02)
        ax_pos.set_title(_title("per-position acceptance, lowest (solid) and highest (dashed) load", facet, group),
                         fontsize=9)
        for ax in (ax_tau, ax_pos):
            ax.grid(alpha=0.3)
            _legend(ax)
    _share(taus)
    fig.tight_layout()
    return png_bytes(fig)


def figures(data: SweepData) -> dict[str, tuple[str, bytes]]:
    """Every figure of a sweep report: file name -> (caption, PNG)."""
    colours = arm_colours(data.arms)
    levels = data.doc.get("sla_user_tok_s") or []
    sla = [("x", level, f"≥ {level:g}") for level in levels]
    caption = ("Output tokens/s per GPU against median tokens/s per user. Each arm's Pareto front is joined; "
               "dominated points are faded; labels give the load ("
               + ("requests/s" if data.x_is_rate else short_field(data.x)) + "), where they do not overlap."
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
