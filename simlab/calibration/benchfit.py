"""``simlab profiles fit RESULT.json ... --gpu G --model M``: a serving stack fitted on the benchmark files a user
already has, written as a table profile with the residual stated.

Reads ``vllm bench serve --save-result`` JSON (one object a file) and SGLang ``bench_serving --output-file`` JSONL
(one object a line): each run gives its concurrency (``max_concurrency``, or every request at once), its mean
prompt and output lengths (``total_input_tokens`` and ``total_output_tokens`` over ``completed``), and what the
benchmark measured (``mean_tpot_ms``, ``output_throughput``). The calibrated roofline of the GPU and model is
fitted to them with the GPU's operator-level parameters fixed, as the shipped stacks are
(:mod:`simlab.calibration.stages.serving`): one parameter for every two measured values (a run gives one or two),
in the order ``step_overhead_s``, ``request_overhead_s``, ``attention_efficiency``, ``prefill_efficiency``; on the
engine's replay of each run when the caller passes one, as ``simlab profiles fit`` does
(:mod:`simlab.calibration.stages.replayed`).

A speculative run (its file states an acceptance length above 1: SGLang's ``accept_length``) also needs its drafter
and draft length, which the files do not hold: ``--draft METHOD:K`` for every speculative run, or
``--draft FILE=METHOD:K`` for one file's. With the stack's step costs fitted on the runs without speculation (or
the shipped calibration's, when there are none), the speculative runs fit the stack's host time of speculative
decoding (:mod:`simlab.calibration.stages.speculative`): ``spec_round_overhead_s``, and ``draft_forward_overhead_s``
too when the runs tell the two apart (EAGLE-3 or MTP at two draft lengths or more, and values to spare).
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

import numpy as np

from simlab.common.errors import InputError
from simlab.calibration.stages.replayed import Replay
from simlab.calibration.stages.serving import (SCALE, ServingRecord, abs_errors, fit_stack, identifiable, observations,
                                            predict)

GENERATOR = "simlab profiles fit (engine benchmark results)"
# fitted in this order, one for every two measured values (serving.identifiable)
FIT_ORDER = ("step_overhead_s", "request_overhead_s", "attention_efficiency", "prefill_efficiency")
NEEDED = ("completed", "total_input_tokens", "total_output_tokens")
SPECULATIVE_KEYS = ("accept_length", "spec_accept_length", "spec_decode_acceptance_length")


def read_runs(path: Path) -> list[dict[str, Any]]:
    """The benchmark runs in one file: a JSON object (vLLM) or JSON lines (SGLang)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot be read ({exc.strerror or exc})", file=path,
                         valid="a benchmark result file") from None
    try:
        data = json.loads(text)
        runs = data if isinstance(data, list) else [data]
    except json.JSONDecodeError:
        try:
            runs = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise InputError(f"not JSON or JSON lines (line {exc.lineno}: {exc.msg})", file=path,
                             valid="`vllm bench serve --save-result` JSON or SGLang `bench_serving --output-file` "
                                   "JSONL") from None
    for i, run in enumerate(runs):
        missing = [k for k in NEEDED if not isinstance(run, dict) or k not in run]
        if missing:
            raise InputError(f"run {i + 1} is not a serving benchmark result: it lacks {', '.join(missing)}",
                             file=path, valid="the JSON `vllm bench serve --save-result` or SGLang "
                                              "`bench_serving --output-file` writes")
    return runs


def acceptance_length(run: dict[str, Any]) -> Optional[float]:
    """A speculative run's mean tokens per round (bonus included), or None for a run without speculation."""
    for key in SPECULATIVE_KEYS:
        value = run.get(key)
        if isinstance(value, (int, float)) and value > 1.0:
            return float(value)
    return None


def parse_drafts(values: list[str], files: list[Path]) -> dict[Optional[str], tuple[str, int]]:
    """``--draft`` values: ``METHOD:K`` (every speculative run) or ``FILE=METHOD:K`` (that file's), keyed by the file
    (None for every file)."""
    from simlab.hardware.base import DRAFT_METHODS

    methods = [m for m in DRAFT_METHODS if m != "none"]
    valid = f"METHOD:K or FILE=METHOD:K, METHOD one of {', '.join(methods)} and K the draft length (e.g. eagle3:3)"
    named = {str(f) for f in files}
    drafts: dict[Optional[str], tuple[str, int]] = {}
    for value in values:
        target, _, spec = value.rpartition("=")
        method, _, length = spec.partition(":")
        if method not in methods or not length.isdigit() or int(length) < 1:
            raise InputError("not a drafter", field="--draft", value=value, valid=valid)
        if target and target not in named:
            raise InputError("names a file that is not among the results given", field="--draft", value=value,
                             valid=", ".join(sorted(named)))
        drafts[target or None] = (method, int(length))
    return drafts


