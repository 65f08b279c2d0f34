"""``simlab profiles check [NAME]``: how far the profiles can be trusted, record by record (mounted under
``simlab profiles`` by simlab/cli.py; the work is :mod:`simlab.studies.profile_check`)."""

from __future__ import annotations

from typing import Optional

import typer

CHECK_HELP = ("A shipped profile name or a profile file: only the measurements of its GPU, model, stack and "
              "precision, simulated on it. Default: every measurement, each on its calibrated roofline.")


def profiles_check_command(
    name: Optional[str] = typer.Argument(None, help=CHECK_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only the summary per GPU x stack x precision."),
) -> None:
    """Simulate every public engine measurement the profiles are calibrated or checked on; print measured
    against simulated, the error, and whether the fit used the record (held-out records were never fitted)."""
    from rich.console import Console

    from simlab.studies.profile_check import check_records, error_table, load_records, matching_records

    console = Console()
    if not console.is_terminal:
        console = Console(width=220)
    records = load_records()
    hardware = None
    if name is not None:
        hardware, description = _profile(name)
        records = matching_records(records, description)
        if not records:
            console.print(f"no engine measurement of {description.get('gpu')} x {description.get('model')} x "
                          f"{description.get('stack')} x {description.get('precision')} is in the data set "
                          "(hw_profiles/calibration/engine_measurements.csv): its error is unknown", soft_wrap=True)
            return
    with console.status(f"simulating {len(records)} engine measurements ..."):
        rows = check_records(records, hardware=hardware)
    if not quiet:
        console.print(_rows_table(rows))
    console.print(_summary_table(error_table(rows)))


def _profile(name: str):
    """The hardware a named profile is (a path or shipped name) and what it stands for."""
    from pathlib import Path

    from simlab.hardware.profiles import find_profile, load_profile, roofline_source

    path = find_profile(name, base_dir=Path.cwd(), file=None, field="NAME")
    description = roofline_source(load_profile(path).config.provenance or {})
    return str(Path(path).resolve()), description


def _rows_table(rows):
    from rich.table import Table

    table = Table(title="Engine measurements: measured against simulated", title_justify="left")
    for header in ("record", "gpu", "stack", "prec.", "model", "drafter", "users", "in/out", "metric", "measured",
                   "simulated", "error", "role"):
        table.add_column(header, justify="left" if header in ("record", "metric", "role") else "right",
                         no_wrap=header == "record")
    for row in rows:
        r = row.record
        drafter = f"{r.spec_method} γ={r.num_draft_tokens} τ={r.acceptance_length:g}" if r.speculative else "-"
        table.add_row(r.source, r.gpu, r.engine, f"{r.precision}/{r.kv_precision}", r.model, drafter,
                      str(r.concurrency), f"{r.input_tokens}/{r.output_tokens}", "TPOT ms" if row.metric == "mean_tpot_ms" else "tok/s",
                      f"{row.measured:,.2f}", f"{row.simulated:,.2f}", f"{row.error:+.1%}", row.role)
    return table


def _summary_table(summary):
    from rich.table import Table

    table = Table(title="Error per GPU x stack x precision (absolute relative error of TPOT and throughput)",
                  title_justify="left")
    for header in ("gpu", "stack", "precision", "drafter", "role", "users", "points", "median", "worst"):
        table.add_column(header, justify="right" if header in ("points", "median", "worst") else "left")
    for e in summary:
        table.add_row(e["gpu"], e["stack"], e["precision"], e["drafter"], e["role"], e["users"], str(e["points"]),
                      f"{e['median_abs_error']:.1%}", f"{e['max_abs_error']:.1%}")
    return table
