"""Acceptance presets: YAML files of base-logit curves per drafter method and domain, with their defaults.

The shipped files (``qwen3-4b.yaml`` and friends, next to this module) are written by
``scripts/derive_presets.py``; a user may write their own file in the same format and name it by path.
Only ``methods.<method>.<domain>.base_logit`` and the optional ``heterogeneity`` and ``confidence`` are read
by the simulator; every other field documents where the numbers came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from simlab.common.errors import InputError
from simlab.common.resources import is_bare_name, resolve_path
from simlab.common.schema_errors import validate
from simlab.common.yaml_file import read_yaml
from simlab.config.acceptance import ConfidenceConfig, HeterogeneityConfig

PRESET_DIR = Path(__file__).resolve().parent
MAX_POSITIONS = 16


class PresetCurve(BaseModel):
    """One method's curve for one domain: ``base_logit`` L_1..L_n (YAML ``.inf`` for a position that is always
    accepted); other keys are documentation."""

    model_config = ConfigDict(extra="allow", frozen=True)
    base_logit: list[float] = Field(min_length=1, max_length=MAX_POSITIONS)


class PresetFile(BaseModel):
    """The schema of a preset file."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    description: str = ""
    provenance: dict[str, Any] = Field(default_factory=dict)
    extrapolated: dict[str, str] = Field(default_factory=dict)
    heterogeneity: HeterogeneityConfig = HeterogeneityConfig()
    confidence: ConfidenceConfig = ConfidenceConfig()
    shapes: dict[str, dict[str, float]] = Field(default_factory=dict)
    methods: dict[str, dict[str, PresetCurve]] = Field(min_length=1)


@dataclass(frozen=True)
class Preset:
    """A loaded preset: base logits per method and domain, its defaults, and where it came from."""

    name: str
    path: Path
    base_logit: dict[str, dict[str, np.ndarray]]
    heterogeneity: HeterogeneityConfig
    confidence: ConfidenceConfig
    provenance: dict[str, Any]

    @property
    def domains(self) -> list[str]:
        """Domains covered by every method, in file order."""
        methods = list(self.base_logit.values())
        return [d for d in methods[0] if all(d in m for m in methods)] if methods else []


def shipped_presets() -> list[str]:
    """Names of the presets shipped with simlab."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def preset_path(name: str, *, base_dir: Optional[Path] = None) -> Path:
    """A shipped preset's name or any other bare name is a shipped preset; anything else a path (relative to
    ``base_dir``)."""
    if name in shipped_presets() or is_bare_name(name):
        return PRESET_DIR / f"{name}.yaml"
    return resolve_path(name, base_dir or Path.cwd())


def load_preset(
    name: str, *, base_dir: Optional[Path] = None, file: Union[str, Path, None] = None, field: str = "acceptance.name"
) -> Preset:
    """Load a preset by shipped name or path; InputError naming ``file`` and ``field`` when it cannot be used."""
    path = preset_path(name, base_dir=base_dir)
    if not path.is_file():
        shipped = ", ".join(shipped_presets())
        problem = "no such preset" if path.parent == PRESET_DIR else f"no such preset file ({path})"
        raise InputError(
            problem, file=file, field=field, value=name, valid=f"one of {shipped}, or a path to a preset file"
        )
    data = read_yaml(path, what="preset file")
    parsed: PresetFile = validate(PresetFile, data, file=path)
    base_logit = {}
    for method, domains in parsed.methods.items():
        base_logit[method] = {}
        for domain, curve in domains.items():
            values = np.asarray(curve.base_logit, dtype=float)
            if np.isnan(values).any():
                raise InputError("a base logit is NaN", file=path, field=f"methods.{method}.{domain}.base_logit",
                                 valid="numbers, or .inf for a position that is always accepted")
            base_logit[method][domain] = values
    return Preset(
        name=parsed.name,
        path=path,
        base_logit=base_logit,
        heterogeneity=parsed.heterogeneity,
        confidence=parsed.confidence,
        provenance=dict(parsed.provenance),
    )


__all__ = ["PRESET_DIR", "Preset", "PresetFile", "load_preset", "preset_path", "shipped_presets"]
