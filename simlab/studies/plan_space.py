"""The space a plan searches: layouts (GPU x stack x precision x tensor/expert parallel that hold the model and
every request's KV), families (a layout x an arm x co-located or disaggregated) whose one free number is the count
of replicas, and the bounds the cost model proves before anything is simulated:

- **speed**: a decode step costs at least ``verify_s`` of one request's tokens at no context and emits at most
  ``1 + gamma`` tokens per request, so no request's TPOT (or ITL) can beat ``step / (1 + gamma)`` and no user's
  speed can pass ``(1 + gamma) / step``, however many replicas there are: a family whose bound misses the SLA is
  not simulated;
- **price**: a deployment's objective is known before it runs (``usd_per_hour``, ``num_gpus``) or bounded below
  (``usd_per_million_tokens``: output tokens/s cannot pass the workload's tokens over its arrival span), so one
  dearer than the best found is not simulated;
- **capacity** (a heuristic, used only where the search starts): a replica's decode tokens/s at its largest batch.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Optional

import numpy as np

from simlab.common.errors import InputError
from simlab.studies.plan_config import PlanSpec
from simlab.studies.labels import layout_label

MIN_SPLIT_REPLICAS = 2


@dataclass(frozen=True)
class Layout:
    """One replica's hardware: a roofline, its GPUs and their price."""

    gpu: str
    stack: str
    precision: str
    tensor_parallel: int
    expert_parallel: int
    model: str
    num_gpus: int  # per replica
    usd_per_gpu_hour: float
    kv_cache_tokens: int
    cost_model: str = "roofline"  # or "operations" (docs/operations.md)

    @property
    def hardware(self) -> dict:
        if self.cost_model == "operations":
            return {"kind": "operations", "gpu": self.gpu, "model": self.model, "stack": self.stack,
                    "tensor_parallel": self.tensor_parallel, "precision": self.precision,
                    **({"expert_parallel": self.expert_parallel} if self.expert_parallel > 1 else {})}
        return {"kind": "roofline", "gpu": self.gpu, "model": self.model, "stack": self.stack,
                "precision": self.precision, "tensor_parallel": self.tensor_parallel,
                "expert_parallel": self.expert_parallel}

    @property
    def label(self) -> str:
        return layout_label(self.gpu, self.stack, self.precision, self.tensor_parallel, self.expert_parallel)


@lru_cache(maxsize=256)
def _cost_model(key: str):
    from simlab.config.hardware import OperationsHardware, RooflineHardware
    from simlab.hardware.roofline_build import build_roofline

    data = json.loads(key)
    if data["kind"] == "operations":
        from simlab.hardware.operations_table import build_operations

        return build_operations(OperationsHardware(**data))
    return build_roofline(RooflineHardware(**data))


def cost_model(hardware: dict):
    """The cost model of ``hardware``, a roofline or the operation model (built once per process)."""
    return _cost_model(json.dumps(hardware, sort_keys=True))


@dataclass(frozen=True)
class Load:
    """What the workload asks of a deployment, known before anything runs."""

    num_requests: int
    largest_request_tokens: int  # prompt + output of the largest request: a replica's KV must hold it
    output_tokens: int
    arrival_span_s: Optional[float]  # None for a closed loop
    mean_context_tokens: float

    @property
    def max_output_tok_s(self) -> Optional[float]:
        """Output tokens/s no deployment can pass (duration_s is at least the arrival span)."""
        if self.arrival_span_s is None or self.arrival_span_s <= 0:
            return None
        return self.output_tokens / self.arrival_span_s


def plan_load(spec: PlanSpec) -> Load:
    """The plan's requests, built once (the same the deployments replay)."""
    from simlab.config.loading import scenario_from_data
    from simlab.workload import build_workload

    probe = {**spec.base, "hardware": {"kind": "roofline", "gpu": next(iter(spec.prices)), "model": spec.model},
             "arms": [spec.arms[0].arm]}
    loaded = scenario_from_data(probe, file=spec.file)
    workload = build_workload(loaded.scenario.workload, base_dir=loaded.base_dir, seed=loaded.scenario.seed,
                              file=spec.file)
    r = workload.requests
    total = r.prompt_tokens.astype(np.int64) + r.output_tokens.astype(np.int64)
    span = None if workload.closed_loop is not None else float(np.max(r.arrival_s) - np.min(r.arrival_s))
    return Load(len(r), int(total.max()), int(r.output_tokens.sum()), span,
                float(np.mean(r.prompt_tokens + r.output_tokens / 2.0)))


