"""The fit behind every calibrated roofline, in two stages per GPU with measurements of its own.

1. **Operators** (Vidur's per-kernel medians, as layer totals): ``bw_efficiency``, ``flop_efficiency`` and
   ``knee_width`` from the four GEMMs of a decoder layer over 1..32768 tokens;
   ``elementwise_efficiency`` and ``kernel_launch_s`` (the small-forward floor) from its norms, rotary and
   activation kernels.
2. **End to end** (engine latencies of static batches), with stage 1 fixed: ``attention_efficiency`` (shared)
   and, per engine, ``step_overhead_s`` and ``request_overhead_s``.
3. **Serving stacks** (benchmark runs of today's engines, :mod:`simlab.calibration.stages.serving`), with stage 1
   fixed: per stack ``step_overhead_s``, ``request_overhead_s`` and ``attention_efficiency``, which the cost
   models use.

All minimise squared log residuals (:func:`simlab.calibration.stages.lsq.fit_log`); stages 3-5 on the engine's replay
when the caller passes one (:mod:`simlab.calibration.stages.replayed`). Rows a source's ``fit`` does not
select are held out and only evaluated; rows that cannot be valid (:func:`static_batch_exclusion`) are listed and
left out of both. A GPU without measurements borrows another's parameters (calibration.yaml ``gpus``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

import numpy as np

from simlab.calibration.stages.checks import derived_curves, reference_check
from simlab.calibration.stages.lsq import FitResult, error_summary, fit_log, rounded
from simlab.calibration.stages.observe import (
    OperatorRows,
    StaticBatch,
    operator_rows,
    predict_operators,
    predict_static_batch,
    static_batch_exclusion,
    static_batch_rows,
)
from simlab.calibration.stages.replayed import Replay
from simlab.calibration.stages.serving import (
    STACK_FIT,
    ServingRecord,
    fit_stack,
    identifiable,
    listed_records,
    read_records,
    stack_entry,
)
from simlab.calibration.stages.sources import OPERATORS, STATIC_BATCH, Source, Spec
from simlab.hardware.device import RooflineParams
from simlab.hardware.knee import MAX_KNEE_WIDTH
from simlab.hardware.specs import GpuSpec, get_gpu

OPERATOR_FIT = ("bw_efficiency", "flop_efficiency", "knee_width", "elementwise_efficiency", "kernel_launch_s")
OPERATOR_X0 = (0.8, 0.7, 1.0, 0.6, 4.0)  # kernel_launch_s in microseconds
OPERATOR_LOWER = (0.05, 0.05, 0.0, 0.05, 0.0)
OPERATOR_UPPER = (1.0, 1.0, MAX_KNEE_WIDTH, 1.0, 50.0)
ENGINE_X0 = (1.0, 20.0)  # step_overhead_s in ms, request_overhead_s in microseconds
ENGINE_LOWER = (0.0, 0.0)
ENGINE_UPPER = (20.0, 500.0)
ATTENTION_X0, ATTENTION_BOUNDS = 0.7, (0.05, 1.0)


def operator_params(x: np.ndarray) -> RooflineParams:
    """Stage-1 parameters from the solver's vector (``kernel_launch_s`` given in microseconds)."""
    return RooflineParams(bw_efficiency=x[0], flop_efficiency=x[1], knee_width=x[2],
                          elementwise_efficiency=x[3], kernel_launch_s=x[4] * 1e-6, calibration="fit")


def fit_operators(rows: OperatorRows, gpu: GpuSpec) -> tuple[RooflineParams, FitResult]:
    """Stage 1 on one GPU's operator rows."""
    result = fit_log(lambda x: predict_operators(rows, gpu, operator_params(x)), rows.seconds, OPERATOR_X0,
                     OPERATOR_LOWER, OPERATOR_UPPER)
    return operator_params(result.x), result


def engine_params(base: RooflineParams, x: np.ndarray, engines: list[str]) -> dict[str, RooflineParams]:
    """Stage-2 parameters per engine from the solver's vector ``[attention_efficiency, (overhead ms, per-request
    microseconds) per engine]``."""
    return {engine: replace(base, attention_efficiency=x[0], step_overhead_s=x[1 + 2 * i] * 1e-3,
                            request_overhead_s=x[2 + 2 * i] * 1e-6)
            for i, engine in enumerate(engines)}


