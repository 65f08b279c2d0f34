"""The real-against-simulated figure of a validation (``validation.png``, and ``simlab report`` on the folder)."""

from __future__ import annotations

import io

import numpy as np

PANEL_METRICS = (("output_throughput", "throughput"), ("mean_tpot_ms", "TPOT mean"),
                 ("median_tpot_ms", "TPOT p50"), ("p90_tpot_ms", "TPOT p90"), ("mean_ttft_ms", "TTFT mean"),
                 ("p90_ttft_ms", "TTFT p90"), ("spec_decode_acceptance_length", "τ"),
                 ("mean_verify_tokens_per_step", "verify/step"))


def render_validation_png(document: dict) -> bytes:
    """Four panels: relative error per metric and arm (the ±bound band shaded), per-position acceptance real
    against simulated, throughput and mean TPOT real against simulated."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = document["arms"]
    names = list(arms)
    colors = {name: plt.get_cmap("tab10")(i % 10) for i, name in enumerate(names)}
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    title = document.get("scenario", {}).get("name", "validation")
    fig.suptitle(f"{title}: real (solid) against simulated (hatched / dashed)", fontsize=13)

    ax = axes[0, 0]
    width = 0.8 / max(1, len(names))
    x = np.arange(len(PANEL_METRICS))
    for i, name in enumerate(names):
        errors = [arms[name]["error"].get(key) for key, _ in PANEL_METRICS]
        ax.bar(x + i * width, [100 * e if e is not None else np.nan for e in errors], width, color=colors[name],
               label=name)
    bound = max(arms[names[0]]["target"].values()) if names and arms[names[0]].get("target") else 0.05
    ax.axhspan(-100 * bound, 100 * bound, color="grey", alpha=0.15, label=f"target ±{bound:.0%}")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(x + width * (len(names) - 1) / 2, [label for _, label in PANEL_METRICS], rotation=30, ha="right")
    ax.set_ylabel("simulated − real, % of real")
    ax.set_title("relative error per metric")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")

    ax = axes[0, 1]
    for name in names:
        for part, style in (("real", "-"), ("simulated", "--")):
            rates = arms[name][part].get("spec_decode_per_position_acceptance_rates") or []
            if rates:
                ax.plot(np.arange(1, len(rates) + 1), [np.nan if v is None else v for v in rates], style, marker="o",
                        color=colors[name], label=f"{name} ({part})")
    ax.set_xlabel("draft position k")
    ax.set_ylabel("accepted at k / verified at k")
    ax.set_ylim(0, 1.02)
    ax.set_title("per-position acceptance")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)

    for ax, key, label in ((axes[1, 0], "output_throughput", "output tokens/s"),
                           (axes[1, 1], "mean_tpot_ms", "mean TPOT (ms)")):
        x = np.arange(len(names))
        real = [arms[n]["real"].get(key) or 0.0 for n in names]
        simulated = [arms[n]["simulated"].get(key) or 0.0 for n in names]
        ax.bar(x - 0.2, real, 0.4, color=[colors[n] for n in names], label="real")
        ax.bar(x + 0.2, simulated, 0.4, color=[colors[n] for n in names], hatch="//", alpha=0.6, label="simulated")
        ax.set_xticks(x, names, rotation=15)
        ax.set_ylabel(label)
        ax.set_title(f"{label}: real against simulated")
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=8)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return buffer.getvalue()
