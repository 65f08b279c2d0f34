"""GPUs as data: one YAML file a GPU, shipped in hw_profiles/gpus/ or given by a path (``gpu: my-gpu.yaml``).

A file holds the datasheet figures a roofline needs, each with its source (docs/gpus.md):

- ``memory_gib``: the memory a process can use, in GiB (the visible capacity where known; else the marketed GB
  read as GiB, as for the first four GPUs);
- ``hbm_bytes_per_s``: memory bandwidth;
- ``bf16_flop_per_s`` (required), ``fp8_flop_per_s``, ``fp4_flop_per_s``: dense tensor peaks, no sparsity;
- ``interconnect_bytes_per_s``: scale-up bandwidth per direction (NVLink: half the bidirectional figure; AMD
  Infinity Fabric: the sum over the links to the other GPUs; PCIe cards: the slot's), and ``peer_bytes_per_s``
  where one GPU pair gets less (AMD: one link);
- ``calibrated_like``: the GPU whose fit to public engine runs the roofline takes (hw_profiles/calibration/
  fitted.yaml has fits for a100-80g, h100-sxm, h200 and b200; left out, h100-sxm's); said in every run's
  provenance.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from pydantic import Field

from simlab.common.errors import InputError
from simlab.common.resources import shipped_dir
from simlab.common.schema_errors import validate
from simlab.common.strict import StrictModel
from simlab.common.yaml_file import read_yaml

GIB = 2**30


@dataclass(frozen=True)
class GpuSpec:
    """One GPU's peak figures (dense tensor-core FLOP/s, no sparsity; None where it has no such tensor cores)."""

    name: str
    hbm_bytes_per_s: float
    bf16_flop_per_s: float
    memory_bytes: int
    nvlink_bytes_per_s: float  # per direction: half the datasheet's bidirectional figure
    description: str
    fp8_flop_per_s: Optional[float] = None
    fp4_flop_per_s: Optional[float] = None
    vendor: str = "nvidia"
    calibrated_like: Optional[str] = None  # the GPU whose fit the roofline takes (None: its own)
    peer_bytes_per_s: Optional[float] = None  # one GPU pair's link, where less than the interconnect's
    aliases: tuple[str, ...] = ()
    source_file: Optional[str] = None  # the GPU file it was read from (hw_profiles/gpus/ or the user's)


class GpuFile(StrictModel):
    """The fields of a GPU file."""

    name: str = Field(min_length=1, max_length=60, pattern=r"^[a-z0-9][a-z0-9._-]*$")
    aliases: list[str] = []
    description: str = Field(min_length=1)
    vendor: str = "nvidia"
    memory_gib: float = Field(gt=0, le=4096)
    hbm_bytes_per_s: float = Field(gt=0)
    bf16_flop_per_s: float = Field(gt=0)
    fp8_flop_per_s: Optional[float] = Field(default=None, gt=0)
    fp4_flop_per_s: Optional[float] = Field(default=None, gt=0)
    interconnect_bytes_per_s: float = Field(gt=0)
    peer_bytes_per_s: Optional[float] = Field(default=None, gt=0)
    calibrated_like: Optional[str] = None
    sources: dict[str, str] = Field(min_length=1)


def gpus_dir() -> Path:
    return shipped_dir("hw_profiles") / "gpus"


def read_gpu_file(path: Path):
    """The :class:`~simlab.hardware.specs.GpuSpec` of a GPU file (an :class:`InputError` naming a bad field)."""
    data = read_yaml(path, what="GPU file")
    if not isinstance(data, dict):
        raise InputError("a GPU file holds one mapping", file=str(path), field="", value=type(data).__name__,
                         valid="name, description, memory_gib, hbm_bytes_per_s, bf16_flop_per_s, "
                               "interconnect_bytes_per_s and sources (docs/gpus.md)")
    gpu = validate(GpuFile, data, file=path)
    return GpuSpec(name=gpu.name, hbm_bytes_per_s=gpu.hbm_bytes_per_s, bf16_flop_per_s=gpu.bf16_flop_per_s,
                   memory_bytes=int(round(gpu.memory_gib * GIB)), nvlink_bytes_per_s=gpu.interconnect_bytes_per_s,
                   description=gpu.description, fp8_flop_per_s=gpu.fp8_flop_per_s,
                   fp4_flop_per_s=gpu.fp4_flop_per_s, vendor=gpu.vendor, calibrated_like=gpu.calibrated_like,
                   peer_bytes_per_s=gpu.peer_bytes_per_s, aliases=tuple(gpu.aliases), source_file=str(path))


def shipped_gpus() -> dict:
    """Every shipped GPU by name, in file order."""
    specs = [read_gpu_file(p) for p in sorted(gpus_dir().glob("*.yaml"))]
    return {spec.name: spec for spec in specs}