def predict_batches(rows: list[StaticBatch], gpu: GpuSpec, params: dict[str, RooflineParams],
                    chunk_tokens: int) -> np.ndarray:
    cache: dict = {}
    return np.array([predict_static_batch(r, gpu, params[r.engine], chunk_tokens, cache) for r in rows])


def fit_end_to_end(rows: list[StaticBatch], gpu: GpuSpec, base: RooflineParams, chunk_tokens: int
                   ) -> tuple[dict[str, RooflineParams], FitResult, list[str]]:
    """Stage 2 on one GPU's static-batch rows, stage-1 ``base`` fixed."""
    engines = sorted({r.engine for r in rows})
    x0 = [ATTENTION_X0] + list(ENGINE_X0) * len(engines)
    lower = [ATTENTION_BOUNDS[0]] + list(ENGINE_LOWER) * len(engines)
    upper = [ATTENTION_BOUNDS[1]] + list(ENGINE_UPPER) * len(engines)
    measured = np.array([r.seconds for r in rows])
    result = fit_log(lambda x: predict_batches(rows, gpu, engine_params(base, x, engines), chunk_tokens),
                     measured, x0, lower, upper)
    return engine_params(base, result.x, engines), result, engines


def _subset_name(row: StaticBatch) -> str:
    return f"{row.engine}, {row.model.name}, tp{row.tensor_parallel}"


def _batch_errors(source: Source, rows: list[StaticBatch], predicted: np.ndarray) -> list[dict[str, Any]]:
    """Error summaries of a source's static-batch rows, one per engine x model x tensor parallelism."""
    out = []
    for name in sorted({_subset_name(r) for r in rows}):
        index = [i for i, r in enumerate(rows) if _subset_name(r) == name]
        out.append({"source": source.id, "subset": name,
                    **error_summary(predicted[index], np.array([rows[i].seconds for i in index]))})
    return out


