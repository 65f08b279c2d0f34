"""``simlab sweep``, ``simlab whatif`` and ``simlab report``: thin shells over :mod:`simlab.studies`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from simlab.common.outputs import command_line
from simlab.studies.labels import split_label

EXECUTOR_HELP = "Where points run: local (a process pool) or dask (a LocalCluster, or --address)."


def sweep_command(
    scenario: Path = typer.Argument(..., help="Scenario YAML file holding a sweep: block."),
    out: Optional[Path] = typer.Option(None, "--out", help="Sweep folder (default: results/<scenario name>/)."),
    executor: str = typer.Option("local", "--executor", help=EXECUTOR_HELP),
    address: Optional[str] = typer.Option(None, "--address", help="A running Dask scheduler (with --executor dask)."),
    workers: Optional[int] = typer.Option(None, "--workers", "-w", help="Parallel workers (default: CPUs)."),
    plot: bool = typer.Option(False, "--plot/--no-plot", help="Also draw each point's report.png."),
    report: bool = typer.Option(True, "--report/--no-report", help="Write report.html at the end."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress."),
) -> None:
    """Run every point of SCENARIO's sweep (a rerun skips finished points); write sweep.csv and report.html."""
    from simlab.studies.executors import check_executor_options
    from simlab.studies.progress import default_progress
    from simlab.studies.sweep import run_sweep

    check_executor_options(executor, workers=workers, address=address)
    outcome = run_sweep(scenario, out, executor=executor, workers=workers, address=address, plot=plot,
                        report=report, progress=default_progress(quiet), command=command_line())
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    done = len(outcome.sweep.points) - outcome.num_failed
    console.print(f"{done} of {len(outcome.sweep.points)} points finished ({outcome.num_skipped} from an earlier "
                  f"run); sweep.csv: {outcome.csv}" + (f"; report: {outcome.out / 'report.html'}" if report else ""))
    if outcome.num_failed:
        first = next(iter(outcome.errors.values()))
        console.print(f"error: {outcome.num_failed} point(s) failed (see the error column of sweep.csv and "
                      f"{outcome.out / 'failed'}/); the first: {first}", markup=False)
    _print_answer(outcome.out / "sweep.json")
    if outcome.num_failed:
        raise typer.Exit(1)


def _print_answer(document: Path) -> None:
    """A study's cautions on stderr and its verdict, the last line of stdout (as ``simlab plan`` does)."""
    import json

    doc = json.loads(document.read_text(encoding="utf-8"))
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    for warning in doc.get("warnings") or []:
        err.print(f"caution: {warning}", markup=False)
    Console(soft_wrap=True).print(doc["verdict"], markup=False, highlight=False)


