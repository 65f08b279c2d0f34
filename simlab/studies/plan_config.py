"""A plan file: a scenario with ``model`` instead of ``hardware``, candidate ``arms`` (:mod:`plan_arms`) and a
``plan:`` block (what to search, the SLA, the objective). Everything is checked here, before anything runs; every
problem is one :class:`InputError` naming the file, the field and what is valid."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Optional, Union

from pydantic import Field, PositiveFloat, PositiveInt

from simlab.common.errors import InputError
from simlab.config.base import StrictModel
from simlab.studies.plan_arms import PlanArm, read_arm
from simlab.studies.prices import GpuPrice, price_of, shipped_prices
from simlab.studies.sla import SLA, parse_sla

Stack = Literal["vllm", "sglang", "trtllm", "eager"]
Precision = Literal["bf16", "fp8", "fp4"]
OBJECTIVES = ("usd_per_hour", "num_gpus", "usd_per_million_tokens")
DEFAULT_LINK_GBPS = 50.0  # one 400 Gb/s RDMA NIC per replica, as P/D deployments across nodes commonly have
# METRICS keys an SLA may name (docs/metrics.md); a plan naming another is an input error before anything runs
SLA_METRICS = tuple(f"{s}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el")
                    for s in ("mean", "median", "p90", "p99")) + (
    "completed", "duration_s", "request_throughput", "output_throughput", "total_token_throughput",
    "request_goodput", "median_user_tok_s", "output_throughput_per_gpu", "num_gpus", "num_preemptions",
    "spec_decode_acceptance_length", "spec_decode_acceptance_rate", "mean_verify_tokens_per_step",
    "mean_batch_requests", "max_kv_usage", "mean_kv_usage", "mean_step_ms")


class GpuChoice(StrictModel):
    """A GPU to try and its price per GPU-hour (left out: the shipped table's)."""

    gpu: str
    usd_per_hour: Optional[PositiveFloat] = None


class PlanBlock(StrictModel):
    """What ``simlab plan`` searches (docs/planning.md, "Planning a deployment")."""

    sla: str
    gpus: list[Union[GpuChoice, str]] = Field(min_length=1)
    stack: Union[Stack, list[Stack]] = "vllm"
    precision: Union[Precision, list[Precision]] = "bf16"
    tensor_parallel: list[PositiveInt] = Field(default=[1, 2, 4, 8], min_length=1)
    expert_parallel: Optional[list[PositiveInt]] = Field(default=None, min_length=1)
    max_gpus: PositiveInt = Field(le=4096)
    disaggregation: bool = False
    link_bandwidth_GBps: PositiveFloat = DEFAULT_LINK_GBPS
    objective: Literal["usd_per_hour", "num_gpus", "usd_per_million_tokens"] = "usd_per_hour"
    cost_model: Literal["roofline", "operations"] = "roofline"  # operations: docs/operations.md
    prefer: Literal["simplest", "fastest"] = "simplest"  # the tie-break at equal cost (studies.plan_ranking)


@dataclass
class PlanSpec:
    """A checked plan: the scenario every deployment shares, the arms, the choices and the SLA."""

    file: Path
    base: dict  # the scenario without hardware, arms and engine.replicas
    model: str
    arms: list[PlanArm]
    block: PlanBlock
    sla: SLA
    prices: dict[str, GpuPrice]  # by catalogue GPU name, in the plan's order
    probe: Any = None  # the shared parts and the arms, validated as a scenario on the first GPU

    @property
    def name(self) -> str:
        return str(self.base.get("name", "plan"))

    @property
    def stacks(self) -> list[str]:
        return _listed(self.block.stack)

    @property
    def precisions(self) -> list[str]:
        return _listed(self.block.precision)


def _listed(value) -> list:
    return list(dict.fromkeys(value if isinstance(value, list) else [value]))


def read_plan(path: str | Path) -> PlanSpec:
    """Read and check a plan file."""
    from simlab.common.schema_errors import validate
    from simlab.common.yaml_file import read_yaml
    from simlab.config.loading import scenario_from_data
    from simlab.hardware.specs import get_gpu, get_model, gpu_reference

    path = Path(path)
    data = read_yaml(path, what="plan file")
    file = str(path)
    if not isinstance(data, dict):
        raise InputError("a plan must be a mapping", file=file, valid="a scenario with model, arms and plan:")
    if "hardware" in data:
        raise InputError("a plan searches the hardware; it names the model instead", file=file, field="hardware",
                         valid="model: NAME (e.g. qwen3-8b) and plan.gpus")
    for key in ("model", "plan", "arms"):
        if key not in data:
            raise InputError("is missing", file=file, field=key,
                             valid={"model": "a model of the roofline catalogue (e.g. qwen3-8b) or a path to a "
                                             "Hugging Face config.json",
                                    "plan": "a mapping with sla, gpus, max_gpus (see docs/planning.md)",
                                    "arms": "a list of arms"}[key])
    if not isinstance(data["model"], str):
        raise InputError("is not a model name", file=file, field="model", value=data["model"], valid="e.g. qwen3-8b")
    model = get_model(data["model"], file=file, field="model").name
    block = validate(PlanBlock, data["plan"], file=path, field_prefix="plan")
    sla = parse_sla(block.sla, field="plan.sla")
    for condition in sla.conditions:
        if condition.metric not in SLA_METRICS:
            raise InputError("is not a METRICS key an SLA may name", file=file, field="plan.sla",
                             value=condition.metric, valid=", ".join(SLA_METRICS))
    prices: dict[str, GpuPrice] = {}
    for i, choice in enumerate(block.gpus):
        choice = GpuChoice(gpu=choice) if isinstance(choice, str) else choice
        spec = get_gpu(choice.gpu, file=file, field=f"plan.gpus[{i}].gpu")
        name = gpu_reference(spec)
        price = price_of(name, choice.usd_per_hour)
        if price is None:
            raise InputError("has no shipped price", file=file, field=f"plan.gpus[{i}].usd_per_hour",
                             value=choice.gpu, valid=f"a price > 0 (shipped for: {', '.join(shipped_prices())})")
        prices[name] = price
    if not isinstance(data["arms"], list) or not data["arms"]:
        raise InputError("must be a non-empty list", file=file, field="arms", valid="a list of arms")
    arms = [read_arm(raw, i, file=file) for i, raw in enumerate(data["arms"])]
    base = {k: v for k, v in data.items() if k not in ("model", "plan", "arms")}
    engine = dict(base.get("engine") or {})
    for key in ("replicas", "disaggregation"):
        if key in engine:
            raise InputError("is what the plan searches", file=file, field=f"engine.{key}",
                             valid="leave it out (plan.max_gpus and plan.disaggregation bound the search)")
    # the shared parts and the arms validate as a scenario on the first GPU (a layout's own errors come later)
    probe = {**base, "hardware": {"kind": "roofline", "gpu": next(iter(prices)), "model": model},
             "arms": [a.arm for a in arms]}
    scenario = scenario_from_data(probe, file=path).scenario
    return PlanSpec(path, base, model, arms, block, sla, prices, scenario)
