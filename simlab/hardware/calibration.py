"""Which calibration a roofline uses, and its fitted values (hw_profiles/calibration/fitted.yaml).

``hardware: {kind: roofline, gpu, model, stack}`` is calibrated by default: ``calibration: auto`` takes the GPU's
fit (its operator-level efficiencies) with the stack's fitted host overheads and attention efficiency,
``calibration: none`` the old constant efficiencies. Any tuning parameter given in the config overrides the fitted
value. The fit itself is made by ``scripts/calibrate_hardware.py`` (:mod:`simlab.calibration.stages`) from the
measurements listed in hw_profiles/calibration/SOURCES.md.
"""

from __future__ import annotations

from dataclasses import fields
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

import yaml

from simlab.common.errors import InputError
from simlab.common.resources import shipped_dir
from simlab.config.hardware import RooflineHardware
from simlab.hardware.device import RooflineParams
from simlab.hardware.stacks import get_stack

AUTO = "auto"
NONE = "none"
ENGINE_NAMES = ("vllm", "sglang", "trtllm", "tensorrt-llm", "eager")  # what calibration: used to name
FITTED_FILE = Path("calibration") / "fitted.yaml"
CALIBRATED_ONLY = ("request_overhead_s", "knee_width", "elementwise_efficiency", "attention_efficiency",
                   "quantized_efficiency", "prefill_efficiency")
FITTED_PARAMETERS = ("bw_efficiency", "flop_efficiency", "knee_width", "elementwise_efficiency",
                     "kernel_launch_s", "attention_efficiency")
# fitted per GPU and serving stack on engine measurements (stage 3)
STACK_PARAMETERS = ("step_overhead_s", "request_overhead_s", "attention_efficiency", "prefill_efficiency",
                    "quantized_efficiency")
# fitted per serving stack, for every GPU, on mixture-of-experts engine measurements (stage 4; the first is 0 in
# the fit, kept for configs that set it)
MOE_PARAMETERS = ("moe_layer_overhead_s", "moe_hidden_overhead_s")
# fitted per serving stack, for every GPU, on speculative engine measurements (stage 5)
SPECULATIVE_PARAMETERS = ("spec_round_overhead_s", "draft_forward_overhead_s")
_PARAM_FIELDS = tuple(f.name for f in fields(RooflineParams) if f.name != "calibration")


def fitted_path() -> Path:
    """The shipped fit: hw_profiles/calibration/fitted.yaml."""
    return shipped_dir("hw_profiles") / FITTED_FILE


@lru_cache(maxsize=4)
def _read_fitted(path: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"the calibrated roofline's fit cannot be read ({exc.strerror or exc})", file=path,
                         valid="run `python scripts/make_profiles.py`, or use calibration: none") from None
    if not isinstance(data, dict) or not isinstance(data.get("gpus"), dict):
        raise InputError("not a calibration fit", file=path, valid="the file scripts/calibrate_hardware.py writes")
    return data


def forget_fitted() -> None:
    """Drop the cached fit (after scripts/calibrate_hardware.py rewrote it)."""
    _read_fitted.cache_clear()


def load_fitted(path: Optional[Path] = None) -> dict[str, Any]:
    """The fit as written by scripts/calibrate_hardware.py (cached; treat as read-only)."""
    return _read_fitted(str(path or fitted_path()))


def stacks(gpu: str, fitted: Optional[dict[str, Any]] = None) -> list[str]:
    """The serving stacks calibrated for ``gpu`` (empty for a GPU without a fit)."""
    entry = (fitted or load_fitted())["gpus"].get(gpu)
    return list(entry.get("stacks") or ()) if entry else []


def calibration_entry(gpu: str, fitted: Optional[dict[str, Any]] = None) -> Optional[dict[str, Any]]:
    """The fit's record for ``gpu``: parameters, engines, where they came from, the stated error."""
    return (fitted or load_fitted())["gpus"].get(gpu)


