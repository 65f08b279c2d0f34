"""The calibration's inputs: hw_profiles/calibration/calibration.yaml and the measurement files it names.

Each measurement file is a CSV whose first line is ``# source: ID | URL | licence | what was measured`` (its
provenance) followed by a header and rows, exactly as read from the public source.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pandas as pd
import yaml

from simlab.hardware.specs import ModelConfig, get_model

SOURCE_PREFIX = "# source:"
OPERATORS = "operators"
STATIC_BATCH = "static_batch"


@dataclass(frozen=True)
class Source:
    """One measurement file and what the calibration does with it."""

    id: str
    kind: str  # operators | static_batch
    gpu: str
    file: Path
    provenance: str  # the file's first line, without the "# source:" prefix
    frame: pd.DataFrame
    fit: Any  # "all", "none" or a mapping of column -> value selecting the fitted rows
    model: Optional[str] = None  # operators: the model shape profiled
    prefill_chunk_tokens: int = 8192

    def fitted_mask(self) -> pd.Series:
        """Which rows are fitted (the rest are held out)."""
        if self.fit == "all":
            return pd.Series(True, index=self.frame.index)
        if self.fit == "none" or not self.fit:
            return pd.Series(False, index=self.frame.index)
        mask = pd.Series(True, index=self.frame.index)
        for column, value in dict(self.fit).items():
            mask &= self.frame[column] == value
        return mask


@dataclass(frozen=True)
class Spec:
    """calibration.yaml, read."""

    folder: Path
    default_engine: str
    models: dict[str, ModelConfig]
    sources: list[Source]
    gpus: dict[str, dict[str, Any]]
    reference_checks: list[dict[str, Any]]
    serving: Optional[dict[str, Any]] = None  # stage 3: the serving records' file and which stacks fit on what

    def source(self, source_id: str) -> Source:
        return next(s for s in self.sources if s.id == source_id)

    def model(self, name: str) -> ModelConfig:
        """A source model's shape (calibration.yaml ``models``) or a model simlab knows."""
        return self.models[name] if name in self.models else get_model(name)


def read_measurements(path: Path) -> tuple[str, pd.DataFrame]:
    """The provenance line and the rows of one measurement file."""
    with open(path, encoding="utf-8") as fh:
        first = fh.readline().strip()
    if not first.startswith(SOURCE_PREFIX):
        raise ValueError(f"{path}: the first line must be its provenance, '{SOURCE_PREFIX} ID | URL | ...'")
    return first[len(SOURCE_PREFIX):].strip(), pd.read_csv(path, comment="#")


def model_config(name: str, shape: dict[str, Any]) -> ModelConfig:
    """A :class:`ModelConfig` for a source model's public config (no q/k norms)."""
    return ModelConfig(name=name, hf_id=name, qk_norm=False, **shape)


def load_spec(folder: Path) -> Spec:
    """Read ``folder``/calibration.yaml and every measurement file it names."""
    data = yaml.safe_load((folder / "calibration.yaml").read_text(encoding="utf-8"))
    models = {name: model_config(name, shape) for name, shape in data.get("models", {}).items()}
    sources = []
    for entry in data["sources"]:
        path = folder / entry["file"]
        provenance, frame = read_measurements(path)
        if not provenance.startswith(entry["id"]):
            raise ValueError(f"{path}: its provenance names another source than {entry['id']}")
        sources.append(Source(id=entry["id"], kind=entry["kind"], gpu=entry["gpu"], file=path, provenance=provenance,
                              frame=frame, fit=entry.get("fit", "none"), model=entry.get("model"),
                              prefill_chunk_tokens=int(entry.get("prefill_chunk_tokens", 8192))))
    return Spec(folder=folder, default_engine=data.get("default_engine", "vllm"), models=models, sources=sources,
                gpus=data["gpus"], reference_checks=data.get("reference_checks", []), serving=data.get("serving"))
