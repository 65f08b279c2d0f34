"""``simlab real``: commands for real mode. torch is imported inside the commands only, so that
``import simlab`` and ``simlab --help`` work without it."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Optional

import typer

from simlab.common.outputs import command_line

real_app = typer.Typer(
    name="real", no_args_is_help=True,
    help="Real mode: PyTorch target + DFlash/DSpark drafter, lossless batched speculative decoding.",
)

PAIR_KIND = "pair"  # the manifest kind of a pair folder (simlab.common.outputs)


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def _prepare_torch(threads: Optional[int]) -> None:
    """Import torch (clear error without it). On a CPU shared with other processes, OpenMP threads that
    spin while waiting make every step several times slower, so they are told to sleep instead, unless the
    environment says otherwise (this only takes effect if torch was not imported before)."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import torch
    except ImportError:
        _fail("real mode needs torch: pip install 'simlab[real]'")
    if threads:
        torch.set_num_threads(threads)


def _scheduler(kind: str, threshold: Optional[float], lag_steps: Optional[int]):
    """The registry's scheduler ``kind``, given the options among ``--threshold`` and ``--lag-steps`` that its
    parameter model has (each kind's own defaults otherwise)."""
    from pydantic import ValidationError

    from simlab.schedulers import REGISTRY, kinds, make_scheduler

    if kind not in kinds(real=True):
        _fail(f"--scheduler {kind!r} is not valid; choose one of {', '.join(kinds(real=True))}")
    given = {"threshold": threshold, "lag_steps": lag_steps}
    params = {name: value for name, value in given.items()
              if value is not None and name in REGISTRY[kind].params.model_fields}
    try:
        return make_scheduler(kind, **params)
    except ValidationError as error:
        problem = error.errors()[0]
        option = "--" + str(problem["loc"][0]).replace("_", "-")
        if problem["type"] == "missing":
            _fail(f"--scheduler {kind} needs {option}")
        _fail(f"{option} {problem['input']}: {problem['msg'].lower()}")


def _load(pair_dir: Optional[Path]):
    from simlab.real.pair import load_pair

    try:
        return load_pair(pair_dir)
    except (FileNotFoundError, ValueError) as error:
        _fail(str(error))


@real_app.command()
def train(
    out: Path = typer.Option(Path("real_pair"), help="Folder for the trained pair."),
    seed: int = typer.Option(0, help="Seed of initialisation and data order."),
    minutes: float = typer.Option(9.0, min=1.0, help="Wall-clock budget of the whole command."),
    preset: str = typer.Option("small", help="Target preset (tiny or small)."),
    target_steps: Optional[int] = typer.Option(None, min=1, help="Fixed target steps instead of the time budget."),
    drafter_steps: Optional[int] = typer.Option(None, min=1, help="Fixed drafter steps instead of the time budget."),
    threads: Optional[int] = typer.Option(None, min=1, help="torch CPU threads (default: torch's choice)."),
) -> None:
    """Train a small target on the stdlib's .py sources, then a DSpark drafter, and measure tau at gamma 7."""
    from simlab.common.outputs import check_out_dir, staged_dir

    if preset not in ("tiny", "small"):
        _fail(f"--preset {preset!r}: only the CPU-trainable presets tiny and small can be trained here")
    out_dir = check_out_dir(out, kind=PAIR_KIND)
    _prepare_torch(threads)
    from simlab.real.recipe import train_pair

    command = "simlab real " + " ".join(shlex.quote(a) for a in sys.argv[sys.argv.index("train"):]) \
        if "train" in sys.argv else f"simlab real train --out {out} --seed {seed} --minutes {minutes}"
    with staged_dir(out_dir, kind=PAIR_KIND, command=command) as staging:
        metrics = train_pair(staging, seed=seed, minutes=minutes, preset=preset, target_steps=target_steps,
                             drafter_steps=drafter_steps, command=command, log=typer.echo)
    typer.echo(f"wrote {out} in {metrics['total_seconds']} s")


@real_app.command()
def generate(
    prompt: str = typer.Option("def ", help="Prompt text (byte-level tokenizer)."),
    gamma: int = typer.Option(7, min=0, max=16, help="Drafted positions per round (0: plain decoding)."),
    max_new_tokens: int = typer.Option(200, min=1),
    temperature: float = typer.Option(0.0, min=0.0),
    scheduler: str = typer.Option(
        "fixed",
        help="Verify-length scheduler: a kind of the scheduler registry that real mode runs (see docs/schedulers.md).",
    ),
    threshold: Optional[float] = typer.Option(None, help="Confidence threshold of the threshold scheduler."),
    lag_steps: Optional[int] = typer.Option(None, min=0, help="Lag of async_topk / goodput (default: the kind's)."),
    seed: int = typer.Option(0),
    pair: Optional[Path] = typer.Option(None, help="Pair folder (default: the shipped pair)."),
    threads: Optional[int] = typer.Option(None, min=1),
) -> None:
    """Generate from a prompt with speculative decoding and print the text, tau and tokens/s."""
    _prepare_torch(threads)
    from simlab.config import EngineConfig
    from simlab.real.engine import DecodingConfig, Request, SpeculativeEngine

    policy = _scheduler(scheduler, threshold, lag_steps)
    loaded = _load(pair)
    prompt_ids = tuple(loaded.tokenizer.encode_document(prompt))
    cost = None
    if policy.entry.reads_verify_cost:
        from simlab.real.profiler.verify_cost import profile_verify_cost

        cost = profile_verify_cost(loaded.target, max_num_seqs=1, max_batch_tokens=gamma + 1)
    decoding = DecodingConfig(gamma=gamma, temperature=temperature, seed=seed, eos_token_id=loaded.tokenizer.eos_id)
    limits = EngineConfig(max_num_seqs=1)
    result = SpeculativeEngine(loaded.target, loaded.drafter if gamma else None, policy, decoding, limits, cost,
                               prior_conf=loaded.prior_confidence(temperature, gamma)).run(
        [Request(id=0, prompt_ids=prompt_ids, max_new_tokens=max_new_tokens)])
    typer.echo(prompt + loaded.tokenizer.decode(result.outputs[0]))
    typer.echo(f"--- {len(result.outputs[0])} tokens, tau {result.tau:.2f}, {result.output_tokens_per_s:.0f} tok/s",
               err=True)


