"""Stage 5 of the fit: each serving stack's host time of speculative decoding, on speculative engine measurements
(calibration.yaml ``serving.speculative``; docs/calibration.md, "Speculative decoding's host time").

A speculative round costs an engine more than its kernels. Between the target's verify and the drafter's forwards
the engine accepts and rejects the drafts, rebuilds the drafter's inputs and positions, and (for EAGLE-style
drafters) runs the draft's extend step; each drafter forward adds its own launch and sampling. Two values per
stack, one for every GPU:

- ``spec_round_overhead_s``: host time once per speculative round;
- ``draft_forward_overhead_s``: host time per drafter forward (gamma a round for EAGLE-3 and MTP, one for a
  DFlash or DSpark block).

They are fitted on the speculative records of the sources listed (and each source's row filter), every other
parameter as stages 1-4 left it; a stack without speculative records takes another's (``borrow``). The two are told
apart by runs at several draft lengths: the round's time grows by one forward per extra draft position. Every
other speculative record is held out, and ``simlab profiles check`` simulates each with the engine.

The fit predicts a record in closed form: ``users`` requests decode together; a round verifies ``gamma + 1``
tokens of each at their mean context and drafts ``gamma``; it emits the measured acceptance length ``tau`` per
request. TPOT is the round over ``tau``; throughput is ``users x output`` over a request's cycle (its prompt's
prefill, target and drafter, then ``(output - 1) / tau`` rounds).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

import numpy as np

from simlab.calibration.stages.lsq import rounded
from simlab.calibration.stages.replayed import Replay, fit_replayed
from simlab.calibration.stages.moe import stage3_params
from simlab.calibration.stages.serving import (ServingRecord, cost_model, decoding_users, identifiable, listed_records,
                                            observations)
from simlab.hardware.calibration import MOE_PARAMETERS, SPECULATIVE_PARAMETERS, stage_values
from simlab.hardware.device import RooflineParams

X0_US = {"spec_round_overhead_s": 300.0, "draft_forward_overhead_s": 30.0}
UPPER_US = {"spec_round_overhead_s": 20000.0, "draft_forward_overhead_s": 5000.0}


def speculative_records(records: list[ServingRecord], stack: str, how: dict[str, Any]) -> list[ServingRecord]:
    """The records a stack's speculative host time is fitted on: its engine, a speculative run of a listed
    source (and its row filter), any GPU."""
    return [r for r in listed_records(records, how, speculative=True) if r.engine == stack]


def host_time_names(records: list[ServingRecord]) -> tuple[str, ...]:
    """The host-time parameters ``records`` identify: one per two measured values, the round's first; the time
    per drafter forward only when the runs differ in drafter forwards per round (EAGLE-3 or MTP at two draft
    lengths or more; a DFlash or DSpark block is one forward whatever its length)."""
    names = identifiable(SPECULATIVE_PARAMETERS, records)
    forwards = {r.num_draft_tokens if r.spec_method in ("eagle3", "mtp") else 1 for r in records}
    return names if len(forwards) > 1 else tuple(n for n in names if n != "draft_forward_overhead_s")


def stage4_params(gpus: dict[str, Any], moe: dict[str, Any], gpu: str, stack: str) -> RooflineParams:
    """The parameters a calibrated roofline of ``stack`` on ``gpu`` takes from stages 1-4."""
    return replace(stage3_params(gpus, gpu, stack), **stage_values(moe, stack, MOE_PARAMETERS))


def predict_speculative(record: ServingRecord, params: RooflineParams) -> dict[str, float]:
    """The closed-form steady state of a speculative record (module docstring): mean TPOT (ms) and output
    throughput."""
    cm = cost_model(record, params)
    method, gamma, tau = record.spec_method, int(record.num_draft_tokens), float(record.acceptance_length)
    lin, lout = record.input_tokens, record.output_tokens
    users = decoding_users(record, cm)
    context = users * (lin + lout / 2.0)
    round_s = (float(cm.verify_s(users * (gamma + 1), context, users))
               + float(cm.draft_s(method, gamma, users, context)))
    prefill_s = float(cm.prefill_s(lin)) + float(cm.draft_prefill_s(method, lin) or 0.0)
    cycle_s = prefill_s + (lout - 1) / tau * round_s
    return {"mean_tpot_ms": round_s / tau * 1e3, "output_throughput_tok_s": users * lout / cycle_s}


def fit_host_time(records: list[ServingRecord], base: dict[str, RooflineParams],
                  names: tuple[str, ...] = SPECULATIVE_PARAMETERS, replay: Optional[Replay] = None
                  ) -> tuple[dict[str, float], dict[str, float], float]:
    """(values, standard errors, rms log residual) of ``names`` (of :data:`SPECULATIVE_PARAMETERS`) fitted on
    ``records``, each record's other parameters ``base[gpu]``; to the engine replay when ``replay`` is given."""

    def params(x: np.ndarray, record: ServingRecord) -> RooflineParams:
        return replace(base[record.gpu], **{name: float(v) * 1e-6 for name, v in zip(names, x)})

    result = fit_replayed(observations(records), params, predict_speculative, [X0_US[n] for n in names],
                          [0.0] * len(names), [UPPER_US[n] for n in names], replay).result
    values = {name: float(v) * 1e-6 for name, v in zip(names, result.x)}
    errors = {name: float(se) * 1e-6 for name, se in zip(names, result.standard_errors)}
    return values, errors, result.rms_log_residual


def fit_speculative(spec_speculative: dict[str, Any], gpus: dict[str, Any], moe: dict[str, Any],
                    records: list[ServingRecord], replay: Optional[Replay] = None) -> dict[str, Any]:
    """fitted.yaml's ``speculative`` mapping: per stack, in calibration.yaml's order (a borrower after its donor)."""
    out: dict[str, Any] = {}
    for stack, how in spec_speculative.items():
        donor = how.get("borrow")
        if donor:
            out[stack] = {**{name: out[donor][name] for name in SPECULATIVE_PARAMETERS}, "fitted_on": [],
                          "borrowed": donor}
        else:
            rows = speculative_records(records, stack, how)
            base = {r.gpu: stage4_params(gpus, moe, r.gpu, stack) for r in rows}
            names = host_time_names(rows)
            values, errors, rms = fit_host_time(rows, base, names, replay)
            out[stack] = {**{name: rounded(values.get(name, 0.0)) for name in SPECULATIVE_PARAMETERS},
                          "standard_errors": {name: rounded(errors[name], 3) for name in names},
                          "rms_log_residual": rounded(rms, 3), "fitted_on": sorted(r.id for r in rows)}
        if how.get("note"):
            out[stack]["note"] = " ".join(str(how["note"]).split())
    return out
