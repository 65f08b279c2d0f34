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
    gains: bool = typer.Option(True, "--gains/--no-gains",
                               help="Also every pair of runs with and without speculation: the gain, measured "
                                    "against simulated (without NAME only)."),
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
    if gains and name is None:
        throughputs = {row.record.id: row.simulated for row in rows if row.metric == "output_throughput_tok_s"}
        _print_gains(console, quiet, throughputs)


def _print_gains(console, quiet: bool, simulated: dict) -> None:
    """Speculation's gain on every pair of runs with and without it: measured, simulated, error, sign."""
    from rich.table import Table

    from simlab.studies.gain_check import check_gains, gain_summary

    with console.status("simulating the runs with and without speculation ..."):
        rows = check_gains(simulated=simulated)  # the runs simulated above are not simulated again
    if not quiet:
        table = Table(title="Speculation's gain (output throughput with ÷ without): measured against simulated",
                      title_justify="left")
        for header in ("pair", "gpu", "stack", "model", "drafter", "users", "measured", "simulated", "error",
                       "sign", "role", "assumed"):
            table.add_column(header, justify="left" if header in ("pair", "drafter", "role", "assumed") else "right")
        for row in rows:
            r = row.spec
            shape = (f"{r.spec_method} tree {r.num_draft_tokens}/{r.tree_topk}/{r.tree_num_draft_tokens}"
                     if getattr(r, "tree_topk", None) else f"{r.spec_method} γ={r.num_draft_tokens}")
            sign = "agrees" if row.signs_agree else ("differs" if row.sign_matters else "(within 10 %)")
            table.add_row(row.pair[:48], r.gpu, r.engine, r.model, f"{shape} τ={r.acceptance_length:g}",
                          str(r.concurrency), f"{row.measured:.2f}", f"{row.simulated:.2f}", f"{row.error:+.1%}",
                          sign, row.role, getattr(r, "assumed", ""))
        console.print(table)
    summary = Table(title="Gain error per users band (|simulated gain / measured gain - 1|; signs counted where the "
                          "measured gain is below 0.9 or above 1.1)", title_justify="left")
    for header in ("role", "target", "users", "pairs", "median", "worst", "signs agree"):
        summary.add_column(header, justify="left" if header in ("role", "target", "users") else "right")
    for e in gain_summary(rows):
        summary.add_row(e["role"], e["target"], e["users"], str(e["pairs"]), f"{e['median_abs_error']:.1%}",
                        f"{e['max_abs_error']:.1%}", f"{e['signs_agree']} of {e['signs_clear']}")
    console.print(summary)


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
        table.add_row(
            r.source,
            r.gpu,
            r.engine,
            f"{r.precision}/{r.kv_precision}",
            r.model,
            drafter,
            str(r.concurrency),
            f"{r.input_tokens}/{r.output_tokens}",
            "TPOT ms" if row.metric == "mean_tpot_ms" else "tok/s",
            f"{row.measured:,.2f}",
            f"{row.simulated:,.2f}",
            f"{row.error:+.1%}",
            row.role,
        )
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
