"""GPU datasheet figures and public model shapes: the data a roofline is built from.

Sources are cited in docs/hardware.md. Memory sizes are datasheet gigabytes read as GiB (2**30 bytes): HBM
stacks come in binary sizes and the driver reports a little less than that.
"""

from __future__ import annotations

import functools

from simlab.common.errors import InputError
from simlab.hardware.compressed_attention import CompressedAttention
from simlab.hardware.gpu_files import GpuSpec, read_gpu_file, shipped_gpus
from simlab.hardware.model_shape import ModelConfig

GIB = 2**30
BF16_BYTES = 2


MOE_AND_MLA_FIELDS = ("num_experts", "experts_per_token", "moe_intermediate_size", "num_shared_experts",
                      "num_dense_layers", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "v_head_dim",
                      "compressed", "hybrid")


def gpu_fields(gpu: GpuSpec) -> dict:
    """A GPU's datasheet figures as a mapping (what a profile's provenance records): the file it came from, its
    aliases and a vendor of nvidia left out, ``calibrated_like`` and ``peer_bytes_per_s`` only where set."""
    from dataclasses import asdict

    fields = asdict(gpu)
    for name in ("aliases", "source_file"):
        del fields[name]
    for name, default in (("vendor", "nvidia"), ("calibrated_like", None), ("peer_bytes_per_s", None)):
        if fields[name] == default:
            del fields[name]
    return fields


def model_fields(model: ModelConfig) -> dict:
    """A model's config as a mapping, without the mixture-of-experts and MLA fields a dense GQA model leaves 0."""
    from dataclasses import asdict

    return {k: v for k, v in asdict(model).items() if not (k in MOE_AND_MLA_FIELDS and v in (0, None))}


def expected_experts(tokens, num_experts: int, experts_per_token: int):
    """The expected number of distinct experts ``tokens`` tokens route to in one MoE layer, each choosing
    ``experts_per_token`` of ``num_experts`` uniformly and independently: ``E (1 - (1 - k/E)^B)`` (an expert is
    missed by one token with probability ``1 - k/E``). One token: exactly k; many: all E. Works on arrays."""
    import numpy as np

    miss = 1.0 - experts_per_token / num_experts
    return num_experts * (1.0 - np.power(miss, np.maximum(tokens, 0.0)))


GPUS: dict[str, GpuSpec] = shipped_gpus()  # hw_profiles/gpus/*.yaml (simlab.hardware.gpu_files)

MODELS: dict[str, ModelConfig] = {
    cfg.name: cfg
    for cfg in (
        ModelConfig("qwen3-4b", "Qwen/Qwen3-4B", 36, 2560, 32, 8, 128, 9728, 151936, True, True),
        ModelConfig("qwen3-8b", "Qwen/Qwen3-8B", 36, 4096, 32, 8, 128, 12288, 151936, False, True),
        ModelConfig("qwen3-14b", "Qwen/Qwen3-14B", 40, 5120, 40, 8, 128, 17408, 151936, False, True),
        ModelConfig("qwen3-32b", "Qwen/Qwen3-32B", 64, 5120, 64, 8, 128, 25600, 151936, False, True),
        ModelConfig("llama-3.1-8b", "meta-llama/Llama-3.1-8B", 32, 4096, 32, 8, 128, 14336, 128256, False, False),
        ModelConfig("llama-3-70b", "meta-llama/Meta-Llama-3-70B", 80, 8192, 64, 8, 128, 28672, 128256, False, False),
        # small models people draft with (method draft_model): their public config.json
        ModelConfig("qwen3-0.6b", "Qwen/Qwen3-0.6B", 28, 1024, 16, 8, 128, 3072, 151936, True, True),
        ModelConfig("qwen3-1.7b", "Qwen/Qwen3-1.7B", 28, 2048, 16, 8, 128, 6144, 151936, True, True),
        ModelConfig("llama-3.2-1b", "meta-llama/Llama-3.2-1B", 16, 2048, 32, 8, 64, 8192, 128256, True, False),
        ModelConfig("llama-3.2-3b", "meta-llama/Llama-3.2-3B", 28, 3072, 24, 8, 128, 8192, 128256, True, False),
        # mixtures of experts (config.json of each: moe_intermediate_size, num_experts, num_experts_per_tok, ...)
        ModelConfig("qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B", 48, 2048, 32, 4, 128, 6144, 151936, False, True,
                    num_experts=128, experts_per_token=8, moe_intermediate_size=768),
        ModelConfig("qwen3-235b-a22b", "Qwen/Qwen3-235B-A22B", 94, 4096, 64, 4, 128, 12288, 151936, False, True,
                    num_experts=128, experts_per_token=8, moe_intermediate_size=1536),
        # DeepSeek-V3 (and R1): MLA (q_lora 1536, kv_lora 512, qk nope 128 + rope 64, v 128), 3 dense layers of
        # 18432, then 256 routed experts of 2048 (8 a token) and one shared; head_dim is MLA's qk_nope_head_dim
        ModelConfig("deepseek-v3", "deepseek-ai/DeepSeek-V3", 61, 7168, 128, 128, 128, 18432, 129280, False, False,
                    num_experts=256, experts_per_token=8, moe_intermediate_size=2048, num_shared_experts=1,
                    num_dense_layers=3, kv_lora_rank=512, q_lora_rank=1536, qk_rope_head_dim=64, v_head_dim=128),
        # DeepSeek-V4 (docs/research/deepseek-v4-configs.md): one shared 512-wide KV head (448 + 64 rope), a
        # 128-token window in every layer, CSA (ratio 4, indexer top-k) and HCA (ratio 128) layers; no dense
        # layers (the first 3 route by token hash); intermediate_size is SGLang's default (no layer uses it)
        ModelConfig("deepseek-v4-flash", "deepseek-ai/DeepSeek-V4-Flash", 43, 4096, 64, 1, 512, 2048, 129280, False,
                    False, num_experts=256, experts_per_token=6, moe_intermediate_size=2048, num_shared_experts=1,
                    q_lora_rank=1024, qk_rope_head_dim=64,
                    compressed=CompressedAttention(num_csa_layers=21, num_hca_layers=20, index_topk=512,
                                                   o_groups=8)),
        ModelConfig("deepseek-v4-pro", "deepseek-ai/DeepSeek-V4-Pro", 61, 7168, 128, 1, 512, 3072, 129280, False,
                    False, num_experts=384, experts_per_token=6, moe_intermediate_size=3072, num_shared_experts=1,
                    q_lora_rank=1536, qk_rope_head_dim=64,
                    compressed=CompressedAttention(num_csa_layers=30, num_hca_layers=31, index_topk=1024,
                                                   o_groups=16)),
    )
}

