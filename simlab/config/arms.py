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


class Arm(StrictModel):
    """One configuration simulated side by side with the others on the same requests."""

    name: Optional[str] = Field(default=None, min_length=1, max_length=80, pattern=r"^[A-Za-z0-9_.+=-]+$")
    method: Method
    gamma: Optional[int] = Field(default=None, ge=1, le=MAX_GAMMA, validate_default=True)
    scheduler: Optional[SchedulerConfig] = Field(default=None, validate_default=True)
    calibration: Literal["sts", "none"] = "sts"

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
