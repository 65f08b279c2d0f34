"""Stage 3 of the fit: serving stacks on end-to-end engine measurements
(hw_profiles/calibration/engine_measurements.csv).

Each record is one benchmark run of a serving engine: ``concurrency`` users (``vllm bench serve --max-concurrency``,
or every request at once) sending ``num_prompts`` requests of ``input_tokens`` prompt and ``output_tokens`` output
tokens, and what the benchmark printed (mean TPOT, output throughput). With the operator-level parameters fixed,
the stack's ``step_overhead_s``, ``request_overhead_s`` and ``attention_efficiency`` are fitted on its records
whose source calibration.yaml lists (``serving.stacks``); every other record is held out. A stack with few records
fits only some of the three and takes the rest from another stack (``borrow``).

The fit predicts a record in closed form. ``B`` users decode at once: the run's concurrency, unless the server's
``max_num_seqs`` or its KV cache (prompt and output of each) holds fewer. A step holds ``B`` decode tokens at their
mean context ``input + output / 2``, and a share ``B x input / (output x chunk)`` of the steps also prefills a chunk:
one prompt when every user is decoding, the rest of the token budget when requests queue (every request at once).
TPOT is the mean step; throughput is ``B`` tokens a step when requests queue, else ``B x output`` over a request's
cycle (its prefill steps and ``output - 1`` steps). Given the engine's replay (``replay``), the fit corrects the
closed form record by record until it matches the replay at the fitted parameters
(:mod:`simlab.calibration.stages.replayed`): the closed form and the replay differ by up to a third on saturation runs.
``simlab profiles check`` then simulates every record with the engine itself and states that error.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd

from simlab.hardware.buckets import Buckets
from simlab.calibration.stages.lsq import FitResult, rounded
from simlab.calibration.stages.replayed import Replay, fit_replayed
from simlab.hardware.calibrated import CalibratedRooflineCostModel
from simlab.hardware.calibration import STACK_PARAMETERS
from simlab.hardware.device import RooflineParams
from simlab.hardware.specs import get_gpu, get_model
from simlab.hardware.stacks import get_stack

SERVING_FILE = "engine_measurements.csv"
STACK_FIT = STACK_PARAMETERS
X0 = {"step_overhead_s": 0.5, "request_overhead_s": 10.0, "attention_efficiency": 0.7, "prefill_efficiency": 0.6,
      "quantized_efficiency": 0.8}  # ms, us, fractions
SCALE = {"step_overhead_s": 1e-3, "request_overhead_s": 1e-6, "attention_efficiency": 1.0, "prefill_efficiency": 1.0,
         "quantized_efficiency": 1.0}
LOWER = {"step_overhead_s": 0.0, "request_overhead_s": 0.0, "attention_efficiency": 0.05, "prefill_efficiency": 0.05,
         "quantized_efficiency": 0.05}
UPPER = {"step_overhead_s": 20.0, "request_overhead_s": 500.0, "attention_efficiency": 1.0, "prefill_efficiency": 1.0,
         "quantized_efficiency": 1.0}
METRICS = ("mean_tpot_ms", "output_throughput_tok_s")


@dataclass(frozen=True)
class ServingRecord:
    """One row of engine_measurements.csv."""

    id: str
    source: str
    engine: str  # the stack: vllm | sglang | trtllm | eager
    gpu: str
    tensor_parallel: int
    model: str
    precision: str
    kv_precision: str
    input_tokens: int
    output_tokens: int
    concurrency: int
    num_prompts: int
    max_num_seqs: int
    max_batch_tokens: int
    mean_tpot_ms: Optional[float]
    output_throughput_tok_s: Optional[float]
    url: str
    spec_method: Optional[str] = None  # a speculative run: the drafter (mtp, eagle3, dflash, dspark) ...
    num_draft_tokens: Optional[int] = None  # ... its draft length gamma ...
    acceptance_length: Optional[float] = None  # ... and the mean tokens per round it measured (bonus included)
    expert_parallel: int = 1  # a mixture of experts served with expert parallelism (simlab.hardware.moe_layout)
    dataset: Optional[str] = None  # the benchmark's prompts (sharegpt, random, gsm8k, ...)
    checkpoint: Optional[str] = None  # the target's checkpoint, with the drafter's after a '+' in speculative runs
    engine_version: Optional[str] = None  # the release (a tag such as v0.5.3) or build the run names, as written

    @property
    def overlapped(self) -> bool:
        """Whether the run's engine kept its overlap scheduler with speculation on: SGLang's spec V2, which the
        record's engine_version names (SGLANG_ENABLE_SPEC_V2); the other speculative runs of the data set ran on
        releases that turn it off under speculation (SGLang before 0.5.23, vLLM before async scheduling with it)."""
        version = (self.engine_version or "").lower()
        return self.speculative and ("spec v2" in version or "spec_v2" in version)

    @property
    def speculative(self) -> bool:
        return self.spec_method is not None

    @property
    def key(self) -> tuple[str, str, str]:
        """(GPU, stack, precision): the groups the error is stated for."""
        return (self.gpu, self.engine, self.precision)

    def hardware(self) -> dict[str, Any]:
        """The roofline config this record is simulated on."""
        return {"kind": "roofline", "gpu": self.gpu, "model": self.model, "stack": self.engine,
                "precision": self.precision, "kv_precision": self.kv_precision,
                "tensor_parallel": self.tensor_parallel,
                **({"expert_parallel": self.expert_parallel} if self.expert_parallel > 1 else {})}

    def operations_hardware(self, **given: Any) -> dict[str, Any]:
        """The ``kind: operations`` config this record is simulated on (``given`` fields replace the record's)."""
        return {"kind": "operations", "gpu": self.gpu, "model": self.model, "tensor_parallel": self.tensor_parallel,
                "precision": self.precision, "kv_precision": self.kv_precision, "stack": self.engine,
                **({"expert_parallel": self.expert_parallel} if self.expert_parallel > 1 else {}), **given}


def optional_float(value: Any) -> Optional[float]:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) or value == "" else float(value)