class Calibrator:
    """Runs the fit for every GPU of a :class:`Spec` and assembles what fitted.yaml holds."""

    def __init__(self, spec: Spec, replay: Optional[Replay] = None) -> None:
        self.spec = spec
        self.replay = replay  # stages 3-5 fit the engine replay when given (simlab.calibration.stages.replayed)
        self.operator_fits: dict[str, tuple[RooflineParams, FitResult, Source]] = {}
        self.engine_fits: dict[str, tuple[dict[str, RooflineParams], FitResult, list[str], Source]] = {}
        self.errors: dict[tuple[str, str], dict[str, list]] = {}  # (gpu, stage) -> fitted / held_out / excluded

    def _sources(self, gpu: str, kind: str) -> list[Source]:
        return [s for s in self.spec.sources if s.gpu == gpu and s.kind == kind]

    def _errors(self, gpu: str, stage: str) -> dict[str, list]:
        return self.errors.setdefault((gpu, stage), {"fitted": [], "held_out": [], "excluded": []})

    def fit_gpu_operators(self, gpu_name: str) -> None:
        gpu = get_gpu(gpu_name)
        fitted = [s for s in self._sources(gpu_name, OPERATORS) if s.fit == "all"]
        if len(fitted) != 1:
            raise ValueError(f"{gpu_name}: expected one operators source with fit: all, found {len(fitted)}")
        source = fitted[0]
        rows = operator_rows(source.frame, self.spec.model(source.model or ""))
        params, result = fit_operators(rows, gpu)
        self.operator_fits[gpu_name] = (params, result, source)
        errors = self._errors(gpu_name, OPERATORS)
        errors["fitted"].append({"source": source.id, "subset": f"operators, {source.model}",
                                 **error_summary(predict_operators(rows, gpu, params), rows.seconds)})
        for other in self._sources(gpu_name, OPERATORS):
            if other is not source:
                held = operator_rows(other.frame, self.spec.model(other.model or ""))
                errors["held_out"].append({"source": other.id, "subset": f"operators, {other.model}",
                                           **error_summary(predict_operators(held, gpu, params), held.seconds)})

    def fit_gpu_end_to_end(self, gpu_name: str) -> None:
        gpu = get_gpu(gpu_name)
        base = self.operator_fits[gpu_name][0]
        sources = self._sources(gpu_name, STATIC_BATCH)
        if len(sources) != 1:
            raise ValueError(f"{gpu_name}: expected one static_batch source, found {len(sources)}")
        source = sources[0]
        errors = self._errors(gpu_name, STATIC_BATCH)
        fitted, held = [], []
        for row, is_fit in zip(static_batch_rows(source.frame, self.spec.model), source.fitted_mask()):
            why = static_batch_exclusion(row, gpu)
            if why is not None:
                errors["excluded"].append({"source": source.id, "row": row.label, "reason": why})
            else:
                (fitted if is_fit else held).append(row)
        chunk = source.prefill_chunk_tokens
        params, result, engines = fit_end_to_end(fitted, gpu, base, chunk)
        self.engine_fits[gpu_name] = (params, result, engines, source)
        errors["fitted"] += _batch_errors(source, fitted, predict_batches(fitted, gpu, params, chunk))
        if held:
            errors["held_out"] += _batch_errors(source, held, predict_batches(held, gpu, params, chunk))

    def run(self) -> dict[str, Any]:
        """Fit every GPU named as a source of operator or end-to-end parameters; return fitted.yaml's mapping."""
        for gpu in sorted({g["operators"] for g in self.spec.gpus.values()}):
            self.fit_gpu_operators(gpu)
        for gpu in sorted({g["end_to_end"] for g in self.spec.gpus.values()}):
            self.fit_gpu_end_to_end(gpu)
        gpus = {name: self.gpu_entry(name, how) for name, how in self.spec.gpus.items()}
        self.fit_stacks(gpus)
        for check in self.spec.reference_checks:
            entry = gpus[check["gpu"]]
            entry["error"].setdefault("reference_checks", []).append(
                reference_check(check, self.spec.folder, entry, self.spec.default_engine))
        out = {"generator": "scripts/calibrate_hardware.py", "default_engine": self.spec.default_engine,
               "sources": {s.id: s.provenance for s in self.spec.sources}, "gpus": gpus}
        if self.spec.serving and self.spec.serving.get("moe"):  # stage 4 (simlab.calibration.stages.moe)
            from simlab.calibration.stages.moe import fit_moe

            out["moe"] = fit_moe(self.spec.serving["moe"], gpus, self.serving_records(), self.replay)
        if self.spec.serving and self.spec.serving.get("speculative"):  # stage 5 (calfit.speculative)
            from simlab.calibration.stages.speculative import fit_speculative

            out["speculative"] = fit_speculative(self.spec.serving["speculative"], gpus, out.get("moe") or {},
                                                 self.serving_records(), self.replay)
        return out

    def gpu_entry(self, name: str, how: dict[str, Any]) -> dict[str, Any]:
        """One GPU's parameters, where each came from, and the error against the measurements used for it."""
        op_params, op_result, op_source = self.operator_fits[how["operators"]]
        by_engine, e2e_result, engines, e2e_source = self.engine_fits[how["end_to_end"]]
        parameters = {key: rounded(getattr(op_params, key)) for key in OPERATOR_FIT}
        parameters["attention_efficiency"] = rounded(by_engine[engines[0]].attention_efficiency)
        standard_errors = dict(zip(OPERATOR_FIT, op_result.standard_errors))
        standard_errors["kernel_launch_s"] *= 1e-6
        standard_errors["attention_efficiency"] = e2e_result.standard_errors[0]
        engine_entries = {}
        for i, (engine, params) in enumerate(by_engine.items()):
            engine_entries[engine] = {
                "step_overhead_s": rounded(params.step_overhead_s),
                "request_overhead_s": rounded(params.request_overhead_s),
                "standard_errors": {"step_overhead_s": rounded(e2e_result.standard_errors[1 + 2 * i] * 1e-3, 3),
                                    "request_overhead_s": rounded(e2e_result.standard_errors[2 + 2 * i] * 1e-6, 3)}}
        entry: dict[str, Any] = {
            "parameters": parameters,
            "standard_errors": {k: rounded(v, 3) for k, v in standard_errors.items()},
            "engines": engine_entries,
            "fitted_on": {"operators": f"{how['operators']}: {op_source.id}",
                          "end_to_end": f"{how['end_to_end']}: {e2e_source.id}"},
            "rms_log_residual": {"operators": rounded(op_result.rms_log_residual, 3),
                                 "end_to_end": rounded(e2e_result.rms_log_residual, 3)},
            "derived": derived_curves(name, parameters),
        }
        if how.get("note"):
            entry["note"] = " ".join(str(how["note"]).split())
        error: dict[str, Any] = {"fitted": [], "held_out": [], "excluded": []}
        for stage, donor in ((OPERATORS, how["operators"]), (STATIC_BATCH, how["end_to_end"])):
            if donor == name:
                for part, items in self._errors(name, stage).items():
                    error[part] += items
            else:
                error.setdefault("not_measured_on_this_gpu", []).append(
                    "operator-level parameters" if stage == OPERATORS else
                    "attention efficiency and engine step overheads")
        entry["error"] = error
        return entry

    # ------------------------------------------------------------------------------------------- stage 3
    def serving_records(self) -> list[ServingRecord]:
        serving = self.spec.serving
        return read_records(self.spec.folder / serving["file"]) if serving else []

    def fit_stacks(self, gpus: dict[str, Any]) -> None:
        """Stage 3 into ``gpus[...]["stacks"]``: each GPU with serving records fits its stacks (in the order
        calibration.yaml lists them, so that a stack borrows from one fitted before it); the others take their
        donor's stacks."""
        serving = self.spec.serving
        if not serving:
            return
        records = self.serving_records()
        for gpu_name, stacks in serving["stacks"].items():
            base = replace(self.operator_fits[gpu_name][0], calibration="fit")
            fitted: dict[str, RooflineParams] = {}
            entries: dict[str, Any] = {}
            for stack, how in stacks.items():
                names = tuple(how.get("fit") or ())
                donor = how.get("borrow")
                start = fitted[donor] if donor else base
                rows = fitted_records(records, gpu_name, stack, how)
                result = None
                if names:
                    params, result = fit_stack(rows, start, names, self.replay)
                else:
                    params = start
                fitted[stack] = params
                borrowed = {n: f"{gpu_name}/{donor}" for n in STACK_FIT if n not in names} if donor else {}
                entries[stack] = stack_entry(params, result, names, sorted({r.id for r in rows}), borrowed,
                                             how.get("note"))
            gpus[gpu_name]["stacks"] = entries
        for gpu_name, donor in serving.get("donors", {}).items():
            gpus[gpu_name]["stacks"] = {
                stack: {**{k: v for k, v in entry.items() if k in STACK_FIT}, "fitted": [], "fitted_on": [],
                        "borrowed": {n: f"{donor}/{stack}" for n in STACK_FIT},
                        "note": f"No serving measurement on this GPU was fitted: {donor}'s {stack} fit is used."}
                for stack, entry in gpus[donor]["stacks"].items()}


