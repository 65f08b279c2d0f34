"""The models a profile measures: ``--model`` and ``--drafter`` resolved to a target and a drafter on a device.

``--model``: a preset name (random weights), ``pair`` (the shipped pair, the default), or a folder: a pair folder
(``target/`` + ``drafter/``) or a Hugging Face Qwen3 checkpoint (``config.json`` + safetensors).
``--drafter``: a drafter folder (``config.json`` + ``model.safetensors``) or a shape ``[dspark|dflash][:LAYERS]``
(random weights, the preset drafter of the target with that layout and depth).

Random weights are built on the meta device and materialised directly on the target device in the target dtype,
so a Qwen3-8B shape never exists in float32 on the host. Anything wrong is an :class:`InputError` naming the
option.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import torch
from torch import nn

from simlab.common.errors import InputError
from simlab.real.config import TARGET_PRESETS, DrafterConfig, TargetConfig, default_drafter_config
from simlab.real.drafter import Drafter
from simlab.real.layers import RMSNorm
from simlab.real.target import INIT_STD, TargetModel

PAIR_NAME = "pair"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
MODEL_VALID = (f"a preset ({', '.join(TARGET_PRESETS)}; random weights), {PAIR_NAME} (the shipped pair), "
               "or a folder: a pair (target/ + drafter/) or a Hugging Face Qwen3 checkpoint (config.json)")
DRAFTER_VALID = ("a drafter folder (config.json + model.safetensors), or a shape [dspark|dflash][:LAYERS] "
                 "such as dspark:5 or 5 (random weights)")
_SHAPE = re.compile(r"^(?:(dspark|dflash)(?::(\d+))?|(\d+))$")


@dataclass
class ProfiledModels:
    """A target and its drafter (None when profiling the target alone), with where each came from."""

    target: TargetModel
    drafter: Optional[Drafter]
    target_source: str
    drafter_source: str

    def describe(self) -> dict[str, Any]:
        """JSON-ready model and drafter configs with their sources and parameter counts."""
        out: dict[str, Any] = {
            "model": {"source": self.target_source, "config": self.target.config.to_dict(),
                      "num_parameters": _num_parameters(self.target)},
        }
        if self.drafter is not None:
            out["drafter"] = {"source": self.drafter_source, "config": self.drafter.config.to_dict(),
                              "num_parameters": _num_parameters(self.drafter)}
        return out


def resolve_device(text: str) -> torch.device:
    """``cpu``, ``cuda`` or ``cuda:N``; CUDA must be available."""
    if text == "cpu":
        return torch.device("cpu")
    if re.fullmatch(r"cuda(:\d+)?", text):
        if not torch.cuda.is_available():
            raise InputError("CUDA is not available on this machine (torch sees no GPU)", field="--device",
                             value=text, valid="cpu here; cuda needs a CUDA build of torch and a visible GPU")
        device = torch.device(text)
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise InputError("no such GPU", field="--device", value=text,
                             valid=f"cuda:0 .. cuda:{torch.cuda.device_count() - 1}")
        return device
    raise InputError("unknown device", field="--device", value=text, valid="cpu, cuda or cuda:N")


def resolve_dtype(text: str, device: torch.device) -> torch.dtype:
    """``auto`` (bfloat16 on CUDA, float32 on CPU) or a dtype name."""
    if text == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if text not in DTYPES:
        raise InputError("unknown dtype", field="--dtype", value=text, valid=f"auto, {', '.join(DTYPES)}")
    return DTYPES[text]


def load_models(model: Optional[str], drafter: Optional[str], *, device: torch.device, dtype: torch.dtype,
                seed: int = 0) -> ProfiledModels:
    """The target ``model`` names and its drafter (see the module docstring)."""
    from simlab.real.pair import default_pair_dir, load_drafter, load_pair

    name = model or PAIR_NAME
    pair_drafter: Optional[Drafter] = None
    if name in TARGET_PRESETS:
        config = TARGET_PRESETS[name]
        _check_fits(config, dtype, device)
        target = random_target(config, device=device, dtype=dtype, seed=seed)
        source = f"preset {name} (random weights)"
    else:
        folder = default_pair_dir() if name == PAIR_NAME else Path(name).expanduser()
        if name == PAIR_NAME and not (folder / "target" / "config.json").exists():
            raise InputError(f"the shipped pair is missing from {folder}", field="--model", value=name,
                             valid=MODEL_VALID)
        if not folder.is_dir():
            raise InputError("not a preset, and no such folder", field="--model", value=name, valid=MODEL_VALID)
        try:
            if (folder / "target" / "config.json").exists():
                loaded = load_pair(folder, dtype=dtype, device=device)
                target, pair_drafter = loaded.target, loaded.drafter
                source = f"pair {folder}"
            elif (folder / "config.json").exists():
                from simlab.real.hf_checkpoint import load_hf_checkpoint

                target = load_hf_checkpoint(folder, dtype=dtype, device=device)
                target.requires_grad_(False)
                source = f"checkpoint {folder}"
            else:
                raise InputError("the folder holds neither config.json nor target/config.json", field="--model",
                                 value=name, valid=MODEL_VALID)
        except (FileNotFoundError, ValueError, KeyError, RuntimeError, json.JSONDecodeError) as error:
            raise InputError(f"cannot load it: {error}", field="--model", value=name, valid=MODEL_VALID) from None
    if drafter is None:
        if pair_drafter is not None:
            return ProfiledModels(target, pair_drafter, source, f"the pair's drafter ({source})")
        config = default_drafter_config(target.config)
        return ProfiledModels(target, random_drafter(config, target, seed=seed + 1), source,
                              f"preset drafter of the target: {config.layout}, {config.num_hidden_layers} layers "
                              "(random weights)")
    shape = _SHAPE.match(drafter)
    if shape:
        config = drafter_shape(target.config, shape.group(1) or "dspark", int(shape.group(2) or shape.group(3) or 0))
        return ProfiledModels(target, random_drafter(config, target, seed=seed + 1), source,
                              f"{drafter}: {config.layout}, {config.num_hidden_layers} layers (random weights)")
    folder = Path(drafter).expanduser()
    if not (folder / "config.json").exists():
        raise InputError("not a drafter shape, and no drafter folder there", field="--drafter", value=drafter,
                         valid=DRAFTER_VALID)
    try:
        loaded_drafter = load_drafter(folder, target, dtype=dtype)
    except (FileNotFoundError, ValueError, KeyError, TypeError, RuntimeError, json.JSONDecodeError) as error:
        raise InputError(f"cannot load it for this target: {error}", field="--drafter", value=drafter,
                         valid=DRAFTER_VALID) from None
    for p in loaded_drafter.parameters():
        p.requires_grad_(False)
    return ProfiledModels(target, loaded_drafter, source, f"folder {folder}")


def drafter_shape(target: TargetConfig, layout: str, num_layers: int) -> DrafterConfig:
    """The target's preset drafter with ``layout`` and ``num_layers`` draft layers (0: the preset's depth)."""
    base = default_drafter_config(target, layout=layout)  # type: ignore[arg-type]
    if layout == "dflash":  # DFlash has neither the Markov head nor the confidence head
        base = dataclasses.replace(base, markov_rank=0, confidence_head=False)
    return dataclasses.replace(base, num_hidden_layers=num_layers) if num_layers > 0 else base


def random_target(config: TargetConfig, *, device: torch.device, dtype: torch.dtype, seed: int) -> TargetModel:
    """A target with random weights, built on the meta device and materialised on ``device``."""
    with torch.device("meta"):
        target = TargetModel(config)
    target = _materialise(target, device=device, dtype=dtype, seed=seed)
    target.tie_weights()
    return target


def random_drafter(config: DrafterConfig, target: TargetModel, *, seed: int) -> Drafter:
    """A drafter with random weights for ``target`` (on its device, in its dtype)."""
    with torch.device("meta"):
        drafter = Drafter(config, target.config)
    return _materialise(drafter, device=target.device, dtype=target.dtype, seed=seed)


def _materialise(module: nn.Module, *, device: torch.device, dtype: torch.dtype, seed: int):
    """Allocate ``module``'s meta parameters on ``device`` and fill them: norms 1, everything else N(0, 0.02)."""
    module = module.to(dtype=dtype).to_empty(device=device)
    generator = torch.Generator(device=device).manual_seed(seed)
    norms = {id(m.weight) for m in module.modules() if isinstance(m, RMSNorm)}
    with torch.no_grad():
        for param in module.parameters():
            if id(param) in norms:
                param.fill_(1.0)
            else:
                param.normal_(0.0, INIT_STD, generator=generator)
            param.requires_grad_(False)
    return module.eval()


def _num_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _check_fits(config: TargetConfig, dtype: torch.dtype, device: torch.device) -> None:
    """Refuse a preset whose weights would not fit in the device's free memory (before allocating anything)."""
    need = config.num_parameters * torch.empty((), dtype=dtype).element_size()
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        where = f"free on {torch.cuda.get_device_name(device)}"
    else:
        free = _available_host_bytes()
        where = "of available host memory"
        if free is None:
            return
    if need > 0.8 * free:
        raise InputError(f"its weights need {need / 2**30:.1f} GiB in {str(dtype).replace('torch.', '')}, "
                         f"{free / 2**30:.1f} GiB {where}", field="--model",
                         valid="a smaller preset (tiny, small), another --dtype, or a larger device")


def _available_host_bytes() -> Optional[int]:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def cpu_description() -> str:
    """The CPU model name (Linux), else the platform's processor string."""
    import platform

    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_count() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


__all__ = [
    "DTYPES", "PAIR_NAME", "ProfiledModels", "cpu_count", "cpu_description", "drafter_shape", "load_models",
    "random_drafter", "random_target", "resolve_device", "resolve_dtype",
]
