"""The terminal table comparing arms."""

from __future__ import annotations

from rich.table import Table

COLUMNS = (
    ("arm", None, "{}"),
    ("req/s", "request_throughput", "{:.2f}"),
    ("tok/s", "output_throughput", "{:,.0f}"),
    ("user\ntok/s", "median_user_tok_s", "{:.0f}"),
    ("TTFT\np50 ms", "median_ttft_ms", "{:,.0f}"),
    ("TTFT\np99 ms", "p99_ttft_ms", "{:,.0f}"),
    ("TPOT\np50 ms", "median_tpot_ms", "{:.1f}"),
    ("TPOT\np99 ms", "p99_tpot_ms", "{:.1f}"),
    ("tokens\n/round", "spec_decode_acceptance_length", "{:.2f}"),
    ("verify\n/req", "mean_verify_tokens_per_request_step", "{:.2f}"),
    ("accept\nrate", "spec_decode_acceptance_rate", "{:.0%}"),
    ("good-\nput/s", "request_goodput", "{:.2f}"),
    ("wall\ns", "sim_wall_s", "{:.1f}"),
)


def arms_table(title: str, arms: dict[str, dict]) -> Table:
    """A rich table with one row per arm; the oracle arm is flagged as not realisable."""
    table = Table(title=title, title_justify="left")
    for header, _, _ in COLUMNS:
        table.add_column(header, justify="left" if header == "arm" else "right", no_wrap=True)
    for name, metrics in arms.items():
        row = []
        for header, key, fmt in COLUMNS:
            if key is None:
                label = name + ("" if metrics.get("realisable", True) else " (bound)")
                row.append(label)
                continue
            value = metrics.get(key)
            row.append("-" if value is None else fmt.format(value))
        table.add_row(*row)
    if any(not m.get("realisable", True) for m in arms.values()):
        table.caption = "(bound): knows the true outcomes; an upper bound, not realisable"
    return table
