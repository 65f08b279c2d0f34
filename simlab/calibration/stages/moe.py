"""Stage 4 of the fit: each serving stack's routed-expert kernels on mixture-of-experts engine measurements
(calibration.yaml ``serving.moe``; docs/roofline.md, "Expert parallelism").

A dense fit prices an MoE layer's expert weights at the GPU's fitted GEMM bandwidth, and at a small batch that is
a few microseconds a layer; engines take far longer: the routing (router GEMM, top-k, the token sort that groups
tokens by expert) and the grouped expert GEMMs' launch and tail cost a fixed time per MoE layer that CUDA graphs
do not remove (SGLang PR #11816 times the Triton fused-MoE kernel of DeepSeek-R1 at 53 us for one token on B200,
where the weights it reads take 7 us). At a small batch the fused kernels are latency-bound: each thread block
walks the hidden dimension in sequence (the gate/up GEMM's K loop), which tensor parallelism does not shorten, so
the time grows with the hidden size, not with the bytes a GPU reads (Qwen3-30B-A3B at batch 1 steps in 4.5 ms on
2 H100s and on 4). ``moe_hidden_overhead_s`` is that time per MoE layer and forward per 1,024 of the hidden size,
one value per stack for every GPU, fitted on the MoE records of the sources listed, every other parameter as
stage 3 left it; a stack without MoE records takes another's (``borrow``). A single time per layer
(``moe_layer_overhead_s``, the form before) fitted on DeepSeek-R1 put Qwen3-30B-A3B's one-user step 44 % slow.
Every other MoE record is held out, and ``simlab profiles check`` states
each source's error with the stack refitted without it (leave one source out).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

import numpy as np

from simlab.calibration.stages.lsq import rounded
from simlab.calibration.stages.replayed import Replay, fit_replayed
from simlab.calibration.stages.serving import ServingRecord, listed_records, observations, predict
from simlab.hardware.calibration import stack_values
from simlab.hardware.device import RooflineParams
from simlab.hardware.specs import get_model
from simlab.hardware.stacks import get_stack

PARAMETER = "moe_hidden_overhead_s"
X0_US, LOWER_US, UPPER_US = 10.0, 0.0, 200.0  # per 1,024 of the hidden size


def moe_records(records: list[ServingRecord], stack: str, how: dict[str, Any],
                left_out: Optional[str] = None) -> list[ServingRecord]:
    """The records a stack's MoE latency is fitted on: its engine, a mixture of experts, a listed source (and its
    row filter), no speculation, any GPU; without source ``left_out``."""
    return [r for r in listed_records(records, how)
            if r.engine == stack and get_model(r.model).is_moe and r.source != left_out]


def stage3_params(gpus: dict[str, Any], gpu: str, stack: str) -> RooflineParams:
    """The parameters a calibrated roofline of ``stack`` on ``gpu`` takes from stages 1-3."""
    return RooflineParams(**stack_values(gpus[gpu], stack), host_launch_s=get_stack(stack).host_launch_s,
                          calibration="fit")


def fit_overhead(records: list[ServingRecord], gpus: dict[str, Any], stack: str, replay: Optional[Replay] = None
                 ) -> tuple[float, float, float]:
    """(moe_hidden_overhead_s, its standard error, rms log residual) fitted on ``records``; to the engine replay
    when ``replay`` is given (:mod:`simlab.calibration.stages.replayed`)."""
    base = {r.gpu: stage3_params(gpus, r.gpu, stack) for r in records}

    def params(x: np.ndarray, record: ServingRecord) -> RooflineParams:
        return replace(base[record.gpu], moe_hidden_overhead_s=float(x[0]) * 1e-6)

    result = fit_replayed(observations(records), params, predict, [X0_US], [LOWER_US], [UPPER_US], replay).result
    return float(result.x[0]) * 1e-6, float(result.standard_errors[0]) * 1e-6, result.rms_log_residual


def fit_moe(spec_moe: dict[str, Any], gpus: dict[str, Any], records: list[ServingRecord],
            replay: Optional[Replay] = None) -> dict[str, Any]:
    """fitted.yaml's ``moe`` mapping: per stack, in calibration.yaml's order (a borrower after its donor)."""
    out: dict[str, Any] = {}
    for stack, how in spec_moe.items():
        donor = how.get("borrow")
        if donor:
            out[stack] = {PARAMETER: out[donor][PARAMETER], "fitted_on": [], "borrowed": donor}
            if how.get("note"):
                out[stack]["note"] = " ".join(str(how["note"]).split())
            continue
        rows = moe_records(records, stack, how)
        value, standard_error, rms = fit_overhead(rows, gpus, stack, replay)
        out[stack] = {PARAMETER: rounded(value), "standard_error": rounded(standard_error, 3),
                      "rms_log_residual": rounded(rms, 3), "fitted_on": sorted(r.id for r in rows)}
    return out