def enumerate_layouts(spec: PlanSpec, load: Load) -> tuple[list[Layout], list[tuple[str, str]]]:
    """Every layout that holds the model and the largest request within ``max_gpus``; and the ones that do not,
    each with why. No layout at all is an :class:`InputError` naming ``model``."""
    from simlab.hardware.gpus import gpus_per_replica
    from simlab.hardware.precision import peak_flop_per_s
    from simlab.hardware.specs import get_gpu, get_model

    model = get_model(spec.model)
    block = spec.block
    layouts: list[Layout] = []
    skipped: list[tuple[dict, str]] = []  # (the layout's fields, why)
    for gpu_name, price in spec.prices.items():
        gpu = get_gpu(gpu_name)
        for stack in spec.stacks:
            for precision in spec.precisions:
                for tp in block.tensor_parallel:
                    eps = block.expert_parallel or ([1, tp] if tp > 1 else [1])
                    for ep in dict.fromkeys(eps if model.is_moe else [1]):
                        what = {"gpu": gpu_name, "stack": stack, "precision": precision, "tensor_parallel": tp,
                                "expert_parallel": ep}
                        if peak_flop_per_s(gpu, precision) is None:
                            skipped.append((what, f"{gpu_name} has no {precision} tensor cores"))
                            continue
                        if block.cost_model == "operations" and precision not in ("bf16", "fp8"):
                            skipped.append((what, "the operation model prices bf16 and fp8 kernels "
                                                  "(docs/operations.md)"))
                            continue
                        hardware = Layout(gpu_name, stack, precision, tp, ep, model.name, 0, 0.0, 0,
                                          block.cost_model).hardware
                        try:
                            cost = cost_model(hardware)
                        except InputError as err:
                            skipped.append((what, err.problem))
                            continue
                        gpus = gpus_per_replica(cost.describe())
                        kv = int(cost.kv_cache_tokens() or 0)
                        if gpus > block.max_gpus:
                            skipped.append((what, f"one replica needs {gpus} GPUs, above max_gpus {block.max_gpus}"))
                        elif kv < load.largest_request_tokens:
                            skipped.append((what, f"its KV cache holds {kv} tokens, less than the largest request's "
                                                  f"{load.largest_request_tokens}"))
                        else:
                            layouts.append(Layout(gpu_name, stack, precision, tp, ep, model.name, gpus,
                                                  price.usd_per_hour, kv, block.cost_model))
    if not layouts:
        reasons = "; ".join(f"{layout_label(**what)}: {why}" for what, why in skipped[:4])
        raise InputError(f"fits no layout within max_gpus {block.max_gpus} ({reasons})", file=str(spec.file),
                         field="model", value=spec.model,
                         valid="a larger plan.max_gpus, more plan.tensor_parallel values, fp8 or a GPU with more "
                               "memory")
    return layouts, skipped


@dataclass
class Family:
    """A layout x an arm, co-located or disaggregated: its deployments differ only in their count of replicas
    (``units``: replicas, or prefill + decode replicas)."""

    index: int
    layout: Layout
    arm: int
    disaggregated: bool
    max_units: int
    start: int
    min_step_s: float
    tokens_per_step: int
    infeasible: Optional[str] = None
    unserved: Optional[str] = None  # why the layout's engine release cannot run the arm's drafter
    extra: dict = field(default_factory=dict)

    @property
    def min_units(self) -> int:
        return MIN_SPLIT_REPLICAS if self.disaggregated else 1

    def num_gpus(self, units: int) -> int:
        return units * self.layout.num_gpus

    def usd_per_hour(self, units: int) -> float:
        return self.num_gpus(units) * self.layout.usd_per_gpu_hour

    def values(self, units: int) -> list[Any]:
        """The deployments of ``units``: the replica count, or every prefill:decode split."""
        if not self.disaggregated:
            return [units]
        return [{"prefill_replicas": p, "decode_replicas": units - p} for p in range(1, units)]


def speed_bound(cost, arm: dict) -> tuple[float, int]:
    """The least seconds a decode step can take and the most tokens it emits per request."""
    tree = arm.get("tree")
    gamma = 0 if arm["method"] == "none" else int(arm.get("gamma") or 0)
    verified = int(tree["num_draft_tokens"]) if tree else gamma + 1
    steps = [float(cost.verify_s(b, 0.0, 1)) for b in range(1, verified + 1)]
    return min(steps), gamma + 1


