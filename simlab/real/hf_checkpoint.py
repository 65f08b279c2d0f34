"""Hugging Face-format Qwen3 checkpoints in a local folder: ``config.json`` plus ``model.safetensors`` or
shards listed in ``model.safetensors.index.json``. Nothing is ever downloaded.

HF parameter names are ours with a leading ``model.`` (except ``lm_head.weight``, which is absent when the
embeddings are tied).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from simlab.real.config import TargetConfig
from simlab.real.target import TargetModel

SUPPORTED_MODEL_TYPES = ("qwen3",)
INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
_IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)
_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64}


def hf_to_local_name(name: str) -> str:
    """``model.layers.0.mlp.up_proj.weight`` -> ``layers.0.mlp.up_proj.weight``."""
    return name[len("model."):] if name.startswith("model.") else name


def local_to_hf_name(name: str) -> str:
    """Inverse of :func:`hf_to_local_name`."""
    return name if name.startswith("lm_head.") else f"model.{name}"


def config_from_hf(data: dict) -> TargetConfig:
    """A :class:`TargetConfig` from a Qwen3 ``config.json`` dict (clear errors for what is not supported)."""
    model_type = data.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ValueError(
            f"config.json model_type {model_type!r} is not supported; valid: {list(SUPPORTED_MODEL_TYPES)}"
        )
    if data.get("rope_scaling"):
        raise ValueError(f"config.json rope_scaling {data['rope_scaling']!r} is not supported (only plain RoPE)")
    hidden, heads = int(data["hidden_size"]), int(data["num_attention_heads"])
    return TargetConfig(
        vocab_size=int(data["vocab_size"]),
        hidden_size=hidden,
        intermediate_size=int(data["intermediate_size"]),
        num_hidden_layers=int(data["num_hidden_layers"]),
        num_attention_heads=heads,
        num_key_value_heads=int(data.get("num_key_value_heads", heads)),
        head_dim=int(data.get("head_dim") or hidden // heads),
        rms_norm_eps=float(data.get("rms_norm_eps", 1e-6)),
        rope_theta=float(data.get("rope_theta", 10_000.0)),
        max_position_embeddings=int(data.get("max_position_embeddings", 40_960)),
        tie_word_embeddings=bool(data.get("tie_word_embeddings", False)),
        attention_bias=bool(data.get("attention_bias", False)),
    )


def config_to_hf(config: TargetConfig, dtype: torch.dtype = torch.bfloat16) -> dict:
    """The ``config.json`` dict of a Qwen3 model with this shape."""
    names = {v: k for k, v in _DTYPES.items()}
    return {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
        "vocab_size": config.vocab_size, "hidden_size": config.hidden_size,
        "intermediate_size": config.intermediate_size, "num_hidden_layers": config.num_hidden_layers,
        "num_attention_heads": config.num_attention_heads, "num_key_value_heads": config.num_key_value_heads,
        "head_dim": config.head_dim, "rms_norm_eps": config.rms_norm_eps, "rope_theta": config.rope_theta,
        "rope_scaling": None, "max_position_embeddings": config.max_position_embeddings,
        "tie_word_embeddings": config.tie_word_embeddings, "attention_bias": config.attention_bias,
        "hidden_act": "silu", "torch_dtype": names.get(dtype, "bfloat16"),
    }


def _shards(folder: Path) -> list[Path]:
    index = folder / INDEX_FILE
    if index.exists():
        weight_map = json.loads(index.read_text())["weight_map"]
        return [folder / name for name in sorted(set(weight_map.values()))]
    single = folder / SINGLE_FILE
    if single.exists():
        return [single]
    found = sorted(folder.glob("*.safetensors"))
    if not found:
        raise FileNotFoundError(f"{folder}: no {INDEX_FILE}, {SINGLE_FILE} or *.safetensors")
    return found


def iter_tensors(path: str | Path) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, tensor) for every tensor of one safetensors file, read one at a time (the ``safetensors`` package)."""
    with safe_open(str(path), framework="pt", device="cpu") as shard:
        for name in shard.keys():
            yield name, shard.get_tensor(name)


