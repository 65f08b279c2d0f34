"""What every study figure shares: one colour per arm in every plot, units on every axis, Pareto fronts, and
PNG bytes that say simlab wrote them."""

from __future__ import annotations

import io
import re
from typing import Any, Sequence

import numpy as np
from simlab.studies.labels import parallel_label, split_label

FIELD_UNITS = {
    "workload.concurrency": "concurrent users",
    "workload.rate": "requests/s",
    "workload.time_scale": "× the trace's gaps",
    "workload.num_requests": "requests",
    "workload.think_time_s": "s",
    "engine.replicas": "replicas",
    "engine.max_num_seqs": "requests per replica",
    "engine.max_batch_tokens": "tokens",
    "engine.kv_cache_tokens": "tokens",
    "acceptance.confidence.noise_logit_sd": "logit s.d.",
    "acceptance.confidence.bias_logit": "logits",
    "acceptance.alpha": "probability",
}
METRIC_LABELS = {
    "median_user_tok_s": "median tokens/s per user",
    "output_throughput_per_gpu": "output tokens/s per GPU",
    "output_throughput": "output tokens/s",
    "request_goodput": "goodput (requests/s meeting the SLO)",
    "request_throughput": "requests/s",
    "spec_decode_acceptance_length": "τ: tokens per request-step",
    "mean_verify_tokens_per_request_step": "verify tokens per request per step",
    "spec_decode_acceptance_rate": "accepted ÷ verified drafts (fraction)",
    "num_gpus": "GPUs",
    "completed": "requests",
    "duration_s": "s",
}


def field_label(path: str) -> str:
    """An axis label for a varied field: its path and its unit."""
    unit = FIELD_UNITS.get(path)
    if unit is None and re.fullmatch(r"arms\[\d+\]\.gamma", path):
        unit = "draft positions"
    return f"{path} ({unit or 'as in the scenario'})"


def metric_label(key: str) -> str:
    """An axis label for a METRICS key, with its unit."""
    if key in METRIC_LABELS:
        return METRIC_LABELS[key]
    if key.endswith("_ms"):
        return f"{key} (ms)"
    if key.endswith("_s"):
        return f"{key} (s)"
    return f"{key} (as reported)"


def arm_colours(arms: Sequence[str]) -> dict[str, Any]:
    """One colour per arm, by its place in the scenario: the same in every figure of a report."""
    import matplotlib

    cmap = matplotlib.colormaps["tab10" if len(arms) <= 10 else "tab20"]
    return {arm: cmap(i % cmap.N) for i, arm in enumerate(arms)}


def pareto_mask(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """True for points no other point beats on both axes (higher is better on each)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    front = np.zeros(x.size, dtype=bool)
    for i in np.flatnonzero(keep):
        others = keep.copy()
        others[i] = False
        dominated = (x[others] >= x[i]) & (y[others] >= y[i]) & ((x[others] > x[i]) | (y[others] > y[i]))
        front[i] = not dominated.any()
    return front


def format_value(value: Any) -> str:
    """A varied field's value, short (a disaggregation's pools as ``P:D``)."""
    if isinstance(value, float):
        return f"{value:g}"
    if value is None:
        return "none"
    if isinstance(value, dict) and {"prefill_replicas", "decode_replicas"} <= value.keys():
        return f"{split_label(value)} (prefill:decode)"
    if isinstance(value, dict) and value.get("kind") == "roofline" and {"gpu", "model"} <= value.keys():
        tp, ep = int(value.get("tensor_parallel", 1)), int(value.get("expert_parallel", 1))
        layout = parallel_label(tp, ep) + (f" ({ep // tp} attention groups)" if ep > tp else "")
        return f"{value['gpu']} {value['model']} {value.get('precision', 'bf16')}, {layout}"
    return str(value)


def short_field(path: str) -> str:
    """A varied field's name for titles and legends: its last part (``bias_logit``), lists kept (``arms[2].gamma``)."""
    return path if "[" in path else path.rpartition(".")[2]


def png_bytes(fig) -> bytes:
    """The figure as a 256-colour PNG (a third of the size of matplotlib's, which matters for reports committed
    to git and embedded in pages), its Software chunk saying simlab; the figure is closed."""
    import matplotlib.pyplot as plt
    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    from simlab.common.version import __version__

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    image = Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")
    palette = image.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    info = PngInfo()
    info.add_text("Software", f"simlab {__version__}")
    out = io.BytesIO()
    palette.save(out, format="PNG", optimize=True, pnginfo=info)
    return out.getvalue()


def new_figure(num_panels: int, *, width: float = 6.0, height: float = 4.2, max_columns: int = 3,
               sharey: bool = False):
    """A figure with ``num_panels`` axes in a grid; returns (figure, flat list of the used axes). ``sharey``: one
    y axis for every panel (a measure compared across panels at a glance)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = min(max_columns, max(1, num_panels))
    rows = int(np.ceil(num_panels / columns))
    fig, axes = plt.subplots(rows, columns, figsize=(width * columns, height * rows), squeeze=False,
                             sharey="all" if sharey else False)
    flat = list(axes.ravel())
    for ax in flat[num_panels:]:
        ax.set_visible(False)
    return fig, flat[:num_panels]


def plain_log_axis(axis) -> None:
    """Ticks of a log axis as plain numbers (3, 10, 30, not 3×10⁰), minor ticks at 2, 3 and 5 of each decade:
    all labelled where the axis spans at most a factor of 30, the 2s and 5s up to a factor of 1,000."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    def minor(value: float, _) -> str:  # decided when drawn, on the axis's final range
        low, high = sorted(axis.get_view_interval())
        span = high / low if low > 0 else float("inf")
        lead = round(value / 10 ** np.floor(np.log10(value))) if value > 0 else 0
        return f"{value:,.10g}" if span <= 30 or (span <= 1000 and lead in (2, 5)) else ""

    axis.set_major_locator(LogLocator(base=10))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.10g}"))
    axis.set_minor_locator(LogLocator(base=10, subs=(2.0, 3.0, 5.0)))
    axis.set_minor_formatter(FuncFormatter(minor))


def place_labels(ax, points: list[tuple[float, float, str, Any, float]], *, min_dx_px: float = 16.0,
                 min_dy_px: float = 11.0, fontsize: float = 6.0) -> int:
    """Write each (x, y, text, colour, alpha) beside its point, skipping one that would overlap a label already
    written (the first come first: pass the points that matter first); returns how many were written."""
    ax.autoscale_view()
    to_px = ax.transData.transform
    placed: list[tuple[float, float]] = []
    for x, y, text, colour, alpha in points:
        if not (np.isfinite(x) and np.isfinite(y)):
            continue
        px, py = to_px((x, y))
        if any(abs(px - qx) < min_dx_px + 3 * len(text) and abs(py - qy) < min_dy_px for qx, qy in placed):
            continue
        placed.append((px, py))
        ax.annotate(text, (x, y), textcoords="offset points", xytext=(5, 4), fontsize=fontsize, color=colour,
                    alpha=alpha)
    return len(placed)
