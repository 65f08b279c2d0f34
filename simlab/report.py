"""A one-page picture of a run: speed per user against throughput, latency distributions, per-position
acceptance and how much each arm verified as load changed."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd


def render_png(summary: dict, requests: pd.DataFrame, steps: pd.DataFrame) -> bytes:
    """The report figure as PNG bytes (matplotlib, no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = summary["arms"]
    names = list(arms)
    colors = {name: plt.get_cmap("tab10")(i % 10) for i, name in enumerate(names)}
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    title = summary["scenario"]["name"]
    fig.suptitle(f"{title}: {next(iter(arms.values()))['completed']} requests per arm", fontsize=13)

    ax = axes[0, 0]
    for name in names:
        m = arms[name]
        ax.scatter(m["output_throughput"], m["median_user_tok_s"] or 0, s=60, color=colors[name],
                   marker="o" if m.get("realisable", True) else "x", label=name)
    ax.set_xlabel("output throughput (tokens/s)")
    ax.set_ylabel("median per-user speed (tokens/s)")
    ax.set_title("per-user speed vs throughput (up and right is better)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")

    ax = axes[0, 1]
    for name in names:
        r = requests[requests.arm == name]
        decode_tokens = r.output_tokens.to_numpy() - 1
        ok = decode_tokens > 0
        tpot_ms = ((r.finish_s - r.first_token_s).to_numpy()[ok] / decode_tokens[ok]) * 1e3
        if tpot_ms.size:
            values = np.sort(tpot_ms)
            ax.plot(values, np.arange(1, values.size + 1) / values.size, color=colors[name], label=name)
    slo = summary["scenario"].get("slo") or {}
    if slo.get("tpot_ms"):
        ax.axvline(slo["tpot_ms"], color="grey", linestyle="--", linewidth=1, label="SLO")
    ax.set_xscale("log")
    ax.set_xlabel("time per output token (ms, log)")
    ax.set_ylabel("fraction of requests")
    ax.set_title("TPOT distribution")
    ax.grid(alpha=0.3)

    ax = axes[1, 0]
    for name in names:
        rates = arms[name].get("spec_decode_per_position_acceptance_rates") or []
        if rates:
            positions = np.arange(1, len(rates) + 1)
            ax.plot(positions, [np.nan if v is None else v for v in rates], marker="o", color=colors[name], label=name)
    ax.set_xlabel("draft position k")
    ax.set_ylabel("accepted at k / verified at k")
    ax.set_ylim(0, 1.02)
    ax.set_title("per-position acceptance")
    ax.grid(alpha=0.3)

    ax = axes[1, 1]
    for name in names:
        s = steps[(steps.arm == name) & (steps.decode_requests > 0)]
        if s.verify_tokens.sum() == 0:
            continue
        load = s.decode_requests.to_numpy()
        per_request = s.verify_tokens.to_numpy() / load
        edges = np.unique(np.quantile(load, np.linspace(0, 1, 13)))
        if edges.size < 2:
            continue
        bins = np.clip(np.searchsorted(edges, load, side="right") - 1, 0, edges.size - 2)
        centers = [load[bins == b].mean() for b in range(edges.size - 1) if (bins == b).any()]
        means = [per_request[bins == b].mean() for b in range(edges.size - 1) if (bins == b).any()]
        ax.plot(centers, means, marker=".", color=colors[name], label=name)
    ax.set_xlabel("requests decoding in the step")
    ax.set_ylabel("verify tokens per request")
    ax.set_title("verify budget under load")
    ax.grid(alpha=0.3)

    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()


def load_results(folder: Path) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    """Read a results folder written by ``simlab run``."""
    import json

    from simlab.errors import InputError

    folder = Path(folder)
    missing = [n for n in ("summary.json", "requests.csv", "steps.csv.gz") if not (folder / n).is_file()]
    if missing:
        raise InputError(f"not a results folder (missing {', '.join(missing)})", file=folder,
                         valid="a folder written by `simlab run`")
    summary = json.loads((folder / "summary.json").read_text())
    return summary, pd.read_csv(folder / "requests.csv"), pd.read_csv(folder / "steps.csv.gz")
