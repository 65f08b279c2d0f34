"""The audit's outputs: a JSON document (written atomically) and a rich table."""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

from rich.console import Console
from rich.table import Table

from simlab.audit.enumeration import AuditResult, Distribution
from simlab.common.version import __version__


def audit_json(result: AuditResult) -> dict[str, Any]:
    """``{"generator": "simlab audit", "simlab_version": ..., "schedulers": {label: {"distribution":
    {sequence: p}, "tv": d, "exact": {...}}}}``, schedulers in the file's order.

    ``distribution`` and ``tv`` are floats (a lossless scheduler's tv is exactly 0.0); ``exact`` repeats
    them as fraction strings such as ``"3/5"``. Sequences of probability 0 are left out.
    """
    problem = result.problem
    schedulers: dict[str, Any] = {}
    for verdict in result.verdicts:
        ordered = _ordered(verdict.distribution)
        schedulers[verdict.label] = {
            "distribution": {problem.spell(seq): float(p) for seq, p in ordered},
            "tv": float(verdict.tv),
            "exact": {
                "distribution": {problem.spell(seq): str(p) for seq, p in ordered},
                "tv": str(verdict.tv),
            },
        }
    return {"generator": "simlab audit", "simlab_version": __version__, "schedulers": schedulers}


def audit_json_text(result: AuditResult) -> str:
    """The JSON document as text (indented, one trailing newline)."""
    return json.dumps(audit_json(result), indent=2) + "\n"


def _ordered(dist: Distribution) -> list[tuple[tuple[int, ...], Fraction]]:
    return sorted(((seq, p) for seq, p in dist.items() if p != 0), key=lambda item: item[0])


def audit_table(result: AuditResult) -> Table:
    """Scheduler, exact TV, whether it is lossless here, and what the scheduler registry claims."""
    problem = result.problem
    table = Table(
        title=f"Losslessness audit: first {problem.num_output_tokens} token(s), gamma = {problem.gamma}, "
        f"vocab = {', '.join(problem.vocab)}"
    )
    table.add_column("scheduler")
    table.add_column("TV", justify="right")
    table.add_column("lossless")
    table.add_column("registry says")
    for verdict in result.verdicts:
        tv = "0" if verdict.tv == 0 else f"{verdict.tv} ≈ {float(verdict.tv):.6g}"
        measured = "[green]yes[/green]" if verdict.lossless else "[red]no[/red]"
        claimed = "lossless" if verdict.registry_lossless else "not lossless"
        if verdict.registry_lossless and not verdict.lossless:
            claimed = "[bold red]lossless (contradicted here)[/bold red]"
        table.add_row(verdict.label, tv, measured, claimed)
    return table


def print_report(result: AuditResult, console: Console | None = None) -> None:
    """Print the table to ``console`` (stdout by default)."""
    (console or Console()).print(audit_table(result))
