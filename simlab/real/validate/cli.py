"""``simlab validate SCENARIO``: the scenario's workload and arms through the real engine and the simulator, with
the simulator's inputs fitted from the real run; writes ``validation.json`` and the real run's results folder.
torch is imported inside the command only."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from simlab.common.outputs import command_line


def validate_command(
    scenario: Path = typer.Argument(..., help="Scenario YAML file (its hardware and acceptance are replaced by "
                                              "what the real run measures)."),
    pair: Optional[Path] = typer.Option(None, "--pair", help="Pair folder (default: the shipped pair)."),
    device: str = typer.Option("cpu", "--device", help="cpu or cuda."),
    out: Optional[Path] = typer.Option(None, "--out", help="Validation folder (default: results/<scenario "
                                                           "name>-validation/)."),
    temperature: float = typer.Option(1.0, "--temperature", min=0.0, help="Sampling temperature of the real runs."),
    threads: Optional[int] = typer.Option(1, "--threads", min=1, help="torch CPU threads (1 suits a shared CPU)."),
    profile: Optional[Path] = typer.Option(None, "--profile", help="A kind: table profile to time the simulation "
                                           "and drive the schedulers, instead of the curves fitted from the run."),
    simulated_seeds: int = typer.Option(4, "--simulated-seeds", min=1, max=64, help="Acceptance seeds the "
                                        "simulation averages."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Override the scenario's seed."),
    check: bool = typer.Option(False, "--check", help="Exit 1 when a bounded error exceeds its test bound (the "
                                                      "target, or what the run's sample size can resolve)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress lines and no table."),
) -> None:
    """Run SCENARIO's workload and arms on the real engine, fit the acceptance model and the cost curves from that
    run, simulate the held-out part, and report real against simulated per arm (validation.json)."""
    from rich.console import Console

    from simlab.common.errors import InputError
    from simlab.common.outputs import check_out_dir
    from simlab.config.loading import load_scenario
    from simlab.real.validate.compare import failures
    from simlab.real.validate.run import ValidateSettings, validate

    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise InputError("unknown device", field="--device", value=device, valid="cpu or cuda")
    loaded = load_scenario(scenario, seed=seed)
    out_dir = out if out is not None else Path("results") / f"{loaded.scenario.name}-validation"
    inputs = [loaded.file] + [p for p in (pair, profile) if p is not None]
    check_out_dir(out_dir, kind="validate", inputs=inputs)
    if profile is not None and not profile.is_file():
        raise InputError("no such profile", field="--profile", value=str(profile), valid="a kind: table YAML file")
    err = Console(stderr=True, highlight=False)
    settings = ValidateSettings(pair=pair, device=device, temperature=temperature, threads=threads, profile=profile,
                                simulated_seeds=simulated_seeds)
    document = validate(loaded, out_dir, settings, command=command_line(),
                        log=(lambda line: None) if quiet else (lambda line: err.print(line, markup=False)))
    if not quiet:
        Console(width=160).print(validation_table(document))
        Console().print(f"validation: {out_dir}/", highlight=False)
    if not quiet:
        missed = failures(document, against="target")
        if missed:
            err.print("beyond the 5 % target: " + "; ".join(missed), markup=False)
    problems = failures(document)
    if problems and not quiet:
        err.print("beyond the test bounds: " + "; ".join(problems), markup=False)
    if check and problems:
        raise typer.Exit(1)


def validation_table(document: dict):
    """A rich table: one row per arm, real / simulated / error for the bounded metrics."""
    from rich.table import Table

    from simlab.real.validate.compare import BOUNDED

    table = Table(title=f"{document['scenario']['name']}: real against simulated", title_justify="left")
    table.add_column("arm", no_wrap=True)
    names = {"output_throughput": "tok/s", "mean_tpot_ms": "TPOT mean ms", "spec_decode_acceptance_length": "τ"}
    for key in BOUNDED:
        table.add_column(f"{names.get(key, key)}\nreal / sim", justify="right")
        table.add_column("error\n(noise)", justify="right")
    for arm, part in document["arms"].items():
        row = [arm]
        for key in BOUNDED:
            real, sim, err = part["real"].get(key), part["simulated"].get(key), part["error"].get(key)
            row.append("-" if real is None or sim is None else f"{real:,.2f} / {sim:,.2f}")
            row.append("-" if err is None else f"{err:+.1%} ({part['noise'][key]:.1%})")
        table.add_row(*row)
    table.caption = "error: (simulated - real) / real; noise: its standard error from the runs' sample sizes"
    return table


__all__ = ["validate_command", "validation_table"]
