"""A one-page picture of a run: per-user speed against throughput, TTFT and TPOT distributions with the SLO,
goodput, per-position acceptance and how much each arm verified as load changed.

Every arm keeps one colour in every panel (Okabe-Ito's colour-blind-safe palette, then Paul Tol's muted one from
the ninth arm on; an arm that reads the true outcomes, the oracle, is grey), and each scheduler has its own line
style and marker, so arms stay apart in grey-scale too. One legend serves the whole figure.
"""

from __future__ import annotations

import io

import numpy as np
import pandas as pd

OKABE_ITO = ("#000000", "#E69F00", "#56B4E9", "#009E73", "#0072B2", "#D55E00", "#CC79A7", "#F0E442")
# after Okabe-Ito's eight, Paul Tol's muted scheme (also colour-blind safe), so that 16 arms keep distinct colours
TOL_MUTED = ("#882255", "#44AA99", "#999933", "#332288", "#AA4499", "#117733", "#88CCEE", "#DDCC77")
PALETTE = OKABE_ITO + TOL_MUTED
BOUND_COLOUR = "#8C8C8C"
SLO_COLOUR = "#B22222"
SCHEDULER_STYLE = {  # line style, marker
    "none": ("-", "P"),
    "fixed": ("-", "o"),
    "threshold": ("--", "s"),
    "hardware_aware": ("-.", "^"),
    "async_topk": (":", "v"),
    "goodput": ((0, (6, 2, 1, 2, 1, 2)), "D"),
    "oracle": ((0, (1, 1)), "*"),
}
OTHER_STYLE = ((0, (4, 2)), "X")