def read_records(path: Path) -> list[ServingRecord]:
    """Every record of ``path`` (its leading lines starting with # are comments; a # inside a row is text)."""
    lines = Path(path).read_text(encoding="utf-8").splitlines(keepends=True)
    body = "".join(line for line in lines if not line.startswith("#"))
    frame = pd.read_csv(io.StringIO(body), keep_default_na=True)
    records = []
    for row in frame.to_dict("records"):
        records.append(ServingRecord(
            id=str(row["id"]), source=str(row["source"]), engine=str(row["engine"]), gpu=str(row["gpu"]),
            tensor_parallel=int(row["tensor_parallel"]), model=str(row["model"]), precision=str(row["precision"]),
            kv_precision=str(row["kv_precision"]), input_tokens=int(row["input_tokens"]),
            output_tokens=int(row["output_tokens"]), concurrency=int(row["concurrency"]),
            num_prompts=int(row["num_prompts"]), max_num_seqs=int(row["max_num_seqs"]),
            max_batch_tokens=int(row["max_batch_tokens"]), mean_tpot_ms=optional_float(row.get("mean_tpot_ms")),
            output_throughput_tok_s=optional_float(row.get("output_throughput_tok_s")), url=str(row["url"]),
            spec_method=optional_text(row.get("spec_method")),
            num_draft_tokens=optional_int(row.get("num_draft_tokens")),
            acceptance_length=optional_float(row.get("acceptance_length")),
            expert_parallel=optional_int(row.get("expert_parallel")) or 1, dataset=optional_text(row.get("dataset")),
            checkpoint=optional_text(row.get("checkpoint")), engine_version=optional_text(row.get("engine_version"))))
    return records


def optional_text(value: Any) -> Optional[str]:
    if value is None or value == "" or (isinstance(value, float) and math.isnan(value)):
        return None
    return str(value)


def optional_int(value: Any) -> Optional[int]:
    number = optional_float(value)
    return None if number is None else int(number)


def cost_model(record: ServingRecord, params: RooflineParams) -> CalibratedRooflineCostModel:
    """The calibrated roofline a record's stack, precision and model give with ``params``."""
    params = replace(params, precision=record.precision, kv_precision=record.kv_precision, stack=record.engine)
    buckets = Buckets(get_stack(record.engine).capture_sizes)
    return CalibratedRooflineCostModel(get_gpu(record.gpu), get_model(record.model),
                                       tensor_parallel=record.tensor_parallel,
                                       expert_parallel=record.expert_parallel, params=params, buckets=buckets)


def decoding_users(record: ServingRecord, cm: CalibratedRooflineCostModel) -> int:
    """The requests that decode at once: the run's concurrency, unless the server's ``max_num_seqs``, its prompts
    or its KV cache (prompt and output of each) hold fewer."""
    kv_users = (cm.kv_cache_tokens() or 0) // (record.input_tokens + record.output_tokens)
    return max(1, min(record.concurrency, record.max_num_seqs, record.num_prompts, kv_users))


