"""``simlab profile``: measure cost curves on this machine and write them as a simulator hardware profile.

``profile_command`` is the typer command (mounted as ``simlab profile``); ``python -m simlab.real.profiler``
runs it on its own. torch is imported inside the command only. Bad input raises :class:`InputError` (exit 2 with
one message); a run that measures nothing usable exits 1.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from simlab.common.errors import InputError, OutputError
from simlab.common.outputs import check_out_file

OPTION_ORDER = ("device", "model", "drafter", "dtype", "max_batch_tokens", "contexts", "gamma", "draft_gammas",
                "draft_context", "prefill_tokens", "replays", "warmup", "quick", "no_cuda_graphs", "threads",
                "time_budget_s", "name", "seed", "out")


def profile_command(
    out: Path = typer.Option(..., "--out", "-o", help="Profile file to write (YAML, atomically; rewritten after "
                                                      "every phase, so a stopped run leaves a partial profile)."),
    device: str = typer.Option("cpu", "--device", help="cpu, cuda or cuda:N."),
    model: str = typer.Option("pair", "--model", help="A preset (tiny, small, qwen3-4b, qwen3-8b, qwen3-14b; random "
                                                      "weights), pair (the shipped pair) or a folder: a pair or a "
                                                      "Hugging Face Qwen3 checkpoint."),
    drafter: Optional[str] = typer.Option(None, "--drafter", help="A drafter folder, or a shape such as dspark:5, "
                                                                  "dflash:5 or 5 (layers; random weights). Default: "
                                                                  "the pair's, else the preset drafter."),
    dtype: str = typer.Option("auto", "--dtype", help="auto (bfloat16 on CUDA, float32 on CPU), float32, bfloat16, "
                                                      "float16."),
    max_batch_tokens: Optional[int] = typer.Option(None, "--max-batch-tokens", help="Largest verify batch "
                                                   "(default 8192 on CUDA, 512 on CPU, 64 with --quick)."),
    contexts: Optional[str] = typer.Option(None, "--contexts", help="Verify rows: TOTAL prior-context KV tokens "
                                           "read by a step, comma-separated (default 512,2048,8192,32768 on CUDA, "
                                           "0,512,2048 on CPU)."),
    gamma: Optional[int] = typer.Option(None, "--gamma", help="Drafted positions per request: verify requests carry "
                                        "1 + gamma tokens; drafter curves use it (default: the drafter's block)."),
    draft_gammas: Optional[str] = typer.Option(None, "--draft-gammas", help="Gammas of the parallel-block sweep "
                                               "kept in provenance (default 2,4,gamma,16; gamma with --quick)."),
    draft_context: Optional[int] = typer.Option(None, "--draft-context", help="Context tokens per drafting "
                                                "request (default 1024; 32 with --quick)."),
    prefill_tokens: Optional[int] = typer.Option(None, "--prefill-tokens", help="Prefill chunk for per_token_s "
                                                 "(default min(2048, max batch tokens))."),
    replays: Optional[int] = typer.Option(None, "--replays", help="Timed runs per point, median kept (default 5)."),
    warmup: Optional[int] = typer.Option(None, "--warmup", help="Untimed runs per point first (default 2)."),
    quick: bool = typer.Option(False, "--quick", help="A small grid (tests, dry runs)."),
    no_cuda_graphs: bool = typer.Option(False, "--no-cuda-graphs", help="Time CUDA steps eagerly."),
    threads: Optional[int] = typer.Option(None, "--threads", help="torch CPU threads (default: every CPU this "
                                          "process may use)."),
    time_budget_s: Optional[float] = typer.Option(None, "--time-budget-s", help="Stop adding points when the next "
                                                  "would end past this many seconds (skipped points are listed)."),
    name: Optional[str] = typer.Option(None, "--name", help="The profile's name (default: the file's stem)."),
    seed: int = typer.Option(0, "--seed", help="Seed of random weights."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress and no summary."),
) -> None:
    """Measure verify, draft and prefill costs on this device and write a `kind: table` hardware profile."""
    options = {k: v for k, v in locals().items() if k in OPTION_ORDER}
    _check_options(options)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch starts its OpenMP pool
    try:
        import torch
    except ImportError:
        raise InputError("profiling needs torch", field="--device", value=device,
                         valid="install the real extra: pip install 'simlab[real]'") from None
    from simlab.hardware.export import write_table
    from simlab.real.profiler.models import cpu_count, load_models, resolve_device, resolve_dtype
    from simlab.real.profiler.progress import make_progress, print_summary
    from simlab.real.profiler.runner import ProfileError, Profiler, planned_points
    from simlab.real.profiler.spec import build_spec, parse_int_list
    from simlab.real.profiler.table import describe_device, table_from_result

    torch_device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, torch_device)
    context_list = parse_int_list(contexts, option="--contexts", minimum=0) if contexts else None
    gamma_list = parse_int_list(draft_gammas, option="--draft-gammas", minimum=1) if draft_gammas else None
    if torch_device.type == "cpu":
        torch.set_num_threads(threads or cpu_count())
    models = load_models(model, drafter, device=torch_device, dtype=torch_dtype, seed=seed)
    chosen_gamma = gamma or (models.drafter.config.block_size if models.drafter is not None else 7)
    spec = build_spec(
        device=str(torch_device), dtype=str(torch_dtype).replace("torch.", ""), gamma=chosen_gamma, quick=quick,
        max_batch_tokens=max_batch_tokens, contexts=context_list, draft_gammas=gamma_list,
        draft_context_per_request=draft_context, prefill_tokens=prefill_tokens, warmup=warmup, replays=replays,
        use_cuda_graphs=not no_cuda_graphs, threads=torch.get_num_threads() if torch_device.type == "cpu" else None,
        time_budget_s=time_budget_s,
    )
    device_info = describe_device(torch_device, threads)
    command = canonical_command(options)
    profile_name = name or out.stem

    def write(result) -> None:
        write_table(out, table_from_result(result, models, name=profile_name, command=command,
                                           device_info=device_info), written_by="simlab profile")

    total = planned_points(spec, drafter=models.drafter is not None,
                           markov_head=models.drafter is not None and models.drafter.markov_in is not None)
    progress = make_progress(total, quiet=quiet)
    progress.message(f"profiling {models.target_source} + {models.drafter_source} on {device_info['name']} "
                     f"({spec.dtype}, {total} points)")
    try:
        with progress:
            result = Profiler(models, spec, progress=progress, on_partial=write).run()
    except ProfileError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1)
    write(result)
    if not quiet:
        print_summary(result, out)


def canonical_command(options: dict[str, Any]) -> str:
    """``simlab profile`` with the options given (defaults left out), for provenance."""
    parts = ["simlab", "profile"]
    for key in OPTION_ORDER:
        value = options.get(key)
        flag = "--" + key.replace("_", "-")
        if key in ("quick", "no_cuda_graphs"):
            if value:
                parts.append(flag)
        elif value is not None and not (key == "seed" and value == 0):
            parts += [flag, str(value)]
    return " ".join(shlex.quote(p) for p in parts)


def _check_options(options: dict[str, Any]) -> None:
    """Range checks, each an InputError naming its option."""
    minimums = {"max_batch_tokens": 1, "gamma": 1, "draft_context": 0, "prefill_tokens": 1, "replays": 1,
                "warmup": 0, "threads": 1}
    for key, minimum in minimums.items():
        value = options.get(key)
        if value is not None and value < minimum:
            raise InputError(f"must be at least {minimum}", field="--" + key.replace("_", "-"), value=value,
                             valid=f"an integer >= {minimum}")
    if options.get("gamma") is not None and options["gamma"] > 64:
        raise InputError("too large", field="--gamma", value=options["gamma"], valid="1 .. 64")
    budget = options.get("time_budget_s")
    if budget is not None and budget <= 0:
        raise InputError("must be positive", field="--time-budget-s", value=budget, valid="seconds > 0")
    out: Path = options["out"]
    if out.is_dir():
        raise InputError("is a folder", field="--out", value=str(out),
                         valid="a file path such as hw_profiles/mine.yaml")
    if out.suffix not in (".yaml", ".yml"):
        raise InputError("a profile is a YAML file", field="--out", value=str(out), valid="a path ending in .yaml")
    check_out_file(out)


def main(argv: Optional[list[str]] = None) -> int:
    """Run ``profile_command`` as a program: exit 2 with one line for bad input, 1 for other failures."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(profile_command)
    try:
        app(args=argv if argv is not None else sys.argv[1:], prog_name="simlab profile", standalone_mode=False)
    except InputError as error:
        print(f"error: {error.message}", file=sys.stderr)
        return 2
    except OutputError as error:
        print(f"error: {error.message}", file=sys.stderr)
        return 1
    except typer.Exit as done:
        return done.exit_code
    except KeyboardInterrupt:
        print("aborted", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001 - usage errors (typer's click) carry their own exit code
        if hasattr(error, "show") and isinstance(getattr(error, "exit_code", None), int):
            error.show()
            return error.exit_code
        raise
    return 0


__all__ = ["canonical_command", "main", "profile_command"]

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