def infeasible(spec: PlanSpec, min_step_s: float, tokens_per_step: int) -> Optional[str]:
    """The SLA condition no replica count can meet, by the speed bound, as text; None when none."""
    fastest_tpot_ms = min_step_s / tokens_per_step * 1e3
    for c in spec.sla.conditions:
        name = c.metric
        if c.op == "<=" and (name.endswith("_tpot_ms") or name.endswith("_itl_ms")) and fastest_tpot_ms > c.value:
            return (f"cannot meet {c}: a step takes at least {min_step_s * 1e3:.2f} ms and emits at most "
                    f"{tokens_per_step} token(s) a request, so {name} >= {fastest_tpot_ms:.2f}")
        if c.op == ">=" and name == "median_user_tok_s" and tokens_per_step / min_step_s < c.value:
            return f"cannot meet {c}: no user passes {tokens_per_step / min_step_s:.1f} tok/s on this layout"
    return None


def capacity_start(cost, layout: Layout, load: Load, engine: dict, units_max: int, minimum: int) -> int:
    """Where a family's search starts: the replicas whose decode tokens/s at the largest batch (no speculation)
    cover the workload's output rate (a guess: the search finds the answer from any start)."""
    rate = load.max_output_tok_s
    if rate is None:
        return minimum
    seqs = int(engine.get("max_num_seqs", 256))
    batch = max(1, min(seqs, int(layout.kv_cache_tokens // max(load.mean_context_tokens, 1.0))))
    step_s = float(cost.verify_s(batch, batch * load.mean_context_tokens, batch))
    per_replica = batch / step_s
    return int(min(units_max, max(minimum, math.ceil(rate / per_replica))))


def build_families(spec: PlanSpec, layouts: list[Layout], load: Load) -> list[Family]:
    """Every layout x arm (x disaggregated when the plan asks), with its bounds."""
    engine = dict(spec.base.get("engine") or {})
    families: list[Family] = []
    modes = [False, True] if spec.block.disaggregation else [False]
    for layout in layouts:
        cost = cost_model(layout.hardware)
        max_units = spec.block.max_gpus // layout.num_gpus
        for arm_index, arm in enumerate(spec.arms):
            step_s, tokens = speed_bound(cost, arm.arm)
            for split in modes:
                if split and max_units < MIN_SPLIT_REPLICAS:
                    continue
                minimum = MIN_SPLIT_REPLICAS if split else 1
                start = capacity_start(cost, layout, load, engine, max_units, minimum)
                families.append(Family(len(families), layout, arm_index, split, max_units, start, step_s, tokens,
                                       infeasible(spec, step_s, tokens), unserved(cost, arm.arm)))
    return families


def unserved(cost, arm: dict) -> Optional[str]:
    """Why the engine release a layout simulates cannot run ``arm``'s drafter (its recorded methods lack it), or
    None: a plan never deploys what its launch file could not start (a roofline and the operation model's table
    both carry their stack's release)."""
    release = cost.release
    if release is None or release.serves(arm["method"]):
        return None
    return (f"{release.label} does not serve {arm['method']} (it serves {', '.join(release.methods.value)}; "
            f"simlab/hardware/engine_releases/{release.stack}.yaml)")


def deployment_scenario(spec: PlanSpec, family: Family, value: Any) -> dict:
    """The scenario of one deployment: it re-runs with ``simlab run``."""
    from simlab.hardware.specs import file_label

    engine = dict(spec.base.get("engine") or {})
    if family.disaggregated:
        engine["disaggregation"] = {**value, "link_bandwidth_GBps": spec.block.link_bandwidth_GBps}
    else:
        engine["replicas"] = int(value)
    layout = family.layout
    split = f"-pd{value['prefill_replicas']}x{value['decode_replicas']}" if family.disaggregated else f"-r{value}"
    name = (f"{spec.name}-{file_label(layout.gpu)}-{layout.stack}-{layout.precision}-tp{layout.tensor_parallel}"
            f"{'-ep%d' % layout.expert_parallel if layout.expert_parallel > 1 else ''}{split}-"
            f"{spec.arms[family.arm].label}")[:100]
    return {**spec.base, "name": name, "hardware": layout.hardware, "engine": engine,
            "arms": [spec.arms[family.arm].arm]}