def run_record(run: dict[str, Any], *, label: str, gpu: str, model: str, stack: str, precision: str,
               kv_precision: str, max_num_seqs: int, max_batch_tokens: int, tensor_parallel: int = 1,
               expert_parallel: int = 1, draft: Optional[tuple[str, int]] = None) -> ServingRecord:
    """One benchmark run as a record; a speculative run takes ``draft`` (method, draft length)."""
    completed = int(run["completed"])
    if completed <= 0:
        raise InputError("a run with no completed request", file=label, field="completed", value=completed)
    rate = run.get("request_rate")
    concurrency = run.get("max_concurrency") or completed  # every request at once without a cap
    if not run.get("max_concurrency") and rate not in (None, "inf", float("inf")) and not (
            isinstance(rate, float) and math.isinf(rate)):
        raise InputError("an open-loop run at a finite request rate without max_concurrency", file=label,
                         field="request_rate", value=rate, valid="runs with --max-concurrency, or every request at "
                                                                 "once (request rate inf)")
    tpot = run.get("mean_tpot_ms")
    throughput = run.get("output_throughput")
    if tpot is None and throughput is None:
        raise InputError("the run states neither mean_tpot_ms nor output_throughput", file=label)
    tau = acceptance_length(run)
    if tau is not None and draft is None:
        raise InputError(f"a speculative run (acceptance length {tau:g}) whose drafter is not given", file=label,
                         valid="--draft METHOD:K (e.g. --draft eagle3:3), or --draft FILE=METHOD:K for this file")
    if tau is not None and tau > draft[1] + 1:
        raise InputError(f"an acceptance length of {tau:g} cannot come from {draft[1]} drafts", file=label,
                         field="--draft", value=f"{draft[0]}:{draft[1]}", valid=f"a draft length of at least "
                                                                                   f"{math.ceil(tau - 1)}")
    spec = {} if tau is None else {"spec_method": draft[0], "num_draft_tokens": draft[1], "acceptance_length": tau}
    return ServingRecord(
        id=label, source=label, engine=stack, gpu=gpu, tensor_parallel=tensor_parallel, model=model,
        precision=precision, expert_parallel=expert_parallel,
        kv_precision=kv_precision, input_tokens=max(1, round(run["total_input_tokens"] / completed)),
        output_tokens=max(2, round(run["total_output_tokens"] / completed)), concurrency=int(concurrency),
        num_prompts=completed, max_num_seqs=max_num_seqs, max_batch_tokens=max_batch_tokens,
        mean_tpot_ms=None if tpot is None else float(tpot),
        output_throughput_tok_s=None if throughput is None else float(throughput), url=label, **spec)


