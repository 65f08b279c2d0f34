"""The calibration's commands, mounted under ``simlab profiles`` by simlab/cli.py:

- ``simlab profiles fit MEASUREMENTS.csv --out PROFILE.yaml``: the work is :mod:`simlab.calibration.userfit` for step
  timings and :mod:`simlab.calibration.benchfit` for engine benchmark results, which are fitted on the engine's
  replay of each run (:func:`simlab.calibration.profile_check.replay_record`);
- ``simlab profiles check [NAME]``: how far the profiles can be trusted, record by record
  (:mod:`simlab.calibration.profile_check`, :mod:`simlab.calibration.gain_check`).

The fit's modules (numpy, scipy) are imported inside the commands, so that ``simlab --help`` stays fast.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
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

    from simlab.calibration.profile_check import check_records, error_table, load_records, matching_records

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

    from simlab.calibration.gain_check import check_gains, gain_summary

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


def fit_command(
    measurements: list[Path] = typer.Argument(
        ...,
        help="A CSV of step measurements (kind, batch_tokens, "
        "context_tokens, step_ms), or engine benchmark results: `vllm bench "
        "serve --save-result` JSON and SGLang `bench_serving` JSONL files "
        "(docs/calibration.md, 'Fitting your own measurements').",
    ),
    out: Path = typer.Option(
        ..., "--out", "-o", help="Profile file to write (YAML); replaces only a file simlab wrote."
    ),
    name: Optional[str] = typer.Option(None, "--name", help="The profile's name (default: the output file's stem)."),
    gpu: Optional[str] = typer.Option(None, "--gpu", help="Benchmark results: the GPU they ran on."),
    model: Optional[str] = typer.Option(None, "--model", help="Benchmark results: the model they served."),
    stack: str = typer.Option("vllm", "--stack", help="Benchmark results: the engine (vllm, sglang, trtllm, eager)."),
    precision: str = typer.Option("bf16", "--precision", help="Benchmark results: weights (bf16, fp8, fp4)."),
    kv_precision: str = typer.Option("bf16", "--kv-precision", help="Benchmark results: the KV cache (bf16, fp8)."),
    max_num_seqs: int = typer.Option(1024, "--max-num-seqs", min=1, help="Benchmark results: the server's limit."),
    max_batch_tokens: int = typer.Option(
        8192, "--max-batch-tokens", min=1, help="Benchmark results: the server's token budget per step."
    ),
    tensor_parallel: int = typer.Option(
        1, "--tensor-parallel", "--tp", min=1, help="Benchmark results: the server's tensor-parallel size."
    ),
    expert_parallel: int = typer.Option(
        1,
        "--expert-parallel",
        "--ep",
        min=1,
        help="Benchmark results: a mixture of experts' expert-parallel size (above --tp: data-parallel attention).",
    ),
    draft: Optional[list[str]] = typer.Option(
        None,
        "--draft",
        help="Benchmark results: the drafter of the "
        "speculative runs, METHOD:K (e.g. eagle3:3), or FILE=METHOD:K for one "
        "file's; repeat for several.",
    ),
) -> None:
    """Fit your measurements and write a table profile with the residual stated: step timings with the calibrated
    roofline's smooth knee, or engine benchmark runs as a serving stack on the roofline of --gpu and --model
    (fitted on simlab's engine replaying each run, seconds per run)."""
    from simlab.common.errors import InputError
    from simlab.common.outputs import check_out_file, write_file_atomic
    from simlab.hardware.export import table_text

    command = "simlab " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    check_out_file(out, inputs=list(measurements))
    if all(p.suffix.lower() == ".csv" for p in measurements):
        from simlab.calibration.userfit import GENERATOR, fit_profile, read_measurements

        if len(measurements) != 1:
            raise InputError("give one CSV of step measurements", field="MEASUREMENTS",
                             value=", ".join(map(str, measurements)), valid="one CSV file")
        data = fit_profile(read_measurements(measurements[0]), name=name or out.stem, command=command)
        write_file_atomic(out, table_text(data, written_by=GENERATOR))
        verify = data["provenance"]["residuals"][0]
        typer.echo(f"wrote {out}: verify fitted to {verify['points']} rows, residual median "
                   f"{verify['median_abs_rel_error']:.1%}, max {verify['max_abs_rel_error']:.1%} "
                   "(all curves' residuals are in its provenance)")
        return
    from simlab.calibration.benchfit import GENERATOR, fit_bench, parse_drafts

    for option, value in (("--gpu", gpu), ("--model", model)):
        if value is None:
            raise InputError("benchmark results need the GPU and model they ran on", field=option,
                             valid=f"{option} NAME (see `simlab profiles list`)")
    from simlab.hardware.precision import KV_PRECISIONS, PRECISIONS
    from simlab.hardware.stacks import STACKS

    _check_choice("--stack", stack, tuple(STACKS))
    _check_choice("--precision", precision, PRECISIONS)
    _check_choice("--kv-precision", kv_precision, KV_PRECISIONS)
    drafts = parse_drafts(list(draft or []), list(measurements))
    from rich.console import Console

    try:
        with Console(stderr=True).status(f"fitting on the engine's replay of the runs of {len(measurements)} "
                                         "file(s) ..."):
            data = fit_bench(list(measurements), gpu=gpu, model=model, stack=stack, precision=precision,
                             kv_precision=kv_precision, max_num_seqs=max_num_seqs,
                             max_batch_tokens=max_batch_tokens, name=name or out.stem, command=command,
                             tensor_parallel=tensor_parallel, expert_parallel=expert_parallel, drafts=drafts)
    except InputError as err:  # the roofline's fields are this command's options
        if err.file is None and err.field in ("gpu", "model", "precision", "tensor_parallel", "expert_parallel"):
            raise InputError(err.problem, field="--" + err.field.replace("_", "-"), value=err.value,
                             valid=err.valid.replace("tensor_parallel ", "--tensor-parallel ").replace(
                                 "expert_parallel ", "--expert-parallel ") if err.valid else None) from None
        raise
    write_file_atomic(out, table_text(data, written_by=GENERATOR))
    fit = data["provenance"]["fit"]
    fitted = ", ".join(f"{k} {v:.4g} ± {fit['standard_errors'][k]:.2g}" for k, v in fit["fitted"].items())
    runs = f"{fit['runs']} runs" + (f" ({fit['speculative_runs']} speculative)" if fit["speculative_runs"] else "")
    typer.echo(f"wrote {out}: {runs} fitted ({fitted}); residual median {fit['residual_median_abs']:.1%}, "
               f"max {fit['residual_max_abs']:.1%} on the fitted roofline, median "
               f"{fit['profile_residual_median_abs']:.1%}, max {fit['profile_residual_max_abs']:.1%} on the profile's "
               "table (every run's residual is in its provenance)")


def _check_choice(option: str, value: str, valid: tuple[str, ...]) -> None:
    from simlab.common.errors import InputError

    if value not in valid:
        raise InputError("not one of the choices", field=option, value=value, valid=", ".join(valid))
