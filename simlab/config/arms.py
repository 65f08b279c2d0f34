"""Arms: a drafter method, a draft length gamma and a verify-length scheduler."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, ValidationInfo, field_validator, model_validator

from simlab.config.base import StrictModel
from simlab.schedulers.registry import DEFAULT_KIND, REGISTRY, config_union

Method = Literal["none", "mtp", "eagle3", "dflash", "dspark", "draft_model", "ngram", "suffix"]
METHODS: tuple[str, ...] = ("none", "mtp", "eagle3", "dflash", "dspark", "draft_model", "ngram", "suffix")
LOOKUP_METHODS: tuple[str, ...] = ("ngram", "suffix")  # no GPU drafter: a host-side lookup in the context
MAX_GAMMA = 16
NGRAM_DEFAULT_WINDOW = (5, 5)  # vLLM's prompt_lookup_min/max when an ngram config gives neither


SchedulerConfig = config_union(arm=True)


class TreeConfig(StrictModel):
    """An EAGLE-3 draft tree (docs/acceptance.md section 8): ``topk`` candidates per node, ``num_draft_tokens``
    tokens verified per request and round (the root's included, as SGLang counts them); the arm's gamma is its
    depth. ``catch``: the rank model's share of the top-1's misses the next candidate catches (default: the
    calibration on Llama-3.1-8B-Instruct's EAGLE-3 chains and trees)."""

    topk: int = Field(ge=1, le=64)
    num_draft_tokens: int = Field(ge=2, le=1024)
    catch: Optional[float] = Field(default=None, ge=0.0, le=1.0)


class Arm(StrictModel):
    """One configuration simulated side by side with the others on the same requests."""

    name: Optional[str] = Field(default=None, min_length=1, max_length=80, pattern=r"^[A-Za-z0-9_.+=-]+$")
    method: Method
    gamma: Optional[int] = Field(default=None, ge=1, le=MAX_GAMMA, validate_default=True)
    scheduler: Optional[SchedulerConfig] = Field(default=None, validate_default=True)
    calibration: Literal["sts", "none"] = "sts"
    tree: Optional[TreeConfig] = None
    # method draft_model: the small model that drafts (a catalogue name or a config.json, as hardware's model:)
    draft_model: Optional[str] = Field(default=None, min_length=1)
    # its tensor parallelism: the target's (left out) or 1 (vLLM's draft_tensor_parallel_size: every GPU then runs
    # the whole small model)
    draft_tensor_parallel: Optional[int] = Field(default=None, ge=1, le=64)
    # method ngram: the shortest and longest n-gram matched in the context (vLLM's prompt_lookup_min/max)
    prompt_lookup_min: Optional[int] = Field(default=None, ge=1, le=64)
    prompt_lookup_max: Optional[int] = Field(default=None, ge=1, le=64)
    # methods ngram and suffix: the longest continuation the lookup stores (vLLM's suffix_decoding_max_tree_depth,
    # default 24; SGLang's speculative_ngram_max_trie_depth, default 18): gamma may not exceed it
    lookup_depth: Optional[int] = Field(default=None, ge=1, le=1024)
    # speculation off in a step where more requests decode than this (TensorRT-LLM's max_concurrency; vLLM
    # 0.34's num_speculative_tokens_per_batch_size with 0 drafts above it; TensorRT-LLM's AUTO n-gram sets 32)
    max_concurrency: Optional[int] = Field(default=None, ge=1, le=1_000_000)
    # at most this many requests draft a step, the first admitted (Arctic Inference's soft disable_by_batch_size,
    # 64 by default with suffix decoding: above it only the first N requests draft)
    max_drafting: Optional[int] = Field(default=None, ge=1, le=1_000_000)

    @field_validator("gamma")
    @classmethod
    def _gamma_fits_method(cls, gamma: Optional[int], info: ValidationInfo) -> Optional[int]:
        method = info.data.get("method")
        if method == "none" and gamma is not None:
            raise ValueError("method 'none' drafts nothing: leave gamma out")
        if method not in (None, "none") and gamma is None:
            raise ValueError(f"method {method!r} needs gamma, an integer from 1 to {MAX_GAMMA}")
        return gamma

    @field_validator("scheduler")
    @classmethod
    def _scheduler_fits_method(cls, scheduler, info: ValidationInfo):
        if info.data.get("method") == "none" and scheduler is not None and scheduler.kind != DEFAULT_KIND:
            raise ValueError("method 'none' has no scheduler: leave scheduler out")
        return scheduler

    @field_validator("tree")
    @classmethod
    def _tree_fits_arm(cls, tree: Optional[TreeConfig], info: ValidationInfo) -> Optional[TreeConfig]:
        if tree is None:
            return tree
        method, gamma, scheduler = info.data.get("method"), info.data.get("gamma"), info.data.get("scheduler")
        if method != "eagle3":
            raise ValueError(f"a draft tree is drafted by eagle3, not by {method!r}")
        if gamma is None:
            return tree
        most = tree.topk + (gamma - 1) * tree.topk * tree.topk  # topk at depth 1, topk^2 at every deeper one
        if tree.num_draft_tokens - 1 > most:
            raise ValueError(f"num_draft_tokens {tree.num_draft_tokens} needs {tree.num_draft_tokens - 1} draft "
                             f"tokens but a tree of depth {gamma} (gamma) and topk {tree.topk} holds at most {most}")
        if scheduler is not None and scheduler.kind != DEFAULT_KIND:
            raise ValueError(f"a tree arm verifies its whole tree each round: scheduler {DEFAULT_KIND} (or leave "
                             f"it out), not {scheduler.kind!r}")
        return tree

    @model_validator(mode="after")
    def _method_fields(self) -> "Arm":
        if self.method == "draft_model" and self.draft_model is None:
            raise ValueError("method 'draft_model' needs draft_model: the small model's catalogue name or config.json")
        if self.method != "draft_model" and (self.draft_model is not None or self.draft_tensor_parallel is not None):
            raise ValueError(f"draft_model and draft_tensor_parallel are method 'draft_model''s, not {self.method!r}'s")
        lookup = (self.prompt_lookup_min, self.prompt_lookup_max)
        if self.method != "ngram" and lookup != (None, None):
            raise ValueError(f"prompt_lookup_min/max are method 'ngram''s, not {self.method!r}'s")
        if self.lookup_depth is not None and self.method not in LOOKUP_METHODS:
            raise ValueError(f"lookup_depth is a lookup drafter's (ngram, suffix), not {self.method!r}'s")
        if self.lookup_depth is not None and self.gamma is not None and self.gamma > self.lookup_depth:
            raise ValueError(f"gamma {self.gamma} is above lookup_depth {self.lookup_depth}: a lookup that stores "
                             f"continuations of at most {self.lookup_depth} tokens cannot propose {self.gamma}")
        if self.max_drafting is not None:
            if self.method == "none":
                raise ValueError("method 'none' drafts nothing: leave max_drafting out")
            if self.scheduler is not None and REGISTRY[self.scheduler.kind].plan_draft is not None:
                raise ValueError(f"the {self.scheduler.kind} scheduler plans which requests draft: leave max_drafting "
                                 "out, or use a scheduler that does not")
            if self.tree is not None:
                raise ValueError("a tree arm drafts every request's tree: leave max_drafting out")
        if self.method == "none" and self.max_concurrency is not None:
            raise ValueError("method 'none' drafts nothing: leave max_concurrency out")
        if self.method == "ngram" and self.lookup_window[0] > self.lookup_window[1]:
            raise ValueError(f"prompt_lookup_min {self.lookup_window[0]} is above prompt_lookup_max "
                             f"{self.lookup_window[1]}")
        return self

    @property
    def lookup_window(self) -> tuple[int, int]:
        """An ngram arm's shortest and longest n-gram matched: what it gives, else vLLM's defaults (one given
        alone stands for both, as vLLM reads it)."""
        low, high = self.prompt_lookup_min, self.prompt_lookup_max
        if low is None and high is None:
            return NGRAM_DEFAULT_WINDOW
        return (low if low is not None else high, high if high is not None else low)  # type: ignore[return-value]

    @property
    def draft_len(self) -> int:
        """Positions drafted per round (0 for no speculation)."""
        return 0 if self.method == "none" else int(self.gamma or 0)

    @property
    def scheduler_kind(self) -> str:
        return "none" if self.method == "none" else (self.scheduler.kind if self.scheduler else DEFAULT_KIND)

    @property
    def label(self) -> str:
        """The arm's name, or one made from its method, scheduler and gamma."""
        if self.name:
            return self.name
        if self.method == "none":
            return "no-spec"
        return f"{self.method}-{self.scheduler_kind}-{self.draft_len}"