def fit_bench(files: list[Path], *, gpu: str, model: str, stack: str, precision: str, kv_precision: str,
              max_num_seqs: int, max_batch_tokens: int, name: str, command: Optional[str] = None,
              tensor_parallel: int = 1, expert_parallel: int = 1,
              drafts: Optional[dict[Optional[str], tuple[str, int]]] = None, on_engine: bool = True
              ) -> dict[str, Any]:
    """Fit the stack on the runs of ``files`` (served on ``tensor_parallel`` GPUs, experts over
    ``expert_parallel``; speculative runs with ``drafts``, see :func:`parse_drafts`) and return the table profile
    (with the fit in its provenance). With ``on_engine`` the fit and the residuals it states are the engine's
    replay of each run (:func:`simlab.calibration.profile_check.replay_record`), else the closed form's."""
    from simlab.config.hardware import RooflineHardware
    from simlab.calibration.stages.speculative import fit_host_time, host_time_names, predict_speculative
    from simlab.hardware.export import ExportSettings, table_dict
    from simlab.hardware.roofline_build import build_roofline

    replay: Optional[Replay] = None
    if on_engine:
        from simlab.calibration.profile_check import replay_record

        replay = replay_record

    base_cfg = RooflineHardware(kind="roofline", gpu=gpu, model=model, stack=stack, precision=precision,
                                kv_precision=kv_precision, tensor_parallel=tensor_parallel,
                                expert_parallel=expert_parallel)
    start = build_roofline(base_cfg, field="")  # checks the names, the precision, the layout and that it fits
    drafts = drafts or {}
    records = []
    for path in files:
        for i, run in enumerate(read_runs(path)):
            records.append(run_record(run, label=f"{path}#{i + 1}", gpu=start.gpu.name, model=start.model.name,
                                      stack=stack, precision=precision, kv_precision=kv_precision,
                                      max_num_seqs=max_num_seqs, max_batch_tokens=max_batch_tokens,
                                      tensor_parallel=tensor_parallel, expert_parallel=expert_parallel,
                                      draft=drafts.get(str(path), drafts.get(None))))
    plain = [r for r in records if not r.speculative]
    speculative = [r for r in records if r.speculative]
    names = identifiable(FIT_ORDER, plain)
    spec_names = host_time_names(speculative)
    if not names and not spec_names:
        raise InputError(f"too few measurements to fit: {len(observations(records))} (TPOT and throughput of "
                         f"{len(records)} runs)",
                         field="RESULTS", valid="at least 2 measured values, e.g. one run stating both mean TPOT "
                                                "and output throughput; more runs fit more parameters")
    params, fitted, standard_errors = replace(start.params), {}, {}
    if names:
        params, result = fit_stack(plain, params, names, replay)
        fitted.update({n: float(getattr(params, n)) for n in names})
        standard_errors.update({n: float(se) * SCALE[n] for n, se in zip(names, result.standard_errors)})
    if spec_names:
        values, errors, _ = fit_host_time(speculative, {start.gpu.name: params}, spec_names, replay)
        fitted.update(values)
        standard_errors.update(errors)
    cost_model = build_roofline(base_cfg.model_copy(update=fitted), field="")
    data = table_dict(cost_model, ExportSettings(), generator=GENERATOR)
    data["name"] = name
    residuals = []
    for record in records:
        predicted = (replay or (predict_speculative if record.speculative else predict))(record, cost_model.params)
        for metric in ("mean_tpot_ms", "output_throughput_tok_s"):
            measured = getattr(record, metric)
            if measured is not None:
                residuals.append({"run": record.id, "metric": metric, "measured": measured,
                                  "fitted": round(predicted[metric], 4),
                                  "error": round(predicted[metric] / measured - 1.0, 4)})
    errors = np.abs([r["error"] for r in residuals])
    profile_errors = table_errors(records, data, replay) if replay else None
    data["provenance"]["fit"] = {
        "command": command, "files": [str(f) for f in files], "runs": len(records),
        "speculative_runs": len(speculative), "fitted": fitted, "standard_errors": standard_errors,
        "residual_median_abs": round(float(np.median(errors)), 4), "residual_max_abs": round(float(np.max(errors)), 4),
        "residuals": residuals,
        **({"profile_residual_median_abs": round(float(np.median(profile_errors)), 4),
            "profile_residual_max_abs": round(float(np.max(profile_errors)), 4)} if replay else {}),
        "residuals_of": "engine replay" if replay else "closed form",
        "note": ("residuals are the engine's replay of each run (a closed loop of its users and mean lengths, "
                 "paged KV; simlab.calibration.profile_check) on the fitted roofline, which the fit matched "
                 "(simlab.calibration.stages.replayed); profile_residual_* are the same replays on this file's table, "
                 "which samples the per-request overhead at 4 tokens a request"
                 if replay else "residuals are the closed-form steady state the fit uses (simlab.calibration.stages."
                 "serving and calfit.speculative); simulate the runs' scenarios to see the engine's own error"),
    }
    return data


def table_errors(records: list[ServingRecord], data: dict[str, Any], replay: Replay) -> np.ndarray:
    """|simulated / measured - 1| of every measured value, each run replayed on the table profile ``data`` (what a
    scenario naming the written file gets)."""
    import yaml

    from simlab.config.hardware import TableHardware
    from simlab.hardware.table import TableCostModel

    table = TableCostModel(TableHardware.model_validate(yaml.safe_load(yaml.safe_dump(data))), name=data["name"])
    return np.array([error for record in records for error in abs_errors(record, replay(record, table))])
