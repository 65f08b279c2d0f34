"""Hardware cost models: what one target forward and one drafter step cost, in seconds.

- :class:`CostModel` is the interface the engine and the schedulers read (:mod:`simlab.hardware.base`);
- :func:`build_cost_model` turns a scenario's ``hardware`` into one: a cost table
  (:class:`TableCostModel`, from a profile file or inline) or a roofline (:class:`RooflineCostModel`,
  a GPU spec x a model config);
- :mod:`simlab.hardware.export` writes any cost model as a table file or an SGLang SPS table;
- ``simlab profiles`` (:mod:`simlab.hardware.cli`) lists and exports profiles.
"""

from simlab.hardware.base import DRAFT_METHODS, CostModel
from simlab.hardware.buckets import Buckets, vllm_default_capture_sizes
from simlab.hardware.profiles import build_cost_model, load_profile, shipped_profiles
from simlab.hardware.roofline import RooflineCostModel, build_roofline
from simlab.hardware.specs import GPUS, MODELS, GpuSpec, ModelConfig
from simlab.hardware.table import TableCostModel

__all__ = [
    "Buckets",
    "CostModel",
    "DRAFT_METHODS",
    "GPUS",
    "GpuSpec",
    "MODELS",
    "ModelConfig",
    "RooflineCostModel",
    "TableCostModel",
    "build_cost_model",
    "build_roofline",
    "load_profile",
    "shipped_profiles",
    "vllm_default_capture_sizes",
]
