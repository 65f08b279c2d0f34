"""Hardware config: a cost table (measured or exported) or a roofline (GPU spec x model config).

A scenario's ``hardware:`` is one of these objects, or a string: a bare profile name shipped in hw_profiles/
or a path to a profile file holding a ``kind: table`` object.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import (Field, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt, model_serializer,
                      model_validator)

from simlab.config.base import StrictModel


def _strictly_increasing(values: list, what: str) -> None:
    if any(b <= a for a, b in zip(values, values[1:])):
        raise ValueError(f"{what} must be strictly increasing, got {values}")


class CostCurve(StrictModel):
    """A draft cost: a constant ``step_s``, or a curve ``step_s`` over ``batch_tokens`` (piecewise linear), at no
    context; plus ``context_token_s`` per token of context the drafting requests hold, each time the forward runs
    (its layers' attention reading that context; read for ``autoregressive`` and ``parallel``)."""

    step_s: Union[NonNegativeFloat, list[NonNegativeFloat]]
    batch_tokens: Optional[list[PositiveInt]] = None
    context_token_s: NonNegativeFloat = 0.0

    @model_validator(mode="after")
    def _shape(self) -> "CostCurve":
        if isinstance(self.step_s, list):
            if self.batch_tokens is None:
                raise ValueError("a list of step_s needs batch_tokens of the same length")
            if len(self.batch_tokens) != len(self.step_s) or not self.step_s:
                raise ValueError(
                    f"batch_tokens has {len(self.batch_tokens)} points but step_s has {len(self.step_s)}"
                )
            _strictly_increasing(self.batch_tokens, "batch_tokens")
        elif self.batch_tokens is not None:
            raise ValueError("batch_tokens needs step_s to be a list of the same length")
        return self


class VerifyTable(StrictModel):
    """Target step seconds at B batch tokens; optionally a grid with rows by total context tokens."""

    batch_tokens: list[PositiveInt] = Field(min_length=1)
    step_s: Union[list[PositiveFloat], list[list[PositiveFloat]]] = Field(min_length=1)
    context_tokens: Optional[list[NonNegativeInt]] = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _shape(self) -> "VerifyTable":
        _strictly_increasing(self.batch_tokens, "batch_tokens")
        nested = isinstance(self.step_s[0], list)
        if self.context_tokens is None:
            if nested:
                raise ValueError("a grid of step_s (rows by context) needs context_tokens")
            if len(self.step_s) != len(self.batch_tokens):
                raise ValueError(
                    f"batch_tokens has {len(self.batch_tokens)} points but step_s has {len(self.step_s)}"
                )
        else:
            _strictly_increasing(self.context_tokens, "context_tokens")
            if not nested or len(self.step_s) != len(self.context_tokens):
                raise ValueError(
                    f"with context_tokens, step_s must be {len(self.context_tokens)} rows (one per context), "
                    f"each of {len(self.batch_tokens)} values (one per batch_tokens)"
                )
            for i, row in enumerate(self.step_s):
                if len(row) != len(self.batch_tokens):
                    raise ValueError(f"step_s row {i} has {len(row)} values; expected {len(self.batch_tokens)}")
        return self


class DraftTable(StrictModel):
    """Drafter costs; a missing entry costs 0."""

    autoregressive: Optional[CostCurve] = None
    parallel: Optional[CostCurve] = None
    sequential_head: Optional[CostCurve] = None
    # once per round of an autoregressive drafter, beside its steps (by requests): the engine's round overhead
    autoregressive_round: Optional[CostCurve] = None
    # MTP's own step (the model's MTP layer, its 2h -> h projection, the full LM head) and its once-per-round cost;
    # absent: MTP reads the autoregressive curves
    mtp: Optional[CostCurve] = None
    mtp_round: Optional[CostCurve] = None


class PrefillTable(StrictModel):
    """Prefill costs: ``per_token_s`` x prefill tokens added to the step, or, with ``batch_tokens`` and ``step_s``,
    a chunk priced as part of the forward it joins: ``step_s`` is a forward's token-proportional seconds (GEMMs and
    elementwise kernels) at M tokens, so a chunk of p tokens joining d decode tokens adds ``step_s(d + p) -
    step_s(d)`` (a pure prefill step ``step_s(p)``), linear beyond the last point; plus ``attention_pair_s`` per
    (query, context) pair of its causal attention and ``window_pair_s`` per pair its window layers see (at most
    ``window_tokens`` per query)."""

    per_token_s: NonNegativeFloat = 0.0
    batch_tokens: Optional[list[PositiveInt]] = Field(default=None, min_length=2)
    step_s: Optional[list[NonNegativeFloat]] = None
    attention_pair_s: NonNegativeFloat = 0.0
    window_pair_s: NonNegativeFloat = 0.0
    window_tokens: Optional[PositiveInt] = None

    @model_validator(mode="after")
    def _shape(self) -> "PrefillTable":
        if (self.batch_tokens is None) != (self.step_s is None):
            raise ValueError("prefill batch_tokens and step_s go together")
        if self.batch_tokens is not None:
            if len(self.batch_tokens) != len(self.step_s):
                raise ValueError(f"prefill batch_tokens has {len(self.batch_tokens)} points but step_s has "
                                 f"{len(self.step_s)}")
            _strictly_increasing(self.batch_tokens, "prefill batch_tokens")
            if self.per_token_s:
                raise ValueError("give prefill per_token_s or a curve (batch_tokens, step_s), not both")
        if self.window_pair_s and self.window_tokens is None:
            raise ValueError("prefill window_pair_s needs window_tokens")
        return self


class TableHardware(StrictModel):
    """A cost table (the contract's format). Profiles in hw_profiles/ are files holding one of these."""

    kind: Literal["table"]
    name: Optional[str] = None
    verify: VerifyTable
    draft: DraftTable = DraftTable()
    prefill: PrefillTable = PrefillTable()
    cuda_graph_buckets: Optional[list[PositiveInt]] = None
    kv_cache_tokens: Optional[PositiveInt] = None
    provenance: Optional[dict[str, Any]] = None

    @model_validator(mode="after")
    def _buckets(self) -> "TableHardware":
        if self.cuda_graph_buckets is not None:
            if not self.cuda_graph_buckets:
                raise ValueError("cuda_graph_buckets must list at least one size (or be left out)")
            _strictly_increasing(self.cuda_graph_buckets, "cuda_graph_buckets")
        return self


class RooflineHardware(StrictModel):
    """A roofline model: a GPU spec x a model config (see ``simlab profiles list`` and docs/hardware.md).

    ``stack`` is the serving engine the model stands for (its step overheads, attention kernel, CUDA-graph sizes),
    ``stack_version`` its release (:mod:`simlab.hardware.releases`: the engine defaults and what changes under
    speculation; left out, the newest release simlab knows),
    ``precision`` the format of the decoder layers' weights and ``kv_precision`` the KV cache's;
    ``expert_precision`` (a mixture of experts) the routed experts' when they ship in another (DeepSeek-V4: mxfp4).
    ``calibration`` picks the efficiencies: ``auto`` (the default) the GPU's fit to public measurements for that stack,
    ``none`` the constant efficiencies. Every tuning parameter given overrides the calibration's value; left out, it
    takes the calibration's (or, with ``none``, the default documented in docs/hardware.md). ``tensor_parallel`` splits
    the model over that many GPUs; ``expert_parallel`` (a mixture of experts) places whole experts on that many,
    with data-parallel attention groups of ``tensor_parallel`` GPUs when it is larger (docs/roofline.md, "Expert
    parallelism").
    """

    kind: Literal["roofline"]
    gpu: str
    model: str
    stack: Literal["vllm", "sglang", "trtllm", "eager"] = "vllm"
    stack_version: Optional[str] = Field(default=None, min_length=1, max_length=40)
    precision: Literal["bf16", "fp8", "fp4"] = "bf16"
    kv_precision: Literal["bf16", "fp8"] = "bf16"
    expert_precision: Optional[Literal["bf16", "fp8", "fp4", "mxfp4"]] = None
    tensor_parallel: PositiveInt = Field(default=1, le=64)
    expert_parallel: PositiveInt = Field(default=1, le=1024)
    calibration: str = "auto"
    cuda_graph_buckets: Union[Literal["default", "none"], list[PositiveInt]] = "default"
    bw_efficiency: Optional[float] = Field(default=None, gt=0.0, le=1.0)
    flop_efficiency: Optional[float] = Field(default=None, gt=0.0, le=1.0)
    step_overhead_s: Optional[NonNegativeFloat] = None
    link_efficiency: Optional[float] = Field(default=None, gt=0.0, le=1.0)
    allreduce_latency_s: Optional[NonNegativeFloat] = None
    kernel_launch_s: Optional[NonNegativeFloat] = None
    activation_reserve_bytes: Optional[NonNegativeInt] = None
    gpu_memory_utilization: float = Field(default=0.9, gt=0.0, le=1.0)
    draft_layers: Optional[PositiveInt] = Field(default=None, le=64)
    eagle3_draft_vocab: Optional[PositiveInt] = None
    request_overhead_s: Optional[NonNegativeFloat] = None
    knee_width: Optional[float] = Field(default=None, ge=0.0, le=4.0)
    elementwise_efficiency: Optional[float] = Field(default=None, gt=0.0, le=1.0)
    attention_efficiency: Optional[float] = Field(default=None, gt=0.0, le=1.0)
    host_launch_s: Optional[NonNegativeFloat] = None
    quantized_efficiency: Optional[float] = Field(default=None, gt=0.0, le=1.0)
    prefill_efficiency: Optional[float] = Field(default=None, gt=0.0, le=1.0)
    draft_forward_overhead_s: Optional[NonNegativeFloat] = None
    spec_round_overhead_s: Optional[NonNegativeFloat] = None
    alltoall_latency_s: Optional[NonNegativeFloat] = None
    alltoall_efficiency: Optional[float] = Field(default=None, gt=0.0, le=1.0)
    moe_layer_overhead_s: Optional[NonNegativeFloat] = None
    moe_hidden_overhead_s: Optional[NonNegativeFloat] = None

    @model_serializer(mode="wrap")
    def _dump(self, handler: Any) -> dict[str, Any]:
        # left out, expert_precision and spec_round_overhead_s are not written: scenarios' dumps (and the study
        # points hashed from them) stay as they were before the fields existed
        out = handler(self)
        for name in ("expert_precision", "spec_round_overhead_s", "stack_version", "moe_hidden_overhead_s"):
            if out.get(name, 0) is None:
                del out[name]
        return out

    @model_validator(mode="after")
    def _buckets(self) -> "RooflineHardware":
        if isinstance(self.cuda_graph_buckets, list):
            if not self.cuda_graph_buckets:
                raise ValueError('cuda_graph_buckets must list at least one size (or be "none")')
            _strictly_increasing(self.cuda_graph_buckets, "cuda_graph_buckets")
        return self


class AicHardware(StrictModel, frozen=True):
    """Step costs from aiconfigurator-core's silicon database (the ``aic`` extra; simlab/hardware/aiconfigurator.py)."""

    kind: Literal["aiconfigurator"]
    gpu: str
    model: str
    stack: Literal["vllm", "sglang", "trtllm"] = "vllm"
    stack_version: str = "0.24.0"
    tensor_parallel: PositiveInt = Field(default=1, le=64)


class OperationsHardware(StrictModel, frozen=True):
    """Step costs from the model's operations priced by curves fitted on measured kernels, plus the engine's own
    time (simlab/hardware/operations_table.py, docs/operations.md). ``step_overhead_s`` and ``request_overhead_s``
    left out take the fit on engine runs the docs state. ``expert_parallel`` places a mixture of experts' whole
    experts as ``kind: roofline`` does (data-parallel attention groups of ``tensor_parallel`` GPUs when larger);
    ``stack_version`` is the stack's release whose engine defaults and speculative rules its arms run with (left
    out, the newest simlab knows, as on a roofline). ``kernels: database`` prices the GEMMs from aiconfigurator-core's
    own kernel rows where they cover the GPU (the ``aic`` extra), the rest from the fitted curves."""

    kind: Literal["operations"]
    gpu: str
    model: str
    tensor_parallel: PositiveInt = Field(default=1, le=64)
    expert_parallel: PositiveInt = Field(default=1, le=1024)
    precision: Literal["bf16", "fp8"] = "bf16"
    kv_precision: Literal["bf16", "fp8"] = "bf16"  # the KV cache's: what decode attention reads, how many tokens fit
    stack: Literal["vllm", "sglang", "trtllm", "eager"] = "vllm"  # whose roofline drafters and KV capacity
    stack_version: Optional[str] = Field(default=None, min_length=1, max_length=40)  # its release; None: the newest
    kernels: Literal["curves", "database"] = "curves"  # database: GEMMs from aiconfigurator-core's rows (aic extra)
    step_overhead_s: Optional[NonNegativeFloat] = None
    request_overhead_s: Optional[NonNegativeFloat] = None

    @model_serializer(mode="wrap")
    def _dump(self, handler: Any) -> dict[str, Any]:
        # expert_parallel 1 and no stack_version are not written: dumps (and the study points hashed from them)
        # stay as before the fields
        out = handler(self)
        if out.get("expert_parallel") == 1:
            del out["expert_parallel"]
        if out.get("stack_version", 0) is None:
            del out["stack_version"]
        if out.get("kernels") == "curves":
            del out["kernels"]
        return out


HardwareObject = Annotated[Union[TableHardware, RooflineHardware, AicHardware, OperationsHardware],
                           Field(discriminator="kind")]
HardwareConfig = Union[HardwareObject, str]
