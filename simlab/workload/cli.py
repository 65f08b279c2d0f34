"""``simlab traces``: list the shipped traces and describe one trace (shipped or a file).

Mounted by the main CLI as ``simlab traces``. Input errors propagate as :class:`~simlab.common.errors.InputError`
(the main CLI prints them and exits with status 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from simlab.common.errors import InputError

if TYPE_CHECKING:
    from simlab.config.workload import TraceColumns
    from simlab.workload.stats import TraceStats

# the workload modules (pandas) are imported inside the commands, so that `simlab --help` stays fast

traces_app = typer.Typer(help="Request traces: the shipped ones and any CSV/JSONL file.", no_args_is_help=True)
_FORMATS = ("azure", "mooncake", "csv", "jsonl")
_UNITS = ("s", "ms", "us", "ns", "datetime")
_CLI_ALIASES = (
    ("columns", "--arrival/--prompt/--output"), ("columns.arrival", "--arrival"),
    ("columns.prompt_tokens", "--prompt"), ("columns.output_tokens", "--output"),
)


@traces_app.command("list")
def list_traces() -> None:
    """A table of the traces shipped with simlab: size, span, rate, mean lengths and licence."""
    from simlab.workload.stats import trace_stats
    from simlab.workload.trace_index import shipped_traces
    from simlab.workload.traces import read_trace

    headers = ("name", "rows", "span", "req/s", "prompt", "output", "licence")
    rows = []
    for name, entry in sorted(shipped_traces().items()):
        trace = read_trace(entry.path, format=entry.format)
        stats = trace_stats(trace.arrival_s, trace.prompt_tokens, trace.output_tokens)
        rows.append((name, f"{stats.num_requests:,}", _duration(stats.duration_s), f"{stats.rate_per_s:.2f}",
                     f"{stats.mean_prompt_tokens:,.0f}", f"{stats.mean_output_tokens:,.0f}", entry.licence))
    table = Table(title="Shipped traces (use the name as workload.path)", box=box.SIMPLE, show_edge=False,
                  caption="prompt, output: mean tokens per request; span: first to last arrival")
    for i, header in enumerate(headers):
        width = max([len(header)] + [len(row[i]) for row in rows])
        table.add_column(header, justify="left" if header in ("name", "licence") else "right", min_width=width)
    for row in rows:
        table.add_row(*row)
    Console().print(table)


@traces_app.command("info")
def info(
    name_or_path: Annotated[str, typer.Argument(help="A shipped trace name (see `list`) or a path to a trace.")],
    format: Annotated[Optional[str], typer.Option(help="azure, mooncake, csv or jsonl (inferred if omitted).")] = None,
    arrival: Annotated[Optional[str], typer.Option(help="Arrival column of a csv/jsonl trace.")] = None,
    prompt: Annotated[Optional[str], typer.Option(help="Prompt-length column of a csv/jsonl trace.")] = None,
    output: Annotated[Optional[str], typer.Option(help="Output-length column of a csv/jsonl trace.")] = None,
    arrival_unit: Annotated[str, typer.Option(help="s, ms, us, ns or datetime.")] = "s",
    as_json: Annotated[bool, typer.Option("--json", help="Print the statistics as JSON.")] = False,
) -> None:
    """Statistics of one trace: rows, span, arrival rate and burstiness, prompt and output lengths."""
    from simlab.workload.stats import trace_stats
    from simlab.workload.trace_index import locate_trace
    from simlab.workload.traces import TraceOrigin, read_trace

    if format is not None and format not in _FORMATS:
        raise InputError("unknown trace format", field="--format", value=format, valid=", ".join(_FORMATS))
    if arrival_unit not in _UNITS:
        raise InputError("unknown unit", field="--arrival-unit", value=arrival_unit, valid=", ".join(_UNITS))
    columns = _columns(arrival, prompt, output, arrival_unit)
    location = locate_trace(name_or_path, base_dir=Path.cwd(), file=None, field="NAME_OR_PATH")
    fmt = location.format_for(format, columns is not None)
    trace = read_trace(location.path, format=fmt, columns=columns, origin=TraceOrigin(aliases=_CLI_ALIASES))
    stats = trace_stats(trace.arrival_s, trace.prompt_tokens, trace.output_tokens)
    about = {"name": location.label, "path": str(location.path), "format": trace.format,
             "sorted_on_read": not trace.was_sorted}
    if location.shipped:
        about |= {"licence": location.shipped.licence, "source": location.shipped.source,
                  "description": location.shipped.description}
    if as_json:
        typer.echo(json.dumps({**about, **stats.to_dict()}, indent=2))
        return
    Console().print(_info_table(about, stats))


def _columns(
    arrival: Optional[str], prompt: Optional[str], output: Optional[str], unit: str
) -> Optional[TraceColumns]:
    from simlab.config.workload import TraceColumns

    given = {"--arrival": arrival, "--prompt": prompt, "--output": output}
    if all(v is None for v in given.values()):
        return None
    missing = [name for name, value in given.items() if value is None]
    if missing:
        raise InputError("a column mapping needs all three columns", field=", ".join(missing),
                         valid="--arrival, --prompt and --output together")
    return TraceColumns(arrival=arrival, prompt_tokens=prompt, output_tokens=output, arrival_unit=unit)


def _info_table(about: dict, stats: TraceStats) -> Table:
    table = Table(title=f"Trace {about['name']}", show_header=False)
    table.add_column("what", no_wrap=True)
    table.add_column("value", overflow="fold")
    for key, value in about.items():
        table.add_row(key, str(value))
    table.add_row("requests", f"{stats.num_requests:,}")
    table.add_row("duration", f"{stats.duration_s:,.1f} s ({_duration(stats.duration_s)})")
    table.add_row("rate (req/s)", f"{stats.rate_per_s:.3f}")
    table.add_row("inter-arrival cv", f"{stats.gap_cv:.3f}")
    for what in ("prompt", "output"):
        table.add_row(
            f"{what} mean/median/p99/max",
            f"{getattr(stats, f'mean_{what}_tokens'):,.1f} / {getattr(stats, f'median_{what}_tokens'):,.0f} / "
            f"{getattr(stats, f'p99_{what}_tokens'):,.0f} / {getattr(stats, f'max_{what}_tokens'):,}",
        )
    return table


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.1f}m" if seconds >= 120 else f"{seconds:.1f}s"
