"""``simlab profiles check``: every public engine measurement the profiles are calibrated or checked on,
simulated by the engine itself against what the engine measured.

Each record of hw_profiles/calibration/engine_measurements.csv becomes a closed-loop scenario: ``concurrency``
users (every request at once when the benchmark sent them so), constant prompt and output lengths, the engine's
``max_num_seqs`` and ``max_batch_tokens``, paged KV with preemption (as the engines run), one arm without
speculation, on the calibrated roofline of the record's GPU, model, stack, precision and KV precision (or on a
named profile). The error of each metric is
``simulated / measured - 1``; a record is *fitted* when its stack's fit used it (fitted.yaml) and *held out*
otherwise. ``error_table`` states the error per GPU x stack x precision x role, which docs/calibration.md shows and
``tests/test_profile_check.py`` recomputes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

import numpy as np

from simlab.calibration.stages.serving import SERVING_FILE, ServingRecord, abs_errors, read_records
from simlab.hardware.device import RooflineParams

METRIC_KEYS = {"mean_tpot_ms": "mean_tpot_ms", "output_throughput_tok_s": "output_throughput"}
MIN_REQUESTS = 64  # at least this many requests simulated per record (and four per user)


@dataclass(frozen=True)
class CheckRow:
    """One metric of one record: measured, simulated, and whether the fit used the record."""

    record: ServingRecord
    metric: str
    measured: float
    simulated: float
    role: str  # fitted | held out

    @property
    def error(self) -> float:
        return self.simulated / self.measured - 1.0


def records_path() -> Path:
    from simlab.common.resources import shipped_dir

    return shipped_dir("hw_profiles") / "calibration" / SERVING_FILE


def load_records(path: Optional[Path] = None) -> list[ServingRecord]:
    """The shipped engine measurements (or ``path``'s)."""
    return read_records(path or records_path())


def fitted_ids(fitted: Optional[dict] = None) -> set[str]:
    """Every record id a stack's fit used, over all GPUs of fitted.yaml."""
    from simlab.hardware.calibration import load_fitted

    fitted = fitted or load_fitted()
    ids = {rid for entry in fitted["gpus"].values() for stack in (entry.get("stacks") or {}).values()
           for rid in stack.get("fitted_on", ())}
    later = [stack for stage in ("moe", "speculative") for stack in (fitted.get(stage) or {}).values()]
    return ids | {rid for stack in later for rid in stack.get("fitted_on", ())}


def num_simulated_requests(record: ServingRecord) -> int:
    return min(record.num_prompts, max(4 * record.concurrency, MIN_REQUESTS))


def iid_alpha(acceptance_length: float, gamma: int) -> float:
    """The per-position acceptance probability whose expected tokens per round, ``(1 - a^(g+1)) / (1 - a)`` with
    the bonus token, is ``acceptance_length`` (bisection; an acceptance length above g + 1 is out of range)."""
    if not 1.0 <= acceptance_length <= gamma + 1:
        raise ValueError(f"an acceptance length of {acceptance_length} cannot come from {gamma} drafts")
    low, high = 0.0, 1.0
    for _ in range(100):
        mid = (low + high) / 2
        tau = sum(mid ** k for k in range(gamma + 1))
        low, high = (mid, high) if tau < acceptance_length else (low, mid)
    return (low + high) / 2


def record_arm(record: ServingRecord) -> tuple[dict[str, Any], dict[str, Any]]:
    """(arm, acceptance) replaying ``record``: no speculation, or its drafter at its draft length with
    per-position acceptance set so that the expected tokens per round equal its measured acceptance length."""
    if not record.speculative:
        return {"name": "no-spec", "method": "none"}, {"kind": "iid", "alpha": 0.5}
    gamma = int(record.num_draft_tokens)
    return ({"name": record.spec_method, "method": record.spec_method, "gamma": gamma, "scheduler": {"kind": "fixed"}},
            {"kind": "iid", "alpha": round(iid_alpha(float(record.acceptance_length), gamma), 6)})


def record_scenario(record: ServingRecord, hardware: Any = None) -> dict[str, Any]:
    """The scenario that replays ``record`` (on ``hardware``, by default the record's calibrated roofline)."""
    arm, acceptance = record_arm(record)
    return {
        "name": "check", "seed": 0,
        "workload": {"kind": "closed_loop", "concurrency": record.concurrency,
                     "num_requests": num_simulated_requests(record),
                     "prompt_tokens": {"dist": "constant", "value": record.input_tokens},
                     "output_tokens": {"dist": "constant", "value": record.output_tokens}},
        "hardware": hardware if hardware is not None else record.hardware(),
        # vLLM, SGLang and TensorRT-LLM page the KV cache: a prompt is admitted on its own blocks and the newest
        # request is preempted (recomputed) when a decode step finds none free. Every engine field is given (and
        # whether the run's engine overlapped its scheduling under speculation), so the replay is the same whichever
        # release the roofline's stack is (the calibration was fitted so)
        "engine": {"max_num_seqs": record.max_num_seqs, "max_batch_tokens": record.max_batch_tokens,
                   "prefill_chunk_tokens": record.max_batch_tokens, "kv_policy": "paged", "block_size": 16,
                   "overlap_schedule": record.overlapped},
        "acceptance": acceptance,
        "arms": [arm],
    }


def simulate_record(record: ServingRecord, hardware: Any = None, *, cost: Any = None) -> dict[str, float]:
    """The simulated metrics of ``record`` (keys of :data:`METRIC_KEYS`), on ``cost`` (a cost model object) when
    given."""
    from simlab.runner import run_scenario

    metrics = next(iter(run_scenario(record_scenario(record, hardware), plot=False, cost=cost).arms.values()))
    return {name: float(metrics[key]) for name, key in METRIC_KEYS.items()}


def replay_record(record: ServingRecord, params: Any) -> dict[str, float]:
    """The engine replay of ``record`` on the calibrated roofline ``params`` (:class:`RooflineParams`) give, the
    calibration fit's ``replay`` (:mod:`simlab.calibration.stages.replayed`), or on ``params`` itself when it is a
    cost model (a profile's table)."""
    from simlab.calibration.stages.serving import cost_model

    cost = cost_model(record, params) if isinstance(params, RooflineParams) else params
    return simulate_record(record, cost=cost)


def check_records(records: Iterable[ServingRecord], *, hardware: Any = None, fitted: Optional[dict] = None,
                  on_record: Optional[Callable[[int], None]] = None) -> list[CheckRow]:
    """Simulate every record; one :class:`CheckRow` per measured metric."""
    used = fitted_ids(fitted)
    rows = []
    for i, record in enumerate(records):
        simulated = simulate_record(record, hardware)
        role = "fitted" if record.id in used else "held out"
        for metric in METRIC_KEYS:
            measured = getattr(record, metric)
            if measured is not None:
                rows.append(CheckRow(record, metric, measured, simulated[metric], role))
        if on_record is not None:
            on_record(i + 1)
    return rows


def users_class(concurrency: int) -> str:
    """The load classes the error is stated for: one user, a few, and 32 or more (every request at once counts
    as its request count)."""
    return "1" if concurrency <= 1 else ("2-31" if concurrency < 32 else "32+")


def abs_error_summary(errors: list[float]) -> dict[str, Any]:
    """Points, median and largest of absolute errors (rounded to 0.1 %)."""
    return {"points": len(errors), "median_abs_error": round(float(np.median(errors)), 3),
            "max_abs_error": round(float(np.max(errors)), 3)}


def error_table(rows: Iterable[CheckRow]) -> list[dict[str, Any]]:
    """Per GPU x stack x target (dense or a mixture of experts) x precision x drafter x role x users: points,
    median and largest absolute error (0.1 %)."""
    from simlab.hardware.specs import get_model

    groups: dict[tuple, list[float]] = {}
    for row in rows:
        r = row.record
        target = "moe" if get_model(r.model).is_moe else "dense"
        key = (r.gpu, r.engine, target, r.precision, r.spec_method or "none", row.role, users_class(r.concurrency))
        groups.setdefault(key, []).append(abs(row.error))
    out = []
    for (gpu, stack, target, precision, drafter, role, users), errors in sorted(groups.items()):
        out.append({"gpu": gpu, "stack": stack, "target": target, "precision": precision, "drafter": drafter,
                    "role": role, "users": users, **abs_error_summary(errors)})
    return out


def matching_records(records: list[ServingRecord], description: dict[str, Any]) -> list[ServingRecord]:
    """The records a profile stands for: its GPU, model, stack and precision (from its provenance)."""
    wanted = {k: description.get(k) for k in ("gpu", "model", "stack", "precision")}
    return [r for r in records if (r.gpu, r.model, r.engine, r.precision) == tuple(wanted.values())]


ERROR_FILE = "engine_error.yaml"


def error_document(rows: list[CheckRow], loso: Optional[list[dict[str, Any]]] = None) -> dict[str, Any]:
    """What hw_profiles/calibration/engine_error.yaml holds: every record's metrics, simulated against measured,
    and the error per GPU x stack x precision x role (scripts/calibrate_hardware.py writes it after each fit)."""
    records = [{"id": r.record.id, "metric": r.metric, "role": r.role, "measured": r.measured,
                "simulated": float(f"{r.simulated:.6g}"), "error": round(r.error, 4)} for r in rows]
    document = {"generator": "scripts/calibrate_hardware.py (simlab profiles check)", "records": records,
                "summary": error_table(rows)}
    if loso is not None:
        document["leave_one_source_out"] = loso
    return document


def leave_one_source_out(folder: Optional[Path] = None) -> list[dict[str, Any]]:
    """Per stack and fitted source: the stack refitted without that source, and the error on the source's own
    records, simulated (hw_profiles/calibration/calibration.yaml names the sources; a source whose removal leaves
    nothing to fit is skipped)."""
    from simlab.calibration.stages.fit import fitted_records, refit_without
    from simlab.calibration.stages.sources import load_spec
    from simlab.hardware.calibration import load_fitted

    spec = load_spec(folder or records_path().parent)
    fitted = load_fitted()
    records = load_records(spec.folder / spec.serving["file"])
    out = []
    for gpu, stacks in spec.serving["stacks"].items():
        for stack, how in stacks.items():
            for source in (how.get("sources") or {}):
                refit = refit_without(spec, fitted, records, gpu, stack, source, replay_record)
                mine = [r for r in fitted_records(records, gpu, stack, how) if r.source == source]
                if refit is None or not mine:
                    continue
                values, names = refit
                errors = []
                for record in mine:
                    simulated = simulate_record(record, {**record.hardware(), **values})
                    errors += abs_errors(record, simulated)
                out.append({"gpu": gpu, "stack": stack, "left_out": source, "refitted": list(names),
                            **abs_error_summary(errors)})
    return out + leave_one_moe_source_out(spec, fitted, records)


def leave_one_moe_source_out(spec: Any, fitted: dict[str, Any], records: list[ServingRecord]) -> list[dict[str, Any]]:
    """Stage 4's leave one source out: each stack's MoE latency refitted without one of its sources, and that
    source's error (simlab.calibration.stages.moe)."""
    from simlab.calibration.stages.moe import PARAMETER, fit_overhead, moe_records

    out = []
    for stack, how in (spec.serving.get("moe") or {}).items():
        for source in (how.get("sources") or {}):
            rows = moe_records(records, stack, how, left_out=source)
            mine = [r for r in moe_records(records, stack, how) if r.source == source]
            if not rows or not mine:
                continue
            value, _, _ = fit_overhead(rows, fitted["gpus"], stack, replay_record)
            errors = []
            for record in mine:
                simulated = simulate_record(record, {**record.hardware(), PARAMETER: value})
                errors += abs_errors(record, simulated)
            out.append({"gpu": ", ".join(sorted({r.gpu for r in mine})), "stack": stack, "left_out": source,
                        "refitted": [PARAMETER], **abs_error_summary(errors)})
    return out

