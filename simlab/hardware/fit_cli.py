"""``simlab profiles fit MEASUREMENTS.csv --out PROFILE.yaml`` (mounted on ``simlab profiles``)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Optional

import typer

# the fit's modules (numpy, scipy) are imported inside the command, so that `simlab --help` stays fast


def fit_command(
    measurements: Path = typer.Argument(..., help="CSV of measurements: kind (optional), batch_tokens, "
                                        "context_tokens, step_ms (docs/hardware.md, 'Fitting your own measurements')."),
    out: Path = typer.Option(..., "--out", "-o", help="Profile file to write (YAML); replaces only a file simlab wrote."),
    name: Optional[str] = typer.Option(None, "--name", help="The profile's name (default: the output file's stem)."),
) -> None:
    """Fit your benchmark numbers with the calibrated roofline's smooth knee and write a table profile."""
    from simlab.common.outputs import check_out_file, write_file_atomic
    from simlab.hardware.export import table_text
    from simlab.hardware.userfit import GENERATOR, fit_profile, read_measurements

    check_out_file(out, inputs=[measurements])
    data = fit_profile(read_measurements(measurements), name=name or out.stem,
                       command="simlab " + " ".join(shlex.quote(a) for a in sys.argv[1:]))
    write_file_atomic(out, table_text(data, written_by=GENERATOR))
    verify = data["provenance"]["residuals"][0]
    typer.echo(f"wrote {out}: verify fitted to {verify['points']} rows, residual median "
               f"{verify['median_abs_rel_error']:.1%}, max {verify['max_abs_rel_error']:.1%} "
               "(all curves' residuals are in its provenance)")
