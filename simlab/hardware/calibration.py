"""Which calibration a roofline uses, and its fitted values (hw_profiles/calibration/fitted.yaml).

``hardware: {kind: roofline, gpu, model}`` is calibrated by default: ``calibration: auto`` takes the GPU's fit for
the default engine (vLLM), ``calibration: ENGINE`` another engine's step overheads, ``calibration: none`` the old
constant efficiencies. Any tuning parameter given in the config overrides the fitted value. The fit itself is made
by ``scripts/calibrate_hardware.py`` (:mod:`simlab.hardware.calfit`) from the measurements listed in
hw_profiles/calibration/SOURCES.md.
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

AUTO = "auto"
NONE = "none"
FITTED_FILE = Path("calibration") / "fitted.yaml"
CALIBRATED_ONLY = ("request_overhead_s", "knee_width", "elementwise_efficiency", "attention_efficiency")
FITTED_PARAMETERS = ("bw_efficiency", "flop_efficiency", "knee_width", "elementwise_efficiency",
                     "kernel_launch_s", "attention_efficiency")
ENGINE_PARAMETERS = ("step_overhead_s", "request_overhead_s")
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


def engines(gpu: str, fitted: Optional[dict[str, Any]] = None) -> list[str]:
    """The engines whose step overheads were fitted for ``gpu`` (empty for a GPU without a fit)."""
    entry = (fitted or load_fitted())["gpus"].get(gpu)
    return list(entry["engines"]) if entry else []


def calibration_entry(gpu: str, fitted: Optional[dict[str, Any]] = None) -> Optional[dict[str, Any]]:
    """The fit's record for ``gpu``: parameters, engines, where they came from, the stated error."""
    return (fitted or load_fitted())["gpus"].get(gpu)


def fitted_values(gpu: str, choice: str, *, file: Optional[str] = None, field: str = "hardware.calibration"
                  ) -> dict[str, Any]:
    """The parameters of ``gpu``'s calibration ``choice`` (auto or an engine), with ``calibration`` set to its
    label ``GPU/ENGINE``. An unknown choice raises :class:`InputError` listing the valid ones."""
    fitted = load_fitted()
    entry = calibration_entry(gpu, fitted)
    engine = fitted.get("default_engine", "vllm") if choice == AUTO else choice
    if entry is None or engine not in entry["engines"]:
        known = engines(gpu, fitted)
        valid = ", ".join([AUTO, NONE] + known) if known else NONE
        problem = ("no calibration of that name for this GPU" if entry else
                   "this GPU has no calibration; use the constant efficiencies")
        raise InputError(problem, file=file, field=field, value=choice, valid=valid)
    values = {name: float(entry["parameters"][name]) for name in FITTED_PARAMETERS}
    values.update({name: float(entry["engines"][engine][name]) for name in ENGINE_PARAMETERS})
    values["calibration"] = f"{gpu}/{engine}"
    return values


def resolve_params(cfg: RooflineHardware, gpu: str, *, file: Optional[str] = None, field: str = "hardware"
                   ) -> RooflineParams:
    """The roofline parameters in force: the config's values over the calibration's (or the constants')."""
    given = {name: getattr(cfg, name) for name in _PARAM_FIELDS if getattr(cfg, name, None) is not None}
    choice = cfg.calibration.strip().lower()
    sub = f"{field}.calibration" if field else "calibration"
    if choice == NONE:
        for name in CALIBRATED_ONLY:
            if name in given:
                raise InputError("applies only to a calibrated roofline", file=file,
                                 field=f"{field}.{name}" if field else name, value=given[name],
                                 valid="leave it out with calibration: none, or set calibration: auto")
        return RooflineParams(**given)
    return RooflineParams(**{**fitted_values(gpu, choice, file=file, field=sub), **given})
