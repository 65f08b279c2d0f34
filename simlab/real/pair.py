"""A target + drafter pair on disk.

Layout of a pair folder::

    target/config.json, target/model.safetensors    the target as a Hugging Face Qwen3 checkpoint
    drafter/config.json, drafter/model.safetensors  the drafter (its own weights only; it shares the target's
                                                    embedding and LM head)
    metrics.json                                    how it was made and what it measured (optional)

The shipped pair lives in the repository's ``real_pair/`` (or ``simlab/_shipped/real_pair`` in a wheel);
``SIMLAB_REAL_PAIR`` overrides where :func:`default_pair_dir` looks.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from simlab.real.config import DrafterConfig
from simlab.real.drafter import Drafter
from simlab.real.hf_checkpoint import iter_tensors, load_hf_checkpoint, save_hf_checkpoint, save_tensors
from simlab.real.target import TargetModel
from simlab.real.tokenizer import ByteTokenizer

PAIR_ENV = "SIMLAB_REAL_PAIR"


@dataclass
class Pair:
    """A loaded pair: the target, its drafter, the tokenizer and the folder's metrics (may be empty)."""

    target: TargetModel
    drafter: Drafter
    tokenizer: ByteTokenizer
    metrics: dict

    def prior_confidence(self, temperature: float, gamma: int) -> list[float]:
        """The confidence head's mean c_1..c_gamma that the pair's measurement recorded at the temperature nearest
        ``temperature`` (the last position repeated beyond what was measured; 0.5 where nothing was): what a
        lagged scheduler reads for a request younger than its lag."""
        recorded = {float(t): v.get("mean_confidence") for t, v in (self.metrics.get("tau") or {}).items()}
        recorded = {t: v for t, v in recorded.items() if v}
        if not recorded:
            return [0.5] * gamma
        values = recorded[min(recorded, key=lambda t: abs(t - temperature))]
        return [float(values[min(k, len(values) - 1)]) for k in range(gamma)]


def default_pair_dir() -> Path:
    """Where the shipped pair is: $SIMLAB_REAL_PAIR, else the installed copy, else the repository's real_pair/."""
    if os.environ.get(PAIR_ENV):
        return Path(os.environ[PAIR_ENV])
    package = Path(__file__).resolve().parents[1]
    for candidate in (package / "_shipped" / "real_pair", package.parent / "real_pair"):
        if (candidate / "target" / "config.json").exists():
            return candidate
    return package.parent / "real_pair"


def save_pair(folder: str | Path, target: TargetModel, drafter: Drafter, *, dtype: torch.dtype = torch.bfloat16,
              metrics: dict | None = None) -> Path:
    """Write a pair folder with weights in ``dtype``."""
    folder = Path(folder)
    save_hf_checkpoint(target, folder / "target", dtype=dtype)
    (folder / "drafter").mkdir(parents=True, exist_ok=True)
    (folder / "drafter" / "config.json").write_text(json.dumps(drafter.config.to_dict(), indent=2))
    tensors = {name: p.detach().to(dtype) for name, p in drafter.state_dict().items()}
    save_tensors(folder / "drafter" / "model.safetensors", tensors)
    if metrics is not None:
        (folder / "metrics.json").write_text(json.dumps(metrics, indent=2))
    return folder


def load_drafter(folder: str | Path, target: TargetModel, *, dtype: torch.dtype | None = None) -> Drafter:
    """The drafter in ``folder`` (config.json + model.safetensors) for ``target``."""
    folder = Path(folder)
    config = DrafterConfig.from_dict(json.loads((folder / "config.json").read_text()))
    drafter = Drafter(config, target.config).to(device=target.device, dtype=dtype or target.dtype)
    state = dict(iter_tensors(folder / "model.safetensors"))
    expected = set(drafter.state_dict())
    if set(state) != expected:
        raise ValueError(f"{folder}: drafter weights differ from its config: missing {sorted(expected - set(state))}, "
                         f"unexpected {sorted(set(state) - expected)}")
    drafter.load_state_dict(state)
    return drafter.eval()


def load_pair(folder: str | Path | None = None, *, dtype: torch.dtype = torch.float32,
              device: torch.device | str = "cpu") -> Pair:
    """Load a pair folder (default: :func:`default_pair_dir`) with weights cast to ``dtype``."""
    folder = Path(folder) if folder is not None else default_pair_dir()
    if not (folder / "target" / "config.json").exists():
        raise FileNotFoundError(f"no trained pair in {folder} (make one with `simlab real train --out {folder}`)")
    target = load_hf_checkpoint(folder / "target", dtype=dtype, device=device)
    for p in target.parameters():
        p.requires_grad_(False)
    drafter = load_drafter(folder / "drafter", target, dtype=dtype)
    for p in drafter.parameters():
        p.requires_grad_(False)
    metrics_path = folder / "metrics.json"
    metrics = json.loads(metrics_path.read_text()) if metrics_path.exists() else {}
    return Pair(target=target, drafter=drafter, tokenizer=ByteTokenizer(), metrics=metrics)


__all__ = ["PAIR_ENV", "Pair", "default_pair_dir", "load_drafter", "load_pair", "save_pair"]
