"""``simlab acceptance fit`` and ``simlab calibrate``: acceptance models and STS temperatures from real logs."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

import typer
from rich.console import Console
from rich.table import Table

from simlab.common.outputs import command_line

acceptance_app = typer.Typer(no_args_is_help=True, add_completion=False,
                             help="Fit acceptance models from real engines' logs.")

FORMAT_HELP = "Log format: simlab, vllm-metrics, deepspec, sglang-sts, specdecode-bench or csv."


def _progress_printer(console: Console, quiet: bool, what: str) -> tuple[Callable[[int, float], None], Callable]:
    """A progress callback (status line on a terminal, a plain line every 10 evaluations otherwise) and a stop."""
    if quiet:
        return (lambda n, value: None), (lambda: None)
    if console.is_terminal:
        status = console.status(f"{what}: starting")
        status.start()
        return (lambda n, value: status.update(f"{what}: evaluation {n}, -log-likelihood per round {value:.6f}")), \
            status.stop

    def plain(n: int, value: float) -> None:
        if n == 1 or n % 10 == 0:
            console.print(f"{what}: evaluation {n}, -log-likelihood per round {value:.6f}", highlight=False)

    return plain, (lambda: None)


@acceptance_app.command("fit")
def fit_command(
    logs: list[Path] = typer.Argument(..., help="Log files or folders (one format)."),
    format: str = typer.Option(..., "--format", "-f", help=FORMAT_HELP),
    out: Path = typer.Option(..., "--out", help="Acceptance file to write (YAML)."),
    method: Optional[list[str]] = typer.Option(
        None,
        "--method",
        help="simlab drafter method for the log's drafter: "
        "NAME, or LABEL=NAME per drafter label (mtp, eagle3, dflash, dspark).",
    ),
    domain_map: Optional[list[str]] = typer.Option(
        None,
        "--domain-map",
        help="Rename domains: LABEL=DOMAIN (e.g. gsm8k=math); several allowed, or comma-separated.",
    ),
    gamma: Optional[int] = typer.Option(
        None,
        "--gamma",
        min=1,
        max=16,
        help="specdecode-bench: draft length to "
        "replay (default 16); csv: verify length when the file has no verified column.",
    ),
    proposer: Optional[str] = typer.Option(None, "--proposer", help="specdecode-bench: which acc_<proposer>."),
    model: Optional[str] = typer.Option(None, "--model", help="vllm-metrics: the model_name label to read."),
    arm: Optional[list[str]] = typer.Option(None, "--arm", help="simlab: only these arms (default: all)."),
    heterogeneity: bool = typer.Option(
        True, "--heterogeneity/--no-heterogeneity", help="Fit the latent model where the log has per-round detail."
    ),
    max_requests: Optional[int] = typer.Option(
        None,
        "--max-requests",
        min=1,
        help="Fit the latent model on at most this many requests, drawn at random (bounds the time).",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the --max-requests draw."),
    tree: Optional[str] = typer.Option(
        None,
        "--tree",
        help="The log is of a draft tree: TOPK,NUM_DRAFT_TOKENS "
        "(with --gamma its depth); fits the chain behind it (docs/acceptance.md §8).",
    ),
    fit_catch: bool = typer.Option(
        False,
        "--fit-catch",
        help="--tree: fit the rank model's catch too (weakly identified by one tree; default: the tree calibration's).",
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress and no table."),
) -> None:
    """Fit a kind: positional acceptance model (conditional rates per method x domain, and, where the log allows,
    request/step heterogeneity and the confidence head's error) and write it as YAML for acceptance: PATH. With
    --tree, the log's rounds are of a draft tree and the chain acceptance behind it is fitted."""
    from simlab.acceptance.fitting.document import fitted_document, fitted_yaml
    from simlab.acceptance.fitting.fit import fit_log, parse_mapping, relabel
    from simlab.acceptance.logs import read_logs
    from simlab.common.outputs import check_out_file, write_file_atomic
    from simlab.config.acceptance import PositionalAcceptance

    check_out_file(out, inputs=logs)
    shape = None
    if tree is not None:
        from simlab.acceptance.fitting.tree_rounds import parse_tree

        shape = parse_tree(tree, gamma)
    log = read_logs(logs, format, gamma=gamma, proposer=proposer, model=model, arms=arm)
    log = relabel(log, parse_mapping(method, flag="--method"), parse_mapping(domain_map, flag="--domain-map"))
    if shape is not None:
        _fit_tree(log, shape, fit_catch, out, quiet)
        return
    console = Console(stderr=True)
    progress, stop = _progress_printer(console, quiet, "fitting the latent model")
    try:
        fitted = fit_log(log, heterogeneity=heterogeneity, max_requests=max_requests, seed=seed, progress=progress)
    finally:
        stop()
    command = command_line()
    doc = fitted_document(fitted, log, command=command)
    PositionalAcceptance.model_validate(doc)  # what is written must load as a scenario's acceptance
    write_file_atomic(out, fitted_yaml(doc, command=command))
    if not quiet:
        _print_fit(fitted)
        Console().print(f"acceptance: {out}", highlight=False)


def _fit_tree(log, shape, fit_catch: bool, out: Path, quiet: bool) -> None:
    """``--tree``: the chain behind a tree's rounds, written as a positional acceptance."""
    from simlab.acceptance.fitting.document import fitted_yaml
    from simlab.acceptance.fitting.tree_rounds import fit_tree_log, tree_document
    from simlab.common.outputs import write_file_atomic
    from simlab.config.acceptance import PositionalAcceptance

    fits = fit_tree_log(log, shape, fit_catch=fit_catch)
    command = command_line()
    doc = tree_document(fits, shape, log, command)
    PositionalAcceptance.model_validate(doc)
    write_file_atomic(out, fitted_yaml(doc, command=command))
    if quiet:
        return
    table = Table(title=f"chain behind the tree (topk {shape.topk}, {shape.num_draft_tokens} draft tokens, depth "
                        f"{shape.depth})")
    for column in ("method", "domain", "rounds", "catch", "alpha per depth (± s.e.)", "tokens/round measured",
                   "fitted"):
        table.add_column(column)
    for (method, domain), f in fits.items():
        alpha = ", ".join(f"{a:.3f}±{e:.3f}" for a, e in zip(f.alpha, f.alpha_se))
        table.add_row(method, domain, str(f.num_rounds), f"{f.catch:.3f}" + (" (fitted)" if f.catch_fitted else ""),
                      alpha, f"{f.measured_tokens_per_round:.3f}", f"{f.fitted_tokens_per_round:.3f}")
    Console().print(table)
    Console().print(f"acceptance: {out}", highlight=False)


def _print_fit(fitted) -> None:
    from simlab.acceptance.fitting.rates import wilson_interval

    console = Console() if Console().is_terminal else Console(width=160)
    table = Table(title="conditional acceptance per position: measured [95 % interval] (n)")
    table.add_column("method")
    table.add_column("domain")
    table.add_column("measured")
    table.add_column("curve written")
    for (method, domain), counts in sorted(fitted.counts.items()):
        low, high = wilson_interval(counts.accepted, counts.reached)
        cells = []
        for k, rate in enumerate(counts.rates):
            if counts.kind == "rates":
                cells.append(f"{rate:.3f}")
            else:
                cells.append(f"{rate:.3f} [{low[k]:.3f}, {high[k]:.3f}] ({int(round(counts.reached[k]))})")
        table.add_row(method, domain, "\n".join(cells), " ".join(f"{x:.3f}" for x in fitted.curves[method][domain]))
    console.print(table)
    if fitted.latent is not None:
        fit = fitted.latent
        params = Table(title=f"latent model: {fit.num_rounds} rounds, {fit.num_clusters} requests, "
                             f"log-likelihood {fit.loglik:.1f} ({'converged' if fit.converged else 'NOT converged'})")
        params.add_column("parameter")
        params.add_column("estimate")
        params.add_column("standard error")
        for name in fit.free:
            se = fit.shared_se[name]
            params.add_row(name, f"{fit.shared[name]:.4f}", "-" if se is None else f"{se:.4f}")
        console.print(params)
        for name, text in fitted.assumed.items():
            console.print(f"assumed {name}: {text}", highlight=False)
        if fit.at_bound:
            console.print(f"at a bound of the search (the log barely constrains them): {', '.join(fit.at_bound)}",
                          highlight=False)
        if fitted.anchored is not None:
            anchored = fitted.anchored
            bias = " ".join(f"{b:+.3f}" for b in anchored.bias_logit)
            console.print(f"curves anchored to the outcomes of {anchored.num_runs} request runs "
                          f"({anchored.num_rounds} rounds); head bias per position: {bias}", highlight=False)
    for note in fitted.notes:
        console.print(f"note: {note}", highlight=False)


def calibrate_command(
    logs: list[Path] = typer.Argument(..., help="Logs carrying the head's confidences (one format)."),
    out: Path = typer.Option(..., "--out", help="STS file to write (JSON); a reliability diagram PNG goes beside it."),
    format: str = typer.Option("sglang-sts", "--format", "-f", help="sglang-sts, simlab (rounds with conf_k) or csv "
                                                                     "(with conf_k columns)."),
    method: Optional[str] = typer.Option(None, "--method", help="Only rounds of this drafter label."),
    dataset: Optional[str] = typer.Option(None, "--dataset", help="Dataset name recorded in the JSON (default: the "
                                          "log's file or folder name)."),
    holdout: float = typer.Option(0.5, "--holdout", min=0.0, max=0.9, help="Share of rounds held out to score the "
                                  "temperatures (0: score on the rounds they were fitted on)."),
    bins: int = typer.Option(15, "--bins", min=2, max=100, help="ECE bins (equal width)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the fit/holdout split."),
    gamma: Optional[int] = typer.Option(None, "--gamma", min=1, max=16, help="csv: verify length when the file has "
                                        "no verified column."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No table."),
) -> None:
    """Sequential Temperature Scaling from logged confidences: one temperature per position, fitted left to right
    on the ECE of the cumulative product; writes SGLang-readable JSON and a reliability diagram PNG."""
    from simlab.acceptance.logs import confidence_formats, read_logs
    from simlab.acceptance.sts_file import calibrate_rounds, reliability_png, sts_json
    from simlab.common.errors import InputError
    from simlab.common.outputs import check_out_file, write_file_atomic

    if format not in confidence_formats():
        raise InputError("this format carries no confidences", field="--format", value=format,
                         valid=", ".join(confidence_formats()))
    png = out.with_suffix(".png")
    check_out_file(out, inputs=logs)
    check_out_file(png, inputs=logs, field="--out (its .png)")
    log = read_logs(logs, format, gamma=gamma)
    name = dataset or (logs[0].stem if logs[0].is_file() else logs[0].name) or "dataset"
    result = calibrate_rounds(log, method=method, holdout=holdout, num_bins=bins, seed=seed, dataset=name)
    command = command_line()
    write_file_atomic(png, reliability_png(result))
    write_file_atomic(out, sts_json(result, command=command))
    if not quiet:
        _print_calibration(result)
        Console().print(f"temperatures: {out}\nreliability diagram: {png}", highlight=False)


def _print_calibration(result) -> None:
    console = Console() if Console().is_terminal else Console(width=160)
    table = Table(title=f"STS on {result.dataset}: {result.num_fit} rounds fitted, {result.num_eval} scored")
    for column in ("position", "temperature", "ECE before", "ECE after", "AUC", "Brier before", "Brier after", "n"):
        table.add_column(column)
    for k, t in enumerate(result.temperatures):
        auc = result.auc[k]
        table.add_row(str(k + 1), f"{t:.3f}", f"{result.ece_before[k]:.4f}", f"{result.ece_after[k]:.4f}",
                      "-" if auc is None else f"{auc:.3f}", f"{result.brier_before[k]:.4f}",
                      f"{result.brier_after[k]:.4f}", str(result.num_scored[k]))
    console.print(table)
