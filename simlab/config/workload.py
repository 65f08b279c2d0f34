"""Workload config: trace replay, synthetic open-loop arrivals, or a closed loop of users."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BeforeValidator, Field, NonNegativeFloat, PositiveFloat, PositiveInt, model_validator

from simlab.config.base import StrictModel


class ConstantLength(StrictModel):
    """Every request has ``value`` tokens."""

    dist: Literal["constant"]
    value: PositiveInt


class UniformLength(StrictModel):
    """Integers drawn uniformly from ``low`` to ``high``, both included."""

    dist: Literal["uniform"]
    low: PositiveInt
    high: PositiveInt

    @model_validator(mode="after")
    def _ordered(self) -> "UniformLength":
        if self.high < self.low:
            raise ValueError(f"high ({self.high}) must be >= low ({self.low})")
        return self


class LognormalLength(StrictModel):
    """Lognormal with arithmetic ``mean`` and log-space standard deviation ``sigma``, rounded and clipped."""

    dist: Literal["lognormal"]
    mean: PositiveFloat
    sigma: NonNegativeFloat
    min: PositiveInt = 1
    max: Optional[PositiveInt] = None


class ExponentialLength(StrictModel):
    """Exponential with the given ``mean``, rounded and clipped to [min, max]."""

    dist: Literal["exponential"]
    mean: PositiveFloat
    min: PositiveInt = 1
    max: Optional[PositiveInt] = None


class EmpiricalLength(StrictModel):
    """Resample the prompt or output lengths of a trace (a shipped name or a path)."""

    dist: Literal["empirical"]
    trace: str
    column: Literal["prompt", "output"]
    format: Optional[Literal["azure", "mooncake", "csv", "jsonl"]] = None
    columns: Optional["TraceColumns"] = None


def _constant_shorthand(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return {"dist": "constant", "value": value}
    return value


LengthDist = Annotated[
    Annotated[
        Union[ConstantLength, UniformLength, LognormalLength, ExponentialLength, EmpiricalLength],
        Field(discriminator="dist"),
    ],
    BeforeValidator(_constant_shorthand),
]

Domains = dict[str, PositiveFloat]


class TraceColumns(StrictModel):
    """Column names of a generic CSV or JSONL trace."""

    arrival: str
    prompt_tokens: str
    output_tokens: str
    domain: Optional[str] = None
    arrival_unit: Literal["s", "ms", "us", "ns", "datetime"] = "s"


class TraceWorkload(StrictModel):
    """Replay a request trace: arrivals and lengths come from the file."""

    kind: Literal["trace"]
    path: str
    format: Optional[Literal["azure", "mooncake", "csv", "jsonl"]] = None
    columns: Optional[TraceColumns] = None
    time_scale: PositiveFloat = 1.0
    max_requests: Optional[PositiveInt] = None
    max_duration_s: Optional[PositiveFloat] = None
    domains: Optional[Domains] = None
    domain_column: Optional[str] = None


class _Synthetic(StrictModel):
    rate: PositiveFloat
    num_requests: PositiveInt
    prompt_tokens: LengthDist
    output_tokens: LengthDist
    domains: Optional[Domains] = None
    max_duration_s: Optional[PositiveFloat] = None


class PoissonWorkload(_Synthetic):
    """Open loop: exponential gaps at ``rate`` requests per second."""

    kind: Literal["poisson"]


class GammaWorkload(_Synthetic):
    """Open loop: gamma-distributed gaps with mean 1/rate and coefficient of variation ``cv``."""

    kind: Literal["gamma"]
    cv: PositiveFloat


class ClosedLoopWorkload(StrictModel):
    """``concurrency`` users, each sending its next request when the last finishes (plus think time)."""

    kind: Literal["closed_loop"]
    concurrency: PositiveInt
    num_requests: PositiveInt
    prompt_tokens: LengthDist
    output_tokens: LengthDist
    domains: Optional[Domains] = None
    think_time_s: NonNegativeFloat = 0.0


WorkloadConfig = Annotated[
    Union[TraceWorkload, PoissonWorkload, GammaWorkload, ClosedLoopWorkload], Field(discriminator="kind")
]

EmpiricalLength.model_rebuild()
