"""``simlab profiles fit MEASUREMENTS.csv --out PROFILE.yaml`` (mounted on ``simlab profiles`` by simlab/cli.py; the
work is :mod:`simlab.hardware.userfit` for step timings and :mod:`simlab.hardware.benchfit` for engine benchmark
results, which are fitted on the engine's replay of each run, :func:`simlab.studies.profile_check.replay_record`)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Optional

import typer

# the fit's modules (numpy, scipy) are imported inside the command, so that `simlab --help` stays fast


def fit_command(
    measurements: list[Path] = typer.Argument(
        ...,
        help="A CSV of step measurements (kind, batch_tokens, "
        "context_tokens, step_ms), or engine benchmark results: `vllm bench "
        "serve --save-result` JSON and SGLang `bench_serving` JSONL files "
        "(docs/hardware.md, 'Fitting your own measurements').",
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
        from simlab.hardware.userfit import GENERATOR, fit_profile, read_measurements

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
    from simlab.hardware.benchfit import GENERATOR, fit_bench, parse_drafts
    from simlab.studies.profile_check import replay_record

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
                             tensor_parallel=tensor_parallel, expert_parallel=expert_parallel, drafts=drafts,
                             replay=replay_record)
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