@real_app.command("eval")
def evaluate(
    gamma: int = typer.Option(7, min=0, max=16),
    temperature: float = typer.Option(1.0, min=0.0),
    num_prompts: int = typer.Option(32, min=1),
    prompt_len: int = typer.Option(64, min=1),
    max_new_tokens: int = typer.Option(128, min=1),
    max_num_seqs: int = typer.Option(16, min=1),
    scheduler: str = typer.Option(
        "fixed",
        help="Verify-length scheduler: a kind of the scheduler registry that real mode runs (see docs/schedulers.md).",
    ),
    threshold: Optional[float] = typer.Option(None),
    lag_steps: Optional[int] = typer.Option(None, min=0),
    seed: int = typer.Option(0),
    pair: Optional[Path] = typer.Option(None, help="Pair folder (default: the shipped pair)."),
    out: Optional[Path] = typer.Option(None, help="Write a results folder here (as `simlab run`, plus rounds.csv.gz)."),
    threads: Optional[int] = typer.Option(None, min=1),
) -> None:
    """Measure tau (bonus included) on held-out stdlib prompts; optionally write the run's results folder."""
    from simlab.common.outputs import check_out_dir

    out_dir = check_out_dir(out, kind="run") if out is not None else None  # a results folder, as simlab run's
    _prepare_torch(threads)
    from simlab.config import EngineConfig
    from simlab.real.corpus import load_corpus
    from simlab.real.engine import DecodingConfig, SpeculativeEngine
    from simlab.real.evaluate import heldout_requests

    policy = _scheduler(scheduler, threshold, lag_steps)
    loaded = _load(pair)
    cost = None
    if policy.entry.reads_verify_cost:
        from simlab.real.profiler.verify_cost import profile_verify_cost

        cost = profile_verify_cost(loaded.target, max_num_seqs=max_num_seqs,
                                   max_batch_tokens=max_num_seqs * (gamma + 1))
    corpus = load_corpus()
    requests = heldout_requests(corpus.validation, num_prompts=num_prompts, prompt_len=prompt_len,
                                max_new_tokens=max_new_tokens, seed=seed)
    decoding = DecodingConfig(gamma=gamma, temperature=temperature, seed=seed, arm=f"{scheduler}-g{gamma}")
    limits = EngineConfig(max_num_seqs=max_num_seqs)
    result = SpeculativeEngine(loaded.target, loaded.drafter if gamma else None, policy, decoding, limits,
                               cost, prior_conf=loaded.prior_confidence(temperature, gamma)).run(requests)
    decode = result.steps[result.steps["decode_requests"] > 0]
    summary = {
        "tau": result.tau, "standard_error": result.tau_standard_error, "num_rounds": result.num_rounds,
        "per_position_acceptance": [round(float(x), 4) for x in result.per_position_acceptance()],
        "mean_verify_tokens_per_step": float(decode["verify_tokens"].mean()),
        "output_tokens_per_s": result.output_tokens_per_s, "wall_s": result.wall_s,
    }
    typer.echo(json.dumps(summary, indent=2))
    if out_dir is not None:
        settings = {"gamma": gamma, "temperature": temperature, "num_prompts": num_prompts, "prompt_len": prompt_len,
                    "max_new_tokens": max_new_tokens, "max_num_seqs": max_num_seqs, "scheduler": policy.kind,
                    "seed": seed, "pair": str(pair) if pair else "shipped"}
        result.write(out_dir, scenario={"name": "real-eval", "real": settings}, command=command_line())
        typer.echo(f"wrote {out}/ (summary.json, requests.csv, steps.csv.gz, rounds.csv.gz)", err=True)


@real_app.command()
def measure(
    pair: Optional[Path] = typer.Option(None, help="Pair folder (default: the shipped pair)."),
    threads: Optional[int] = typer.Option(None, min=1),
) -> None:
    """Repeat a pair's recorded held-out measurement and rewrite its metrics.json tau section and README."""
    _prepare_torch(threads)
    from simlab.common.outputs import read_manifest
    from simlab.real.pair import default_pair_dir
    from simlab.real.recipe import remeasure_pair

    folder = pair or default_pair_dir()
    if not (folder / "metrics.json").exists():
        _fail(f"{folder} has no metrics.json to repeat")
    if (read_manifest(folder) or {}).get("kind") != PAIR_KIND:
        _fail(f"{folder}: not a pair folder simlab wrote (no manifest.json of kind {PAIR_KIND}); measure rewrites "
              "metrics.json and README.md only in folders written by `simlab real train`")
    remeasure_pair(folder, log=typer.echo)
    typer.echo(f"rewrote {folder}/metrics.json and README.md")


@real_app.command()
def info() -> None:
    """List the target presets with their parameter counts and KV bytes per token (no torch needed)."""
    from simlab.real.config import TARGET_PRESETS

    for name, config in TARGET_PRESETS.items():
        typer.echo(f"{name:10s} {config.num_parameters / 1e6:12.2f} M parameters  "
                   f"{config.num_hidden_layers:3d} layers  hidden {config.hidden_size:5d}  "
                   f"KV {config.kv_bytes_per_token()} bytes/token (bf16)")


__all__ = ["real_app"]
