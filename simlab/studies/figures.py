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


def new_figure(num_panels: int, *, width: float = 6.0, height: float = 4.2, max_columns: int = 3):
    """A figure with ``num_panels`` axes in a grid; returns (figure, flat list of the used axes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = min(max_columns, max(1, num_panels))
    rows = int(np.ceil(num_panels / columns))
    fig, axes = plt.subplots(rows, columns, figsize=(width * columns, height * rows), squeeze=False)
    flat = list(axes.ravel())
    for ax in flat[num_panels:]:
        ax.set_visible(False)
    return fig, flat[:num_panels]
