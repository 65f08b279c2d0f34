"""Prefill/decode disaggregation: a pool of prefill replicas, a pool of decode replicas and the KV link between
them (``engine.disaggregation``; docs/engine.md section 9)."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, NonNegativeFloat, PositiveFloat, PositiveInt, model_validator

from simlab.config.base import StrictModel

Router = Literal["round_robin", "least_loaded", "prefix_aware"]


class DisaggregationConfig(StrictModel):
    """Two pools and a link. Each replica of either pool is one copy of the hardware model (its GPUs).

    A request is prefilled on a prefill replica, routed to a decode replica, admitted there (a seat and its KV),
    its prompt's KV moves over that decode replica's link (``link_latency_ms`` + bytes / ``link_bandwidth_GBps``,
    one transfer at a time), and the decode replica computes the prompt's last token, emitting the first token,
    then decodes with the arm's drafter and scheduler."""

    prefill_replicas: PositiveInt = Field(le=1024)
    decode_replicas: PositiveInt = Field(le=1024)
    link_bandwidth_GBps: PositiveFloat = Field(le=1e6)
    link_latency_ms: NonNegativeFloat = Field(default=0.0, le=1e5)
    prefill_router: Optional[Router] = None  # default: engine.router
    decode_router: Optional[Literal["round_robin", "least_loaded"]] = None  # default: engine.router
    prefill_max_batch_tokens: Optional[PositiveInt] = None  # the prefill pool's token budget; default: engine's
    prefill_chunk_tokens: Optional[PositiveInt] = None  # default: engine.prefill_chunk_tokens
    prefill_kv_cache_tokens: Optional[PositiveInt] = None  # per prefill replica; default: engine.kv_cache_tokens
    decode_kv_cache_tokens: Optional[PositiveInt] = None  # per decode replica; default: engine.kv_cache_tokens
    kv_bytes_per_token: Optional[PositiveFloat] = None  # the whole replica's KV per token; default: the model's
    # the drafter's own KV: moved with the target's, or built again by the decode replica over the prompt
    draft_kv: Literal["transfer", "recompute"] = "transfer"
    draft_kv_bytes_per_token: Optional[PositiveFloat] = None  # every arm's drafter; default: the hardware model's

    @model_validator(mode="after")
    def _chunk_within_budget(self) -> "DisaggregationConfig":
        if (self.prefill_chunk_tokens is not None and self.prefill_max_batch_tokens is not None
                and self.prefill_chunk_tokens > self.prefill_max_batch_tokens):
            raise ValueError("prefill_chunk_tokens must be at most prefill_max_batch_tokens")
        return self

    @property
    def num_replicas(self) -> int:
        return self.prefill_replicas + self.decode_replicas

    @property
    def link_bytes_per_s(self) -> float:
        return self.link_bandwidth_GBps * 1e9

    @property
    def link_latency_s(self) -> float:
        return self.link_latency_ms / 1e3
