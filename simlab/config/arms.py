"""Arms: a drafter method, a draft length gamma and a verify-length scheduler."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, ValidationInfo, field_validator

from simlab.config.base import StrictModel
from simlab.schedulers.registry import DEFAULT_KIND, config_union

Method = Literal["none", "mtp", "eagle3", "dflash", "dspark"]
METHODS: tuple[str, ...] = ("none", "mtp", "eagle3", "dflash", "dspark")
MAX_GAMMA = 16


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