DEFAULT_FIT_GPU = "h100-sxm"


def fit_gpu(gpu) -> str:
    """The GPU whose fit a roofline on ``gpu`` (a GpuSpec) takes: its own, else the one its GPU file names
    (``calibrated_like``; docs/gpus.md), else the H100's (the GPU with the most public engine runs)."""
    if gpu.name in load_fitted()["gpus"]:
        return gpu.name
    return gpu.calibrated_like or DEFAULT_FIT_GPU


def fitted_values(gpu: str, stack: str, *, file: Optional[str] = None, field: str = "hardware.stack"
                  ) -> dict[str, Any]:
    """The calibrated parameters of ``stack`` on ``gpu``, with ``calibration`` set to its label ``GPU/STACK``. A
    stack the fit has none for raises :class:`InputError` listing the valid ones."""
    fitted = load_fitted()
    entry = calibration_entry(gpu, fitted)
    if entry is None or stack not in (entry.get("stacks") or {}):
        known = stacks(gpu, fitted)
        problem = ("no calibration of this serving stack on this GPU" if entry else
                   "this GPU has no calibration; use the constant efficiencies (calibration: none)")
        raise InputError(problem, file=file, field=field, value=stack, valid=", ".join(known) or "calibration: none")
    values = stack_values(entry, stack)
    # stage 4: the stack's routed-expert kernels; stage 5: its host time of speculative decoding (one value for
    # every GPU each)
    values.update(stage_values(fitted.get("moe"), stack, MOE_PARAMETERS))
    values.update(stage_values(fitted.get("speculative"), stack, SPECULATIVE_PARAMETERS))
    values["calibration"] = f"{gpu}/{stack}"
    return values


def stage_values(stage: Optional[dict[str, Any]], stack: str, names: tuple[str, ...]) -> dict[str, float]:
    """A later stage's values for ``stack`` (fitted.yaml's ``moe`` or ``speculative`` block, or the fit's own
    before it is written): 0 where the fit has none. The one reader of those blocks."""
    fitted = (stage or {}).get(stack) or {}
    return {name: float(fitted.get(name, 0.0)) for name in names}


def stack_values(entry: dict[str, Any], stack: str) -> dict[str, float]:
    """A GPU entry's operator-level parameters with ``stack``'s (stages 1-3 of the fit)."""
    values = {name: float(entry["parameters"][name]) for name in FITTED_PARAMETERS}
    values.update({name: float(entry["stacks"][stack][name]) for name in STACK_PARAMETERS})
    return values


def resolve_params(cfg: RooflineHardware, gpu: str, *, file: Optional[str] = None, field: str = "hardware"
                   ) -> RooflineParams:
    """The roofline parameters in force: the config's values over the calibration's (or the constants')."""
    given = {name: getattr(cfg, name) for name in _PARAM_FIELDS if getattr(cfg, name, None) is not None}
    stack = {"host_launch_s": get_stack(cfg.stack).host_launch_s}
    choice = cfg.calibration.strip().lower()
    if choice == NONE:
        for name in CALIBRATED_ONLY:
            if name in given:
                raise InputError("applies only to a calibrated roofline", file=file,
                                 field=f"{field}.{name}" if field else name, value=given[name],
                                 valid="leave it out with calibration: none, or set calibration: auto")
        return RooflineParams(**{**stack, **given})
    if choice != AUTO:
        why = ("the serving engine is chosen by stack: now" if choice in ENGINE_NAMES
               else "unknown calibration")
        raise InputError(why, file=file, field=f"{field}.calibration" if field else "calibration",
                         value=cfg.calibration,
                         valid="auto (the GPU's fit for the stack) or none (the constant efficiencies); "
                               "the engine: stack: vllm | sglang | trtllm | eager")
    sub = f"{field}.stack" if field else "stack"
    return RooflineParams(**{**stack, **fitted_values(gpu, cfg.stack, file=file, field=sub), **given})