def save_tensors(path: str | Path, tensors: dict[str, torch.Tensor]) -> None:
    """Write ``tensors`` to one safetensors file (contiguous CPU copies; ``format: pt`` metadata, as HF writes)."""
    save_file({name: t.detach().to("cpu").contiguous() for name, t in tensors.items()}, str(path),
              metadata={"format": "pt"})


def load_hf_checkpoint(
    folder: str | Path, *, dtype: torch.dtype | None = None, device: torch.device | str = "cpu"
) -> TargetModel:
    """Build a :class:`TargetModel` from a local HF Qwen3 folder, streaming tensors shard by shard.

    The model is constructed on the meta device and materialised on ``device`` in ``dtype`` (default: the
    config's ``torch_dtype``, else float32). Missing or unexpected parameters raise ValueError.
    """
    folder = Path(folder)
    config_path = folder / "config.json"
    if not config_path.exists():
        raise FileNotFoundError(f"{folder}: no config.json")
    data = json.loads(config_path.read_text())
    config = config_from_hf(data)
    dtype = dtype or _DTYPES.get(str(data.get("torch_dtype")), torch.float32)
    with torch.device("meta"):
        model = TargetModel(config)
    # cast while still on meta (free), so that only one copy, in the final dtype, is ever allocated
    model = model.to(dtype).to_empty(device=device)
    model.tie_weights()
    params = dict(model.named_parameters(remove_duplicate=False))
    loaded: set[str] = set()
    for shard in _shards(folder):
        for hf_name, tensor in iter_tensors(shard):
            if hf_name.endswith(_IGNORED_SUFFIXES):
                continue
            name = hf_to_local_name(hf_name)
            if name not in params:
                raise ValueError(f"{shard.name}: unexpected parameter {hf_name!r} for a Qwen3 model")
            if tuple(tensor.shape) != tuple(params[name].shape):
                raise ValueError(f"{shard.name}: {hf_name} has shape {tuple(tensor.shape)}, "
                                 f"expected {tuple(params[name].shape)}")
            with torch.no_grad():
                params[name].copy_(tensor)
            loaded.add(name)
    if config.tie_word_embeddings:
        loaded.add("lm_head.weight")
    missing = sorted(set(params) - loaded)
    if missing:
        raise ValueError(f"{folder}: checkpoint lacks {len(missing)} parameter(s), e.g. {missing[:3]}")
    return model.eval()


def save_hf_checkpoint(
    model: TargetModel, folder: str | Path, *, dtype: torch.dtype | None = None, max_shard_bytes: int | None = None
) -> Path:
    """Write ``model`` as an HF Qwen3 folder (config.json + safetensors; sharded with an index when the
    weights exceed ``max_shard_bytes``)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    dtype = dtype or model.dtype
    tensors = {local_to_hf_name(n): p.detach().to(dtype) for n, p in model.named_parameters()}
    if model.config.tie_word_embeddings:
        tensors.pop("lm_head.weight", None)
    (folder / "config.json").write_text(json.dumps(config_to_hf(model.config, dtype), indent=2))
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    if max_shard_bytes is None or total <= max_shard_bytes:
        save_tensors(folder / SINGLE_FILE, tensors)
        return folder
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for name in sorted(tensors):
        nbytes = tensors[name].numel() * tensors[name].element_size()
        if shards[-1] and size + nbytes > max_shard_bytes:
            shards.append({})
            size = 0
        shards[-1][name] = tensors[name]
        size += nbytes
    weight_map = {}
    for i, shard in enumerate(shards):
        file_name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_tensors(folder / file_name, shard)
        weight_map.update({name: file_name for name in shard})
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (folder / INDEX_FILE).write_text(json.dumps(index, indent=2))
    return folder


__all__ = ["config_from_hf", "config_to_hf", "hf_to_local_name", "iter_tensors", "load_hf_checkpoint",
           "local_to_hf_name", "save_hf_checkpoint", "save_tensors"]