def whatif_command(
    scenario: Path = typer.Argument(..., help="Scenario YAML file."),
    sla: str = typer.Option(..., "--sla", help="Conditions, e.g. 'p90_tpot_ms<=12.5,median_user_tok_s>=80'."),
    vary: Optional[str] = typer.Option(None, "--vary", help="The field to search, e.g. workload.concurrency."),
    at: Optional[str] = typer.Option(None, "--at", help="Instead of a search: FIELD=VALUE, one load."),
    low: Optional[float] = typer.Option(None, "--low", help="Lowest value searched."),
    high: Optional[float] = typer.Option(None, "--high", help="Highest value searched."),
    baseline: Optional[str] = typer.Option(None, "--baseline", help="Arm gains are measured against "
                                           "(default: the no-speculation arm, else the first)."),
    find: Optional[str] = typer.Option(None, "--find", help="largest or smallest meeting the SLA (known for "
                                       "concurrency, rate, time_scale and replicas)."),
    rtol: float = typer.Option(0.02, "--rtol", help="Relative tolerance for non-integer fields."),
    out: Optional[Path] = typer.Option(None, "--out", help="Folder (default: results/<scenario name>-whatif/)."),
    executor: str = typer.Option("local", "--executor", help=EXECUTOR_HELP),
    address: Optional[str] = typer.Option(None, "--address", help="A running Dask scheduler (with --executor dask)."),
    workers: Optional[int] = typer.Option(None, "--workers", "-w", help="Parallel workers (default: CPUs)."),
    report: bool = typer.Option(True, "--report/--no-report", help="Write report.html."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress and no table."),
) -> None:
    """Per arm, the largest load (or fewest replicas) meeting an SLA; with --at, who meets it at one load."""
    from simlab.studies.executors import check_executor_options
    from simlab.studies.progress import default_progress
    from simlab.studies.whatif import prepare_whatif, run_whatif

    check_executor_options(executor, workers=workers, address=address)
    question = prepare_whatif(scenario, sla=sla, vary=vary, at=at, low=_number(low), high=_number(high),
                              baseline=baseline, find=find, rtol=rtol)
    outcome = run_whatif(question, out, executor=executor, workers=workers, address=address, report=report,
                         progress=default_progress(quiet), command=command_line())
    if not quiet:
        stdout = Console()
        if not stdout.is_terminal:
            stdout = Console(width=160)
        stdout.print(answers_table(outcome.document))
        stdout.print(f"results: {outcome.out}/")
        _print_answer(outcome.out / "whatif.json")


def _number(value: Optional[float]):
    return int(value) if value is not None and float(value).is_integer() else value


def answers_table(doc: dict):
    """A rich table of a what-if's answers."""
    from rich.table import Table

    if "at" in doc:
        table = Table(title=f"at {doc['at']['field']}={doc['at']['value']}: SLA {_sla_text(doc)}",
                      title_justify="left")
        for header in ("arm", "meets", "fails", "user tok/s", "tok/s/GPU", "vs baseline"):
            table.add_column(header, justify="left" if header in ("arm", "fails") else "right")
        for arm, e in doc["arms"].items():
            table.add_row(arm, "yes" if e["meets"] else "no", ", ".join(e["failing"]) or "-",
                          _f(e["median_user_tok_s"], "{:.1f}"), _f(e["output_throughput_per_gpu"], "{:,.0f}"),
                          _f(e["gain_vs_baseline"], "{:+.1%}"))
        return table
    split = bool(doc.get("split_search"))
    title = (f"fewest replicas (prefill:decode) meeting {_sla_text(doc)}" if split
             else f"{doc['find']} {doc['vary']} meeting {_sla_text(doc)}")
    table = Table(title=f"{title} (baseline {doc['baseline']})", title_justify="left")
    varied = ("replicas", "split P:D", "GPUs") if split else (doc["vary"],)
    for header in ("arm", *varied, "user tok/s", "tok/s/GPU", "vs baseline", "probes"):
        table.add_column(header, justify="left" if header == "arm" else "right")
    for arm, e in doc["arms"].items():
        m = e["metrics"] or {}
        load = "none in range" if e["load"] is None else f"{e['load']:g}" + (" (range end)" if e["at_bound"] else "")
        if split:
            chosen = e["split"]
            load = (load, split_label(chosen) if chosen else "-",
                    _f(m.get("num_gpus"), "{}"))
        table.add_row(arm, *(load if split else (load,)), _f(m.get("median_user_tok_s"), "{:.1f}"),
                      _f(m.get("output_throughput_per_gpu"), "{:,.0f}"), _f(e["gain_vs_baseline"], "{:+.1%}"),
                      str(e["num_probes"]))
    return table


def _sla_text(doc: dict) -> str:
    return ",".join(f"{m}{op}{v:g}" for m, (op, v) in doc["sla"].items())


def _f(value, spec: str) -> str:
    return "-" if value is None else spec.format(value)


def report_command(
    folder: Path = typer.Argument(..., help="A folder written by simlab run, sweep or whatif."),
    out: Optional[Path] = typer.Option(None, "--out", help="FILE.html: the page (its PNGs go beside it; default "
                                       "FOLDER/report.html). For a run, FILE.png: only the run's figure, there."),
) -> None:
    """Write FOLDER/report.html, self-contained, for a run (redraws report.png too), a sweep, a what-if or a
    validation (redraws validation.png)."""
    from simlab.real.validate.report_html import is_validation_folder, write_validation_report
    from simlab.results.folder import load_results
    from simlab.results.table import arms_table
    from simlab.studies.report_html import folder_kind, write_report

    if is_validation_folder(folder) and out is None:  # simlab validate's folder: real against simulated
        Console().print(f"report: {write_validation_report(folder)}")
        return
    kind = folder_kind(folder)
    if kind == "run" and out is not None and out.suffix.lower() not in (".html", ".htm"):
        target = _run_figure(folder, out)
        shown = f"figure: {target}"
    else:
        shown = f"report: {write_report(folder, out)}"
    if kind == "run":
        summary, _, _ = load_results(folder)
        Console(width=160).print(arms_table(summary["scenario"]["name"], summary["arms"]))
    Console().print(shown)


def _run_figure(folder: Path, out: Path) -> Path:
    """A run's report figure alone, at ``out`` (what ``simlab report DIR --out FILE.png`` always did)."""
    from simlab.common.outputs import check_out_file, write_file_atomic
    from simlab.results.figure import render_png
    from simlab.results.folder import RESULT_FILES, check_results_folder, load_results

    check_results_folder(folder)
    check_out_file(out, inputs=[folder / name for name in RESULT_FILES])
    summary, requests, steps = load_results(folder)
    write_file_atomic(out, render_png(summary, requests, steps))
    return out


def plan_command(
    plan_file: Path = typer.Argument(..., help="Plan YAML: a scenario with model, candidate arms and plan:."),
    out: Optional[Path] = typer.Option(None, "--out", help="Plan folder (default: results/<name>-plan/); the "
                                       "same folder resumes."),
    executor: str = typer.Option("local", "--executor", help=EXECUTOR_HELP),
    address: Optional[str] = typer.Option(None, "--address", help="A running Dask scheduler (with --executor dask)."),
    workers: Optional[int] = typer.Option(None, "--workers", "-w", help="Parallel workers (default: CPUs)."),
    budget_s: Optional[float] = typer.Option(None, "--budget-s", help="Stop after this many seconds with the best "
                                             "so far (marked incomplete)."),
    report: bool = typer.Option(True, "--report/--no-report", help="Write report.html."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress and no table."),
    prefer: Optional[str] = typer.Option(None, "--prefer", help="The tie-break at equal cost: simplest (no "
                                         "speculation and fewer moving parts first, then the most SLA headroom; "
                                         "the default) or fastest (the faster median user first); replaces the "
                                         "plan's prefer:."),
) -> None:
    """The cheapest deployment (GPU, stack, precision, layout, replicas or P:D split, arm) meeting the plan's SLA."""
    from simlab.studies.executors import check_executor_options
    from simlab.studies.plan import run_plan
    from simlab.studies.progress import default_progress

    check_executor_options(executor, workers=workers, address=address)
    outcome = run_plan(plan_file, out, executor=executor, workers=workers, address=address, budget_s=budget_s,
                       report=report, progress=default_progress(quiet), command=command_line(), prefer=prefer)
    doc = outcome.document
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    if not quiet:
        stdout = Console()
        if not stdout.is_terminal:
            stdout = Console(width=160)
        stdout.print(plan_table(doc))
        stdout.print(f"results: {outcome.out}/")
        from simlab.studies.plan_verdict import plan_warnings

        for warning in plan_warnings(doc):
            err.print(f"caution: {warning}", markup=False)
        stdout.print(doc["verdict"], markup=False, highlight=False)
        launch = [outcome.out / f"launch_{engine}.sh" for engine in ("vllm", "sglang")]
        if doc["best"] is not None and all(path.is_file() for path in launch):
            stdout.print("launch files: " + ", ".join(str(path) for path in launch), markup=False, highlight=False)
    if not doc["complete"]:
        err.print("warning: the time budget ran out: the answer is the best found so far (plan.json: complete "
                  "false)", markup=False)
    if doc["best"] is None:
        near = doc.get("closest")
        text = ("no deployment within plan.max_gpus meets the SLA" +
                (f"; closest: {_deployment_line(near)}, which misses {'; '.join(near['failing'])}" if near else ""))
        err.print(f"warning: {text}", markup=False)


def _deployment_line(d: dict) -> str:
    from simlab.studies.labels import gpus_label
    from simlab.studies.plan_report import deployment_layout

    return f"{deployment_layout(d)} ({gpus_label(d)}, ${d['usd_per_hour']:,.2f}/h)"


def plan_table(doc: dict):
    """A rich table of each arm's cheapest deployment and the chosen one."""
    from rich.table import Table

    from simlab.studies.plan_report import deployment_layout

    table = Table(title=f"cheapest deployment per arm meeting {_sla_text(doc)} ({doc['objective']})",
                  title_justify="left")
    for header in ("arm", "deployment", "GPUs", "USD/h", "chosen"):
        table.add_column(header, justify="left" if header in ("arm", "deployment") else "right")
    best = doc["best"]
    for arm, d in doc["best_by_arm"].items():
        if d is None:
            table.add_row(arm, "none within max_gpus", "-", "-", "")
            continue
        chosen = best is not None and best["arm"] == arm
        table.add_row(arm, deployment_layout(d), str(d["num_gpus"]), f"{d['usd_per_hour']:,.2f}",
                      "yes" if chosen else "")
    return table