def predict(record: ServingRecord, params: RooflineParams) -> dict[str, float]:
    """The closed-form steady state of a record (module docstring): mean TPOT (ms) and output throughput."""
    cm = cost_model(record, params)
    lin, lout, budget = record.input_tokens, record.output_tokens, record.max_batch_tokens
    users = decoding_users(record, cm)
    queued = record.concurrency > users  # requests wait: every prefill step is filled to the token budget
    context = users * (lin + lout / 2.0)
    decode = float(cm.verify_s(users, context, users))
    chunk = max(1, min(budget - users, lin * (record.concurrency - users) if queued else lin))
    mixed = cm.step_s(users, context, users, chunk, chunk * lin / 2.0)
    share = min(1.0, users * lin / (lout * chunk))  # steps that also prefill: users x input tokens per output
    tpot = (1.0 - share) * decode + share * mixed
    if queued:
        return {"mean_tpot_ms": tpot * 1e3, "output_throughput_tok_s": users / tpot}
    cycle = mixed * math.ceil(lin / chunk) + (lout - 1) * tpot
    return {"mean_tpot_ms": tpot * 1e3, "output_throughput_tok_s": users * lout / cycle}


def listed_records(records: list[ServingRecord], how: dict[str, Any], *, speculative: bool = False
                   ) -> list[ServingRecord]:
    """The records of the sources ``how`` lists (``sources: {SOURCE: {FIELD: VALUE or [VALUES], ...}}``, the row
    filter of each), speculative runs only when ``speculative`` (stages 3 and 4 predict runs without a drafter),
    else only runs without one."""
    sources = {name: dict(rows or {}) for name, rows in dict(how.get("sources") or {}).items()}
    return [r for r in records if r.source in sources and r.speculative == speculative
            and all(_matches(getattr(r, k), v) for k, v in sources[r.source].items())]


def _matches(value: Any, wanted: Any) -> bool:
    """Whether a record's field passes a row filter's entry: one value, or any of a list."""
    choices = wanted if isinstance(wanted, list) else [wanted]
    return str(value) in {str(choice) for choice in choices}


def observations(records: list[ServingRecord]) -> list[tuple[ServingRecord, str, float]]:
    """(record, metric, measured value) for every metric a record gives."""
    out = []
    for record in records:
        for metric in METRICS:
            value = getattr(record, metric)
            if value is not None:
                out.append((record, metric, value))
    return out


def abs_errors(record: ServingRecord, simulated: dict[str, float]) -> list[float]:
    """``|simulated / measured - 1|`` of every metric ``record`` measured (in :data:`METRICS` order)."""
    return [abs(simulated[metric] / getattr(record, metric) - 1.0) for metric in METRICS
            if getattr(record, metric) is not None]


def identifiable(names: tuple[str, ...], records: list[ServingRecord]) -> tuple[str, ...]:
    """The first of ``names`` that the records' measured values can identify: one parameter per two values."""
    return tuple(names)[:len(observations(records)) // 2]


def stack_params(base: RooflineParams, names: tuple[str, ...], x: np.ndarray) -> RooflineParams:
    return replace(base, **{name: float(v) * SCALE[name] for name, v in zip(names, x)})


def fit_stack(records: list[ServingRecord], base: RooflineParams, names: tuple[str, ...],
              replay: Optional[Replay] = None) -> tuple[RooflineParams, FitResult]:
    """Fit ``names`` (of :data:`STACK_FIT`) on ``records``, every other parameter as in ``base``: to the engine
    replay when ``replay`` is given (:mod:`simlab.calibration.stages.replayed`), else to the closed form."""
    fit = fit_replayed(observations(records), lambda x, _record: stack_params(base, names, x), predict,
                       [X0[n] for n in names], [LOWER[n] for n in names], [UPPER[n] for n in names], replay)
    result = fit.result
    return stack_params(base, names, result.x), result


def stack_entry(params: RooflineParams, result: Optional[FitResult], names: tuple[str, ...], fitted_on: list[str],
                borrowed: dict[str, str], note: Optional[str]) -> dict[str, Any]:
    """What fitted.yaml holds for one GPU's stack."""
    entry: dict[str, Any] = {name: rounded(getattr(params, name)) for name in STACK_FIT}
    if result is not None:
        entry["standard_errors"] = {name: rounded(se * SCALE[name], 3) for name, se in
                                    zip(names, result.standard_errors)}
        entry["rms_log_residual"] = rounded(result.rms_log_residual, 3)
    entry["fitted"] = list(names)
    entry["fitted_on"] = fitted_on
    if borrowed:
        entry["borrowed"] = borrowed
    if note:
        entry["note"] = " ".join(note.split())
    return entry
