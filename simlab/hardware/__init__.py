"""Hardware cost models: what one target forward and one drafter step cost, in seconds.

- :class:`CostModel` is the interface the engine and the schedulers read (:mod:`simlab.hardware.base`);
- :func:`build_cost_model` turns a scenario's ``hardware`` into one: a cost table
  (:class:`TableCostModel`, from a profile file or inline) or a roofline (:class:`RooflineCostModel`,
  a GPU spec x a model config);
- :mod:`simlab.hardware.export` writes any cost model as a table file or an SGLang SPS table;
- ``simlab profiles`` (:mod:`simlab.hardware.cli`) lists and exports profiles.
"""

from simlab.common.lazy import lazy_exports

_EXPORTS = {
    "DRAFT_METHODS": "simlab.hardware.base", "CostModel": "simlab.hardware.base",
    "Buckets": "simlab.hardware.buckets", "vllm_default_capture_sizes": "simlab.hardware.buckets",
    "build_cost_model": "simlab.hardware.profiles", "load_profile": "simlab.hardware.profiles",
    "shipped_profiles": "simlab.hardware.profiles",
    "RooflineCostModel": "simlab.hardware.roofline", "build_roofline": "simlab.hardware.roofline_build",
    "GPUS": "simlab.hardware.specs", "MODELS": "simlab.hardware.specs", "GpuSpec": "simlab.hardware.specs",
    "ModelConfig": "simlab.hardware.specs",
    "TableCostModel": "simlab.hardware.table",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

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
