"""Acceptance config: how likely each drafted position is to be accepted, and what the confidence head says.

The model (see docs/acceptance.md): for request r, decode step t and draft position k,

    logit c[r,t,k] = L[method, domain, k] + delta_r + z[r,t] + eps[r,t,k]

with delta_r ~ N(0, request_logit_sd^2), z a stationary AR(1) over steps (sd step_logit_sd, lag-1 correlation
step_correlation) and eps ~ N(0, token_logit_sd^2). The head reports
c_hat = sigmoid(logit c + bias_logit[k] + noise_logit_sd * N(0, 1)) (one bias for every position, or one per
position).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

import numpy as np
from pydantic import Field, FiniteFloat, NonNegativeFloat, PositiveInt, model_validator

from simlab.config.base import StrictModel

Probability = Annotated[float, Field(ge=0.0, le=1.0)]


class ConfidenceConfig(StrictModel):
    """Error of the confidence head before calibration, in logit space (whether STS calibrates it is the arm's
    ``calibration``)."""

    noise_logit_sd: NonNegativeFloat = 0.0
    bias_logit: Union[FiniteFloat, Annotated[list[FiniteFloat], Field(min_length=1, max_length=16)]] = 0.0

    def bias_at(self, num_positions: int) -> Union[float, np.ndarray]:
        """The bias of positions 1..num_positions: the scalar itself, or the per-position list (positions past its
        end take its last value) as an array."""
        if not isinstance(self.bias_logit, list):
            return self.bias_logit
        values = np.asarray(self.bias_logit, dtype=float)
        return np.concatenate([values, np.full(max(0, num_positions - len(values)), values[-1])])[:num_positions]

    @property
    def has_bias(self) -> bool:
        """Whether any position's bias is non-zero."""
        return any(self.bias_logit) if isinstance(self.bias_logit, list) else self.bias_logit != 0.0


class HeterogeneityConfig(StrictModel):
    """How acceptance varies around the method/domain curve, in logit space."""

    request_logit_sd: NonNegativeFloat = 0.0
    step_logit_sd: NonNegativeFloat = 0.0
    step_correlation: float = Field(default=0.0, ge=0.0, lt=1.0)
    token_logit_sd: NonNegativeFloat = 0.0


class _AcceptanceCommon(StrictModel):
    """Fields every kind takes. Omitted ``confidence``/``heterogeneity`` fields keep the kind's defaults: zero
    heterogeneity and a perfect head for iid and positional, the preset's documented values for a preset."""

    confidence: Optional[ConfidenceConfig] = None
    heterogeneity: Optional[HeterogeneityConfig] = None
    calibration_samples: PositiveInt = Field(default=20000, ge=200, le=2_000_000)


class IIDAcceptance(_AcceptanceCommon):
    """Every drafted position is accepted with probability ``alpha``, independently."""

    kind: Literal["iid"]
    alpha: Probability


class PositionalAcceptance(_AcceptanceCommon):
    """Conditional acceptance c_k per position, per method and domain: ``methods: {dspark: {chat: [...]}}``.

    ``provenance`` documents where the numbers came from (``simlab acceptance fit`` writes the measured rates,
    their confidence intervals and the fit there); the simulator does not read it."""

    kind: Literal["positional"]
    methods: dict[
        Literal["mtp", "eagle3", "dflash", "dspark", "draft_model", "ngram", "suffix"],
        dict[str, Annotated[list[Probability], Field(min_length=1, max_length=16)]],
    ] = Field(min_length=1)
    provenance: Optional[dict[str, Any]] = None


class PresetAcceptance(_AcceptanceCommon):
    """A shipped preset fitted to public figures (qwen3-4b, qwen3-8b, qwen3-14b), by bare name, or a path to a
    preset file of the same format (relative to the scenario file)."""

    kind: Literal["preset"]
    name: str


class TraceAcceptance(_AcceptanceCommon):
    """Replay recorded acceptance: each simulated request replays one recorded request's acceptance lengths
    (``path`` relative to the scenario file; ``format: specdecode-bench``; ``proposer`` picks one of the file's
    ``acc_<proposer>`` entries, needed when it has several). ``heterogeneity`` does not apply (the outcomes are
    recorded); ``confidence`` is the error of the head the schedulers see (docs/acceptance.md)."""

    kind: Literal["trace"]
    path: str = Field(min_length=1)
    format: Literal["specdecode-bench"] = "specdecode-bench"
    proposer: Optional[str] = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _no_heterogeneity(self) -> "TraceAcceptance":
        if self.heterogeneity is not None:
            raise ValueError("heterogeneity does not apply to recorded acceptance (its outcomes are recorded); "
                             "leave it out")
        return self


AcceptanceConfig = Annotated[
    Union[IIDAcceptance, PositionalAcceptance, PresetAcceptance, TraceAcceptance], Field(discriminator="kind")
]

AcceptanceSetting = Union[AcceptanceConfig, str]
"""What a scenario's ``acceptance:`` holds: a mapping, or a name or path. A path (relative to the scenario file)
names a file holding one acceptance mapping, such as ``simlab acceptance fit`` writes, or a preset file; a bare
name (no path separator, no extension) is a shipped preset."""