_GPU_ALIASES = {alias: spec.name for spec in GPUS.values() for alias in spec.aliases}


def get_gpu(name: str, *, file: str | None = None, field: str = "hardware.gpu") -> GpuSpec:
    """The spec of GPU ``name``: a shipped GPU's name or alias (case-insensitive; ``h100``), or a path to a GPU file
    (hw_profiles/gpus/README.md), relative to ``file``'s folder (the scenario's)."""
    key = name.strip().lower()
    key = _GPU_ALIASES.get(key, key)
    if key in GPUS:
        return GPUS[key]
    from pathlib import Path

    path = Path(name.strip()).expanduser()
    if not path.is_absolute() and file:
        path = Path(file).parent / path
    if path.suffix.lower() in (".yaml", ".yml") and path.is_file():
        return _gpu_from_file(str(path.resolve()), path.stat().st_mtime_ns)
    raise InputError("unknown GPU", file=file, field=field, value=name,
                     valid=", ".join(GPUS) + ", or a path to a GPU file (hw_profiles/gpus/README.md)")


def gpu_reference(gpu: GpuSpec) -> str:
    """What names ``gpu`` from any process: a shipped GPU's name, a user's GPU file by its absolute path."""
    return gpu.name if gpu.name in GPUS else str(gpu.source_file)


def file_label(text: str) -> str:
    """A short label for a GPU or model that may be a path: a file's stem (a config.json: its folder's name)."""
    from pathlib import Path

    if "/" not in text and "\\" not in text:
        return text
    path = Path(text)
    return path.parent.name if path.name == "config.json" else path.stem


@functools.lru_cache(maxsize=64)
def _gpu_from_file(path: str, mtime_ns: int) -> GpuSpec:
    from pathlib import Path

    del mtime_ns  # part of the cache key: an edited file is read again
    return read_gpu_file(Path(path))


def get_model(name: str, *, file: str | None = None, field: str = "hardware.model") -> ModelConfig:
    """The config of model ``name``: a short name (``qwen3-8b``), its Hugging Face id (case-insensitive), or a path
    to a Hugging Face ``config.json`` or a folder holding one, relative to ``file``'s folder (the scenario's)."""
    key = name.strip().lower()
    by_hf_id = {cfg.hf_id.lower(): cfg.name for cfg in MODELS.values()}
    key = by_hf_id.get(key, key)
    if key in MODELS:
        return MODELS[key]
    from pathlib import Path

    from simlab.hardware.hf_config import find_config_file

    base_dir = Path(file).parent if file else None
    path = find_config_file(name.strip(), base_dir)
    if path is None:
        raise InputError("unknown model", file=file, field=field, value=name,
                         valid=", ".join(MODELS) + ", or a path to a Hugging Face config.json or a folder with one")
    return _model_from_config(str(path), path.stat().st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _model_from_config(path: str, mtime_ns: int) -> ModelConfig:
    from simlab.hardware.hf_config import read_config_file
    from simlab.hardware.model_description import roofline_shape

    del mtime_ns  # part of the cache key: an edited file is read again
    from pathlib import Path

    return roofline_shape(read_config_file(Path(path)), file=path, name=path)
