"""A roofline cost model from its config: the GPU and model names, the calibration, tensor parallelism and
whether the model fits are checked here, each failure one message naming the field."""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

from simlab.common.errors import InputError
from simlab.config.hardware import RooflineHardware
from simlab.hardware.buckets import Buckets
from simlab.hardware.calibrated import CalibratedRooflineCostModel
from simlab.hardware.calibration import fit_gpu, resolve_params
from simlab.hardware.device import RooflineParams
from simlab.hardware.precision import WEIGHT_BYTES, check_precision, peak_flop_per_s
from simlab.hardware.releases import get_release
from simlab.hardware.roofline import RooflineCostModel
from simlab.hardware.specs import GpuSpec, ModelConfig, get_gpu, get_model
from simlab.hardware.stacks import get_stack

MAX_TENSOR_PARALLEL = 8  # one NVLink node


def build_roofline(cfg: RooflineHardware, *, file: Optional[str] = None, field: str = "hardware") -> RooflineCostModel:
    """A roofline cost model from a config (calibrated unless ``calibration: none``), checking names, the
    calibration, tensor parallelism and that the model fits."""
    gpu = get_gpu(cfg.gpu, file=file, field=_subfield(field, "gpu"))
    model = get_model(cfg.model, file=file, field=_subfield(field, "model"))
    check_precision(gpu, cfg.precision, file=file, field=_subfield(field, "precision"))
    stack = get_stack(cfg.stack, file=file, field=_subfield(field, "stack"))
    release = get_release(cfg.stack, cfg.stack_version, file=file, field=_subfield(field, "stack_version"))
    params = resolve_params(cfg, fit_gpu(gpu), file=file, field=field)
    cls = CalibratedRooflineCostModel if params.calibrated else RooflineCostModel
    # "default": the stack's own capture sizes (none for a stack without CUDA graphs)
    buckets = Buckets(stack.capture_sizes) if cfg.cuda_graph_buckets == "default" else \
        Buckets.from_config(cfg.cuda_graph_buckets)
    tp, ep = cfg.tensor_parallel, cfg.expert_parallel
    if cfg.expert_precision is not None and not model.is_moe:
        raise InputError(f"expert_precision applies to a mixture of experts; {model.name} is dense", file=file,
                         field=_subfield(field, "expert_precision"), value=cfg.expert_precision,
                         valid="leave it out (or a model such as deepseek-v4-flash)")
    if ep > 1:
        _check_expert_parallel(model, tp, ep, file=file, field=_subfield(field, "expert_parallel"))
    if tp <= MAX_TENSOR_PARALLEL and _splits(model, tp):
        cost_model = cls(gpu, model, tensor_parallel=tp, expert_parallel=ep, params=params, buckets=buckets)
        if (cost_model.kv_cache_tokens() or 0) > 0:
            cost_model.release, cost_model.release_named = release, cfg.stack_version is not None
            return cost_model
        why = _does_not_fit(cost_model)
    elif tp > MAX_TENSOR_PARALLEL:
        why = f"tensor parallelism beyond one {MAX_TENSOR_PARALLEL}-GPU NVLink node is not modelled"
    else:
        mlp = (f"{model.moe_intermediate_size}-wide experts" if model.is_moe else f"{model.intermediate_size}-wide MLP")
        why = (f"{model.name}'s {model.num_heads} heads, {model.num_kv_heads} KV heads and {mlp} do not split "
               f"{tp} ways")
    fitting = [n for n in range(1, MAX_TENSOR_PARALLEL + 1) if _splits(model, n) and _fits(gpu, model, n, params)]
    smaller = [p for p in ("fp8", "fp4") if WEIGHT_BYTES[p] < WEIGHT_BYTES[params.precision]
               and peak_flop_per_s(gpu, p) is not None and _splits(model, tp)
               and _fits(gpu, model, tp, replace(params, precision=p), ep)]
    valid = ("tensor_parallel " + ", ".join(map(str, fitting))) if fitting else (
        f"precision {smaller[0]} (the weights in {smaller[0]} fit)" if smaller else
        "a higher gpu_memory_utilization or a GPU with more memory (see `simlab profiles list`)")
    raise InputError(why, file=file, field=_subfield(field, "tensor_parallel"), value=tp, valid=valid)


def _subfield(field: str, name: str) -> str:
    return f"{field}.{name}" if field else name


def _splits(model: ModelConfig, tp: int) -> bool:
    """Whether tensor parallelism ``tp`` divides the heads and the MLP, or each expert's (KV heads split or
    replicate; MLA's KV latent is replicated on every GPU)."""
    kv = model.num_kv_heads
    mlp = model.moe_intermediate_size if model.is_moe else model.intermediate_size
    dense_ok = model.num_dense_layers == 0 or model.intermediate_size % tp == 0
    return (model.num_heads % tp == 0 and mlp % tp == 0 and dense_ok
            and (model.is_mla or kv % tp == 0 or tp % kv == 0))


def _fits(gpu: GpuSpec, model: ModelConfig, tp: int, params: RooflineParams, ep: int = 1) -> bool:
    return (RooflineCostModel(gpu, model, tensor_parallel=tp, expert_parallel=ep, params=params).kv_cache_tokens()
            or 0) > 0


def _check_expert_parallel(model: ModelConfig, tp: int, ep: int, *, file: Optional[str], field: str) -> None:
    """Expert parallelism places whole experts: a mixture of experts whose experts it divides, within one node,
    and either the tensor-parallel group itself or a whole number of such groups (data-parallel attention)."""
    if not model.is_moe:
        raise InputError(f"expert parallelism applies to a mixture of experts; {model.name} is dense", file=file,
                         field=field, value=ep, valid="1 (or a model such as qwen3-30b-a3b or deepseek-v3)")
    valid = [n for n in range(1, MAX_TENSOR_PARALLEL + 1)
             if n == 1 or (n % tp == 0 and model.num_experts % n == 0)]
    listed = ", ".join(map(str, valid))
    if ep > model.num_experts:
        why = f"above {model.name}'s {model.num_experts} experts"
    elif ep > MAX_TENSOR_PARALLEL:
        why = f"expert parallelism beyond one {MAX_TENSOR_PARALLEL}-GPU NVLink node is not modelled"
    elif model.num_experts % ep:
        why = f"does not divide {model.name}'s {model.num_experts} experts"
    elif ep % tp:
        why = (f"not a multiple of tensor_parallel {tp}: the experts' GPUs are the tensor-parallel group or whole "
               "data-parallel attention groups of it")
    else:
        return
    raise InputError(why, file=file, field=field, value=ep, valid=f"expert_parallel {listed}")


def _does_not_fit(cm: RooflineCostModel) -> str:
    usable = cm.params.gpu_memory_utilization * cm.gpu.memory_bytes
    return (f"{cm.model.name} does not fit: per GPU it needs {cm.weight_bytes_per_gpu / 1e9:.1f} GB of "
            f"{cm.params.precision} "
            f"weights plus {cm.activation_reserve_bytes() / 1e9:.1f} GB of activations, but {cm.gpu.name} at "
            f"gpu_memory_utilization {cm.params.gpu_memory_utilization} offers {usable / 1e9:.1f} GB, "
            "leaving nothing for the KV cache")
