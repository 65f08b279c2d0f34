"""Workload config: trace replay, synthetic open-loop arrivals, or a closed loop of users.

Every union here is discriminated: workloads by ``kind``, length distributions by ``dist``. A bare integer
where a length distribution is expected is shorthand for ``{dist: constant, value: N}``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    model_validator,
)

from simlab.config.base import StrictModel

PREFIX_BLOCK_TOKENS = 512  # tokens one prefix block id names (Mooncake's hash block); the prefix cache's block

TraceFormat = Literal["azure", "mooncake", "csv", "jsonl"]
GENERIC_FORMATS = ("csv", "jsonl")
MAX_NUM_DOMAINS = 32767  # domain indices are int16


def _bounds_ordered(low: int, high: Optional[int], low_name: str, high_name: str) -> None:
    if high is not None and high < low:
        raise ValueError(f"{high_name} ({high}) must be >= {low_name} ({low})")


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
        _bounds_ordered(self.low, self.high, "low", "high")
        return self


class LognormalLength(StrictModel):
    """Lognormal with arithmetic ``mean`` and log-space standard deviation ``sigma``, rounded and clipped.

    The log-space location is ``mu = ln(mean) - sigma**2 / 2`` so that the mean before rounding and clipping
    is ``mean``.
    """

    dist: Literal["lognormal"]
    mean: PositiveFloat
    sigma: NonNegativeFloat
    min: PositiveInt = 1
    max: Optional[PositiveInt] = None

    @model_validator(mode="after")
    def _ordered(self) -> "LognormalLength":
        _bounds_ordered(self.min, self.max, "min", "max")
        return self


class ExponentialLength(StrictModel):
    """Exponential with the given ``mean``, rounded and clipped to [min, max]."""

    dist: Literal["exponential"]
    mean: PositiveFloat
    min: PositiveInt = 1
    max: Optional[PositiveInt] = None

    @model_validator(mode="after")
    def _ordered(self) -> "ExponentialLength":
        _bounds_ordered(self.min, self.max, "min", "max")
        return self


class EmpiricalLength(StrictModel):
    """Resample the prompt or output lengths of a trace (a shipped name or a path), clipped to [min, max]."""

    dist: Literal["empirical"]
    trace: str = Field(min_length=1)
    column: Literal["prompt", "output"]
    format: Optional[TraceFormat] = None
    columns: Optional["TraceColumns"] = None
    min: PositiveInt = 1
    max: Optional[PositiveInt] = None

    @model_validator(mode="after")
    def _consistent(self) -> "EmpiricalLength":
        _bounds_ordered(self.min, self.max, "min", "max")
        _columns_fit_format(self.format, self.columns)
        return self


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


def _check_domains(mix: dict[str, float]) -> dict[str, float]:
    if not mix:
        raise ValueError("give at least one domain, e.g. {chat: 1.0}")
    if len(mix) > MAX_NUM_DOMAINS:
        raise ValueError(f"at most {MAX_NUM_DOMAINS} domains, got {len(mix)}")
    for name in mix:
        if not name.strip():
            raise ValueError("a domain name must not be empty")
    return mix


Domains = Annotated[dict[str, PositiveFloat], AfterValidator(_check_domains)]
"""Domain name -> weight; weights are normalised, so {math: 1, code: 3} means 25% math."""


class TraceColumns(StrictModel):
    """Column names of a generic CSV or JSONL trace, and the unit of the arrival column. For prefix caching,
    ``prefix_group`` names a column whose equal labels share a prompt prefix of ``prefix_tokens`` tokens (a
    column; without one, the group's shortest prompt). ``overlap`` names a column of the share of each request's
    output that repeats its context (a lookup drafter's chance to find a match, per request)."""

    arrival: str = Field(min_length=1)
    prompt_tokens: str = Field(min_length=1)
    output_tokens: str = Field(min_length=1)
    domain: Optional[str] = Field(default=None, min_length=1)
    arrival_unit: Literal["s", "ms", "us", "ns", "datetime"] = "s"
    prefix_group: Optional[str] = Field(default=None, min_length=1)
    prefix_tokens: Optional[str] = Field(default=None, min_length=1)
    # the share (0-1) of each request's output that repeats its context: a lookup drafter's (ngram, suffix) chance
    # that a round of that request finds a match, in place of its domain's (docs/acceptance.md section 9)
    overlap: Optional[str] = Field(default=None, min_length=1)


def _columns_fit_format(fmt: Optional[str], columns: Optional[TraceColumns]) -> None:
    if columns is not None and fmt is not None and fmt not in GENERIC_FORMATS:
        raise ValueError(f"columns is for format csv or jsonl; format {fmt} has fixed columns")


class TraceWorkload(StrictModel):
    """Replay a request trace: arrivals and lengths come from the file.

    ``time_scale`` multiplies every inter-arrival gap (0.5 = twice the load); ``max_duration_s`` keeps arrivals
    before that time (after scaling); ``max_requests`` keeps the first N. Domains come from a column of the
    trace (``domain_column`` or ``columns.domain``) or are drawn per request from the ``domains`` mix. A trace
    out of time order is an error unless ``sort`` is true (then it is sorted stably as it is read).
    """

    kind: Literal["trace"]
    path: str = Field(min_length=1)
    format: Optional[TraceFormat] = None
    columns: Optional[TraceColumns] = None
    time_scale: PositiveFloat = 1.0
    max_requests: Optional[PositiveInt] = None
    max_duration_s: Optional[PositiveFloat] = None
    domains: Optional[Domains] = None
    domain_column: Optional[str] = Field(default=None, min_length=1)
    sort: bool = False

    @model_validator(mode="after")
    def _consistent(self) -> "TraceWorkload":
        _columns_fit_format(self.format, self.columns)
        column_domain = self.columns.domain if self.columns is not None else None
        if self.domain_column and column_domain and self.domain_column != column_domain:
            raise ValueError(
                f"domain_column ({self.domain_column}) and columns.domain ({column_domain}) disagree; give one"
            )
        if self.domains is not None and (self.domain_column or column_domain):
            raise ValueError("give either domains (a mix drawn per request) or a domain column, not both")
        return self

    @property
    def domain_source_column(self) -> Optional[str]:
        """The trace column holding each request's domain, if any."""
        return self.domain_column or (self.columns.domain if self.columns is not None else None)


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
