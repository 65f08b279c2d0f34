"""The scenario: the one object a run is made from."""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import Field, PositiveFloat, PositiveInt, field_validator, model_serializer, model_validator

from simlab.config.acceptance import AcceptanceSetting
from simlab.config.arms import Arm
from simlab.config.base import StrictModel
from simlab.config.disaggregation import DisaggregationConfig
from simlab.config.hardware import HardwareConfig
from simlab.config.workload import WorkloadConfig


# engine fields a serving stack's release decides when a scenario leaves them out (simlab.hardware.releases)
RELEASE_FIELDS = ("max_num_seqs", "max_batch_tokens", "prefill_chunk_tokens", "kv_policy", "block_size")


class EngineConfig(StrictModel):
    """Serving-engine limits, per replica. With a roofline's serving stack, the fields of
    :data:`RELEASE_FIELDS` a scenario leaves out take that release's defaults, per arm (the values below are
    simlab's own, for a cost table or the eager stack); a dump leaves them out too, so that a scenario read back
    from its dump is decided the same way."""

    max_num_seqs: PositiveInt = 256
    max_batch_tokens: PositiveInt = 8192
    prefill_chunk_tokens: Optional[PositiveInt] = None
    kv_cache_tokens: Union[PositiveInt, Literal["auto"]] = "auto"
    replicas: PositiveInt = Field(default=1, le=1024)
    router: Literal["round_robin", "least_loaded", "prefix_aware"] = "round_robin"
    kv_policy: Literal["reserve", "paged"] = "reserve"
    block_size: PositiveInt = Field(default=16, le=4096)
    prefix_caching: bool = False
    disaggregation: Optional[DisaggregationConfig] = None
    # the overlap (SGLang) or async (vLLM) scheduler: host work of step N+1 under the GPU's step N. Left out: the
    # release's, per arm (simlab.hardware.overlap prices what it hides of a speculative round)
    overlap_schedule: Optional[bool] = None

    @model_serializer(mode="wrap")
    def _dump(self, handler: Any) -> dict[str, Any]:
        out = handler(self)
        for name in RELEASE_FIELDS:
            if name not in self.model_fields_set:
                out.pop(name, None)
        if out.get("overlap_schedule", 0) is None:  # left out: dumps (and study points) as before the field
            del out["overlap_schedule"]
        return out

    @property
    def num_replicas(self) -> int:
        """Every replica of the arm: both pools when disaggregated."""
        return self.disaggregation.num_replicas if self.disaggregation is not None else self.replicas

    @property
    def prefill_budget(self) -> int:
        """Most prompt tokens prefilled in one iteration."""
        return min(self.prefill_chunk_tokens or self.max_batch_tokens, self.max_batch_tokens)


class SLO(StrictModel):
    """Service-level objectives; a request meets the SLO when it meets every objective given."""

    ttft_ms: Optional[PositiveFloat] = None
    tpot_ms: Optional[PositiveFloat] = None
    e2el_ms: Optional[PositiveFloat] = None

    @model_validator(mode="after")
    def _some(self) -> "SLO":
        if self.ttft_ms is None and self.tpot_ms is None and self.e2el_ms is None:
            raise ValueError("give at least one of ttft_ms, tpot_ms, e2el_ms")
        return self


class Scenario(StrictModel):
    """A workload, a hardware cost model, engine limits, an acceptance model and the arms to compare."""

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.+=-]+$")
    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    workload: WorkloadConfig
    hardware: HardwareConfig
    engine: EngineConfig = EngineConfig()
    acceptance: AcceptanceSetting
    slo: Optional[SLO] = None
    arms: list[Arm] = Field(min_length=1, max_length=64)

    @field_validator("arms")
    @classmethod
    def _unique_names(cls, arms: list[Arm]) -> list[Arm]:
        seen: set[str] = set()
        for arm in arms:
            if arm.label in seen:
                raise ValueError(f"two arms are named {arm.label!r}; give each arm a unique name")
            seen.add(arm.label)
        return arms