def fitted_records(records: list[ServingRecord], gpu: str, stack: str, how: dict[str, Any]) -> list[ServingRecord]:
    """The records a stack is fitted on: its GPU and engine, a listed source, and that source's row filter
    (speculative runs are only checked: the fit's closed form has no drafter)."""
    return [r for r in listed_records(records, how) if r.gpu == gpu and r.engine == stack]


def refit_without(spec: Spec, fitted: dict[str, Any], records: list[ServingRecord], gpu: str, stack: str,
                  left_out: str, replay: Optional[Replay] = None
                  ) -> Optional[tuple[dict[str, float], tuple[str, ...]]]:
    """The stack's parameters fitted again on ``records`` (the serving file's) without those of source
    ``left_out`` (leave one source out): the same start (the GPU's operator fit, or the stack it borrows from, as
    ``fitted`` holds them), as many of its fitted parameters as the remaining values identify (one per two values,
    in calibration.yaml's order). None when nothing is left to fit on."""
    how = spec.serving["stacks"][gpu][stack]
    rows = [r for r in fitted_records(records, gpu, stack, how) if r.source != left_out]
    names = identifiable(tuple(how.get("fit") or ()), rows)
    if not rows or not names:
        return None
    entry = fitted["gpus"][gpu]
    start = {k: float(entry["parameters"][k]) for k in OPERATOR_FIT}  # the operator fit, as stage 3 starts
    donor = how.get("borrow")
    if donor:
        start.update({k: float(entry["stacks"][donor][k]) for k in STACK_FIT})
    params, _ = fit_stack(rows, RooflineParams(**start, calibration="fit"), names, replay)
    values = {k: getattr(params, k) for k in STACK_FIT}
    if values["attention_efficiency"] is None:  # not fitted: the operator fit's bandwidth, as the cost model reads it
        values["attention_efficiency"] = params.bw_efficiency
    return {k: float(v) for k, v in values.items()}, names

