"""The ``simlab`` command line. Input errors exit with status 2 and one message; other failures with 1."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from simlab.common.errors import InputError, OutputError
from simlab.common.outputs import command_line

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="simlab: simulate and measure LLM serving with parallel-draft speculative decoding.",
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        from simlab.common.version import __version__

        typer.echo(f"simlab {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                 help="Print simlab's version and exit."),
) -> None:
    """simlab: simulate and measure LLM serving with parallel-draft speculative decoding."""


@app.command()
def run(
    scenario: Path = typer.Argument(..., help="Scenario YAML file."),
    out: Optional[Path] = typer.Option(None, "--out", help="Results folder (default: results/<scenario name>/)."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Override the scenario's seed."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1, help="Arms simulated in parallel (default: CPUs)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar and no table."),
    plot: bool = typer.Option(True, "--plot/--no-plot", help="Also write report.png into the results folder."),
) -> None:
    """Simulate every arm of SCENARIO, print a comparison table and write the results folder."""
    from simlab.common.outputs import check_out_dir
    from simlab.config.loading import load_scenario
    from simlab.progress import run_progress
    from simlab.results.table import arms_table
    from simlab.runner import default_jobs, run_scenario

    loaded = load_scenario(scenario, seed=seed)
    out_dir = out if out is not None else Path("results") / loaded.scenario.name
    check_out_dir(out_dir, kind="run", inputs=[loaded.file])
    with run_progress(quiet) as progress:
        results = run_scenario(loaded, out_dir, jobs=jobs or default_jobs(), plot=plot, progress=progress,
                               command=command_line())
    if not quiet:
        stdout = Console()
        if not stdout.is_terminal:
            stdout = Console(width=160)
        total = int(next(iter(results.arms.values()))["completed"])
        stdout.print(arms_table(f"{loaded.scenario.name}: {total} requests", results.arms))
        stdout.print(f"results: {out_dir}/")
    print_warnings(results.arms)


def print_warnings(arms: dict) -> None:
    """Each arm's overload warnings on stderr, one line each (also in summary.json; see docs/metrics.md)."""
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    for name, metrics in arms.items():
        for warning in metrics.get("warnings") or ():
            console.print(f"warning: {name}: {warning}", markup=False)


_MOUNTED: list[bool] = []


def _mount_subcommands() -> None:
    if _MOUNTED:
        return
    _MOUNTED.append(True)
    from simlab.acceptance.cli import acceptance_app, calibrate_command
    from simlab.audit.cli import audit_command
    from simlab.hardware.cli import profiles_app
    from simlab.real.cli import real_app
    from simlab.real.profiler.cli import profile_command
    from simlab.real.validate.cli import validate_command
    from simlab.calibration.cli import fit_command, profiles_check_command
    from simlab.studies.cli import plan_command, report_command, sweep_command, whatif_command
    from simlab.workload.cli import traces_app

    app.command("audit")(audit_command)
    app.command("sweep")(sweep_command)
    app.command("whatif")(whatif_command)
    app.command("plan")(plan_command)
    app.command("report")(report_command)
    app.add_typer(acceptance_app, name="acceptance", help="Fit acceptance models from real engines' logs.")
    app.command("calibrate")(calibrate_command)
    app.command("profile")(profile_command)
    app.command("validate")(validate_command)
    profiles_app.command("fit")(fit_command)
    profiles_app.command("check")(profiles_check_command)
    from simlab.hardware.model_cli import model_command

    profiles_app.command("model")(model_command)
    app.add_typer(profiles_app, name="profiles", help="List, export, fit and check hardware cost profiles.")
    app.add_typer(traces_app, name="traces", help="List and describe the shipped request traces.")
    app.add_typer(
        real_app, name="real", help="Real mode: train, generate with and evaluate a small pair (needs torch)."
    )


def main() -> None:
    """Entry point of the ``simlab`` console script."""
    try:
        _mount_subcommands()
        status = app(standalone_mode=False)
        if isinstance(status, int) and status:  # a command ended with typer.Exit(code)
            sys.exit(status)
    except InputError as err:
        Console(stderr=True, highlight=False, soft_wrap=True).print(f"error: {err.message}", markup=False)
        sys.exit(2)
    except OutputError as err:
        Console(stderr=True, highlight=False, soft_wrap=True).print(f"error: {err.message}", markup=False)
        sys.exit(1)
    except (typer.Abort, KeyboardInterrupt):
        Console(stderr=True).print("aborted")
        sys.exit(130)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:
        # usage errors (typer's bundled click): they print their own message and carry their exit code
        if hasattr(exc, "exit_code") and hasattr(exc, "show"):
            exc.show()
            sys.exit(exc.exit_code)
        raise


if __name__ == "__main__":  # pragma: no cover
    main()
