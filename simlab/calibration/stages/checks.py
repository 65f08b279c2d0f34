"""What a GPU's fit implies, and the reference checks shown beside it (never fitted on).

- :func:`derived_curves`: the corner ``M* = peak x flop_efficiency / (BW x bw_efficiency)`` (the same for every
  model: a GEMM reads 2 bytes per weight and does 2 FLOPs per weight and token) and the effective bandwidth and
  GEMM efficiencies of a decoder-layer GEMM over M tokens, with ``x = M / M*``,
  ``bw_efficiency / knee(1, x, w)`` and ``flop_efficiency x / knee(1, x, w)`` (:mod:`simlab.hardware.knee`).
- :func:`reference_check`: a calibrated roofline against a measured profile's verify grid (for example simlab's
  own H200 profile), at the placement its provenance states (R = ceil(B / q) requests).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from simlab.hardware.buckets import Buckets
from simlab.calibration.stages.lsq import error_summary, rounded
from simlab.hardware.calibrated import CalibratedRooflineCostModel
from simlab.hardware.device import RooflineParams
from simlab.hardware.knee import knee_array
from simlab.hardware.specs import get_gpu, get_model

CURVE_TOKENS = (1, 16, 64, 256, 1024, 4096)


def params_of(entry: dict[str, Any], engine: str) -> RooflineParams:
    """The parameters a fitted.yaml GPU entry gives for ``engine``."""
    values = dict(entry["parameters"])
    values.update({k: v for k, v in entry["engines"][engine].items() if k != "standard_errors"})
    return RooflineParams(**values, calibration=f"check/{engine}")


def derived_curves(gpu_name: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """The corner in tokens and the effective efficiencies at a few token counts (module docstring)."""
    gpu = get_gpu(gpu_name)
    eta_bw, eta_f, width = parameters["bw_efficiency"], parameters["flop_efficiency"], parameters["knee_width"]
    corner = gpu.bf16_flop_per_s * eta_f / (gpu.hbm_bytes_per_s * eta_bw)
    x = np.asarray(CURVE_TOKENS, dtype=float) / corner
    time = knee_array(1.0, x, width)  # in units of the weight-read time
    bandwidth = eta_bw / time
    gemm = eta_f * x / time
    return {"corner_tokens": rounded(corner, 4),
            "tokens": list(CURVE_TOKENS),
            "bandwidth_efficiency": [rounded(v, 3) for v in bandwidth],
            "gemm_efficiency": [rounded(v, 3) for v in gemm]}


def reference_check(check: dict[str, Any], folder: Path, entry: dict[str, Any], engine: str) -> dict[str, Any]:
    """The error of the calibrated roofline (``entry``'s fit for ``engine``) on a measured profile's grid."""
    from simlab.hardware.profiles import load_profile

    profile = load_profile((folder / check["profile"]).resolve())
    gpu, model = get_gpu(check["gpu"]), get_model(check["model"])
    cm = CalibratedRooflineCostModel(gpu, model, params=params_of(entry, engine), buckets=Buckets(None))
    verify = profile.config.verify
    q = float(check.get("query_tokens_per_request", 1))
    batch = np.asarray(verify.batch_tokens, dtype=float)
    contexts = verify.context_tokens or [0]
    measured = np.asarray(verify.step_s if verify.context_tokens else [verify.step_s], dtype=float)
    requests = np.ceil(batch / q)
    predicted = np.stack([np.asarray(cm.verify_s(batch, np.full(batch.shape, float(c)), requests)) for c in contexts])
    at = {f"B={int(b)}, C={int(contexts[0])}": rounded(predicted[0, i] / measured[0, i], 3)
          for i, b in enumerate(batch) if b in (1.0, 64.0, 512.0, batch[-1])}
    return {"id": check["id"], "note": " ".join(str(check.get("note", "")).split()),
            "engine_parameters": engine, **error_summary(predicted.ravel(), measured.ravel()),
            "predicted_over_measured": at}