def arm_styles(summary: dict) -> dict[str, dict]:
    """Per arm (in summary order): ``color``, ``linestyle``, ``marker`` and the legend ``label``."""
    names = list(summary["arms"])
    configs = summary.get("scenario", {}).get("arms") or []
    styles, palette = {}, iter(PALETTE * (len(names) // len(PALETTE) + 1))
    for i, name in enumerate(names):
        metrics = summary["arms"][name]
        cfg = configs[i] if len(configs) == len(names) else {}
        kind = "none" if cfg.get("method") == "none" else ((cfg.get("scheduler") or {}).get("kind") or "fixed")
        linestyle, marker = SCHEDULER_STYLE.get(kind, OTHER_STYLE)
        bound = not metrics.get("realisable", True)
        label = name + (" (bound)" if bound else "") + (" - overloaded" if metrics.get("warnings") else "")
        styles[name] = {"color": BOUND_COLOUR if bound else next(palette), "linestyle": linestyle,
                        "marker": marker, "label": label}
    return styles


def render_png(summary: dict, requests: pd.DataFrame, steps: pd.DataFrame) -> bytes:
    """The report figure as PNG bytes (matplotlib, no display needed); its ``Software`` tag names simlab, so a
    later ``simlab report`` may replace it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    from simlab.common.version import __version__

    arms = summary["arms"]
    styles = arm_styles(summary)
    slo = summary["scenario"].get("slo") or {}
    fig, axes = plt.subplots(2, 3, figsize=(18, 10.5))
    first = next(iter(arms.values()))
    fig.suptitle(f"{summary['scenario']['name']}: {first['completed']:,} requests per arm", fontsize=14)

    _speed_vs_throughput(axes[0, 0], arms, styles)
    latency = _latencies_ms(requests)
    _cdf(axes[0, 1], latency, "ttft", styles, slo.get("ttft_ms"), "time to first token (ms, log scale)",
         "TTFT: fraction of requests served within x (up and left is better)")
    _cdf(axes[0, 2], latency, "tpot", styles, slo.get("tpot_ms"), "time per output token (ms, log scale)",
         "TPOT: fraction of requests within x (up and left is better)")
    _goodput(axes[1, 0], arms, styles, slo)
    _acceptance(axes[1, 1], arms, styles)
    _verify_under_load(axes[1, 2], steps, styles)

    handles = [Line2D([], [], color=s["color"], linestyle=s["linestyle"], marker=s["marker"], markersize=8,
                      markeredgecolor="black", markeredgewidth=0.5, linewidth=2) for s in styles.values()]
    fig.legend(handles, [s["label"] for s in styles.values()], loc="lower center", ncol=min(len(handles), 5),
               fontsize=11, frameon=False, handlelength=4)
    rows = (len(handles) + 4) // 5
    fig.tight_layout(rect=(0, 0.035 * rows + 0.01, 1, 0.97))
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, metadata={"Software": f"simlab {__version__} report"})
    plt.close(fig)
    return buffer.getvalue()


def _line(ax, x, y, style: dict, **extra) -> None:
    ax.plot(x, y, color=style["color"], linestyle=style["linestyle"], linewidth=2, **extra)


def _speed_vs_throughput(ax, arms: dict, styles: dict) -> None:
    for name, m in arms.items():
        s = styles[name]
        ax.scatter(m["output_throughput"], m["median_user_tok_s"] or 0, s=110, color=s["color"], marker=s["marker"],
                   edgecolors="black", linewidths=0.6, zorder=3)
    ax.set_xlim(left=0, right=max(m["output_throughput"] for m in arms.values()) * 1.1)
    ax.set_ylim(bottom=0, top=max((m["median_user_tok_s"] or 0) for m in arms.values()) * 1.1 or 1)
    ax.set_xlabel("output throughput (tokens/s, all users)")
    ax.set_ylabel("median per-user speed (tokens/s)")
    ax.set_title("per-user speed vs throughput (up and right is better)")
    ax.grid(alpha=0.3)


def _latencies_ms(requests: pd.DataFrame) -> pd.DataFrame:
    decode_tokens = requests.output_tokens - 1
    tpot = ((requests.finish_s - requests.first_token_s) / decode_tokens.where(decode_tokens > 0)) * 1e3
    return pd.DataFrame({"arm": requests.arm, "ttft": (requests.first_token_s - requests.arrival_s) * 1e3,
                         "tpot": tpot})


def _cdf(ax, latency: pd.DataFrame, column: str, styles: dict, slo_ms, xlabel: str, title: str) -> None:
    import matplotlib.ticker

    for name, style in styles.items():
        values = latency.loc[latency.arm == name, column].dropna().to_numpy()
        values = np.sort(values[values > 0])
        if values.size:
            _line(ax, values, np.arange(1, values.size + 1) / values.size, style)
    if slo_ms:
        _slo_line(ax, slo_ms, f"SLO {slo_ms:,g} ms")
    ax.set_xscale("log")
    low, high = ax.get_xlim()
    subs = (1.0, 2.0, 5.0) if high / low <= 10**2.5 else (1.0,)  # label 1-2-5 steps unless that crowds the axis
    ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=subs))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(
        lambda value, _: f"{value:,.0f}" if value >= 1 else f"{value:g}"))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of requests")
    ax.set_title(title)
    ax.grid(alpha=0.3, which="both")


def _slo_line(ax, x: float, text: str) -> None:
    ax.axvline(x, color=SLO_COLOUR, linestyle="--", linewidth=1.5, zorder=1)
    ax.annotate(text, xy=(x, 0.5), xytext=(4, 0), textcoords="offset points", rotation=90, va="center",
                color=SLO_COLOUR, fontsize=10, fontweight="bold")


def _goodput(ax, arms: dict, styles: dict, slo: dict) -> None:
    names = list(arms)
    y = np.arange(len(names))[::-1]
    throughput = [arms[n]["request_throughput"] for n in names]
    goodput = [arms[n].get("request_goodput") for n in names]
    colours = [styles[n]["color"] for n in names]
    has_goodput = any(g is not None for g in goodput)
    ax.barh(y, throughput, color="none" if has_goodput else colours, edgecolor=colours if has_goodput else "black",
            linewidth=1.5 if has_goodput else 0.5, height=0.7)
    objectives = ", ".join(f"{k.removesuffix('_ms').upper()} <= {v:,g} ms" for k, v in slo.items() if v)
    if has_goodput:
        ax.barh(y, [g or 0 for g in goodput], color=colours, height=0.7, edgecolor="black", linewidth=0.5)
        for yi, g, t in zip(y, goodput, throughput):
            if g is not None and t:
                ax.annotate(f"{g / t:.0%}", xy=(t, yi), xytext=(4, 0), textcoords="offset points", va="center",
                            fontsize=9)
        ax.set_title(
            f"goodput: requests/s meeting the SLO ({objectives})\n"
            "filled: meeting it, outline: all completed, %: the share meeting it"
        )
    else:
        ax.set_title("request throughput (the scenario has no slo: no goodput)")
    ax.set_yticks(y, names)
    ax.set_axisbelow(True)
    ax.set_xlim(left=0, right=max(throughput) * 1.15)
    ax.set_xlabel("requests per second")
    ax.grid(alpha=0.3, axis="x")


def _acceptance(ax, arms: dict, styles: dict) -> None:
    drawn = False
    for name, m in arms.items():
        rates = m.get("spec_decode_per_position_acceptance_rates") or []
        if rates:
            style = styles[name]
            _line(ax, np.arange(1, len(rates) + 1), [np.nan if v is None else v for v in rates], style,
                  marker=style["marker"], markersize=7, markeredgecolor="black", markeredgewidth=0.5)
            drawn = True
    ax.set_xlabel("draft position k")
    ax.set_ylabel("accepted at k / verified at k")
    ax.set_ylim(0, 1.02)
    ax.set_title("per-position acceptance")
    if drawn:
        ax.xaxis.get_major_locator().set_params(integer=True)
    ax.grid(alpha=0.3)


def _verify_under_load(ax, steps: pd.DataFrame, styles: dict) -> None:
    top = 0.0
    for name, style in styles.items():
        s = steps[(steps.arm == name) & (steps.decode_requests > 0)]
        if s.verify_tokens.sum() == 0:
            continue
        load = s.decode_requests.to_numpy()
        per_request = s.verify_tokens.to_numpy() / load
        edges = np.unique(np.quantile(load, np.linspace(0, 1, 13)))
        if edges.size < 2:
            continue
        bins = np.clip(np.searchsorted(edges, load, side="right") - 1, 0, edges.size - 2)
        used = [b for b in range(edges.size - 1) if (bins == b).any()]
        centers = [load[bins == b].mean() for b in used]
        means = [per_request[bins == b].mean() for b in used]
        _line(ax, centers, means, style, marker=style["marker"], markersize=6, markeredgecolor="black",
              markeredgewidth=0.5)
        top = max(top, max(means))
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0, top=top * 1.1 or 1)
    ax.set_xlabel("requests decoding in the step")
    ax.set_ylabel("drafted tokens verified per request")
    ax.set_title("verify budget under load (per step, binned by load)")
    ax.grid(alpha=0.3)
