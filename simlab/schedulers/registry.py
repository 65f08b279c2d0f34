"""The scheduler registry: one entry per verify-length policy, the one place that knows scheduler names.

An entry holds the policy function, its parameter model (pydantic, with the defaults), named capability flags
and a one-line summary. Everything else derives from the registry: the scenario's scheduler config union
(:mod:`simlab.config.arms`), the audit file's union (:mod:`simlab.audit.schema`), the real-mode CLI's choices and
the table in docs/schedulers.md (a test checks they agree).

Adding a scheduler: write its function (``inputs, **params -> lengths``) and add one :class:`SchedulerEntry`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Callable, Literal, Optional, Union

import numpy as np
from pydantic import BaseModel, Field, NonNegativeInt, create_model

from simlab.common.strict import StrictModel
from simlab.schedulers import adaptive, policies
from simlab.schedulers.inputs import ScheduleInputs


class NoParams(StrictModel):
    """No parameters."""


SpsView = Literal["staircase", "smooth", "monotone"]  # simlab.hardware.sps_view


class CostViewParams(StrictModel):
    """A scheduler that reads the verify cost: ``sps`` names the curve it reads (left out: its engine's own view
    of the steps, simlab.hardware.sps_view). Not passed to the policy function: the engine hands it that curve."""

    sps: Optional[SpsView] = Field(
        default=None, description="staircase, smooth or monotone; default: its engine's view"
    )


class ThresholdParams(StrictModel):
    threshold: float = Field(gt=0.0, lt=1.0)
    cumulative: bool = False


class AsyncTopKParams(CostViewParams):
    lag_steps: int = Field(default=2, ge=1, le=64)


class GoodputParams(CostViewParams):
    lag_steps: NonNegativeInt = Field(default=1, le=64)


class AdaptiveParams(CostViewParams):
    lag_steps: int = Field(default=1, ge=1, le=64)
    slo_tpot_ms: Optional[float] = Field(default=None, gt=0.0)


@dataclass(frozen=True)
class SchedulerEntry:
    """A verify-length policy and what the engine, the audit and the docs need to know about it.

    Capabilities: ``reads_confidence`` (the head's estimates), ``reads_verify_cost`` (``verify_s``),
    ``reads_draft_cost`` (``draft_s``: callers may skip computing it otherwise), ``reads_truth`` (the true
    outcomes: not realisable), ``lossless`` (a constant, or a function of the parameters). Where it may be used:
    ``arm`` (a scenario arm), ``audit`` (``simlab audit``), ``real`` (the real engine). A policy reads lagged
    confidences exactly when its parameter model has ``lag_steps``. ``block_code`` numbers the policies the
    simulator's compiled block (:mod:`simlab.engine.block_kernel`) runs itself."""

    kind: str
    function: Callable[..., np.ndarray]
    params: type[StrictModel]
    summary: str
    reads_confidence: bool = True
    reads_verify_cost: bool = False
    reads_draft_cost: bool = False
    reads_truth: bool = False
    lossless: bool | Callable[[dict], bool] = True
    lossless_note: str = "yes"
    arm: bool = True
    audit: bool = True
    real: bool = True
    plan_draft: Optional[Callable[..., tuple]] = None  # chooses what to draft first: (lengths, drafting, min budget)
    block_code: Optional[int] = None  # its number in the simulator's compiled block (None: the block stays numpy)

    @property
    def reads_lag(self) -> bool:
        return "lag_steps" in self.params.model_fields

    def is_lossless(self, params: dict) -> bool:
        return self.lossless(params) if callable(self.lossless) else bool(self.lossless)

    @property
    def realisable(self) -> bool:
        return not self.reads_truth


REGISTRY: dict[str, SchedulerEntry] = {
    entry.kind: entry
    for entry in (
        SchedulerEntry(
            "fixed", policies.fixed, NoParams, "verifies every drafted position", reads_confidence=False,
            block_code=0,
        ),
        SchedulerEntry(
            "threshold", policies.threshold, ThresholdParams,
            "cuts each request at its first position with ĉ_k < threshold (with `cumulative`, a_k < threshold); "
            "ignores load",
            block_code=2,
        ),
        SchedulerEntry(
            "hardware_aware", policies.hardware_aware, CostViewParams,
            "DSpark Algorithm 1: sort all (r, j) by a descending, start from ℓ = 0 (Θ = R·SPS(R)), admit candidates "
            "while Θ = τ·SPS(B) strictly rises, stop at the first that does not",
            reads_verify_cost=True, block_code=1,
        ),
        SchedulerEntry(
            "async_topk", policies.async_topk, AsyncTopKParams,
            "production variant: the budget K is the global argmax of τ·SPS(B) over the path built from each "
            "request's confidences `lag_steps` decode steps earlier; the step takes the global top-K of the current a",
            reads_verify_cost=True, block_code=3,
        ),
        SchedulerEntry(
            "goodput", policies.goodput, GoodputParams,
            "vLLM/SGLang adaptive verification: K maximises expected tokens ÷ (draft + verify seconds) over lagged "
            "confidences, then top-K of the current a",
            reads_verify_cost=True, reads_draft_cost=True,
            lossless=lambda params: params["lag_steps"] >= 1, lossless_note="yes when `lag_steps` ≥ 1",
            block_code=4,
        ),
        SchedulerEntry(
            "adaptive", adaptive.verify, AdaptiveParams,
            "chooses the draft length and which requests draft from confidences `lag_steps` steps old, the batch and "
            "the cost curves, for the most expected tokens per second of the whole step (draft + verify), then "
            "verifies as Algorithm 1 with the step's draft cost; `slo_tpot_ms` keeps the expected TPOT within it",
            reads_verify_cost=True, reads_draft_cost=True, real=False, plan_draft=adaptive.plan_draft,
            block_code=6,
        ),
        SchedulerEntry(
            "oracle", policies.oracle, CostViewParams,
            "knows how many positions the target accepts; verifies exactly those (choosing the count that "
            "maximises (R+K)·SPS(R+K))",
            reads_confidence=False, reads_verify_cost=True, reads_truth=True, lossless=False,
            lossless_note="an upper bound: not realisable, not lossless", audit=False, real=False,
            block_code=5,
        ),
        SchedulerEntry(
            "retrospective", policies.retrospective, CostViewParams,
            "Algorithm 1's path with a global argmax of Θ instead of the early stop: the audit's negative control",
            reads_verify_cost=True, lossless=False, lossless_note="no (audit only)", arm=False, real=False,
        ),
    )
}

DEFAULT_KIND = "fixed"
"""The scheduler of an arm that names none (and the only one an arm without drafting may name)."""


def entry(kind: str) -> SchedulerEntry:
    """The registry entry of ``kind`` (KeyError for unknown kinds)."""
    return REGISTRY[kind]


def kinds(*, arm: Optional[bool] = None, audit: Optional[bool] = None, real: Optional[bool] = None) -> list[str]:
    """Registered kinds, in registry order, filtered by where they may be used."""
    wanted = {"arm": arm, "audit": audit, "real": real}
    return [k for k, e in REGISTRY.items() if all(v is None or getattr(e, name) == v for name, v in wanted.items())]


_CONFIG_MODELS: dict[str, type[BaseModel]] = {}


def config_model(kind: str) -> type[BaseModel]:
    """The config class of ``kind``: its parameter model plus ``kind: Literal[kind]`` (one class per kind)."""
    if kind not in _CONFIG_MODELS:
        e = REGISTRY[kind]
        name = "".join(part.capitalize() for part in kind.split("_")) + "Scheduler"
        model = create_model(name, __base__=e.params, __doc__=e.summary,
                             kind=(Literal[kind], ...))  # type: ignore[valid-type]
        _CONFIG_MODELS[kind] = model
    return _CONFIG_MODELS[kind]


def config_union(**where: bool):
    """The discriminated union (on ``kind``) of the config classes of the kinds ``kinds(**where)`` lists."""
    members = tuple(config_model(kind) for kind in kinds(**where))
    return Annotated[Union[members], Field(discriminator="kind")]  # type: ignore[valid-type]


@dataclass(frozen=True)
class Scheduler:
    """A policy with its parameters bound (validated by its parameter model, defaults filled in)."""

    kind: str
    params: dict
    entry: SchedulerEntry
    sps: Optional[str] = None  # the verify-cost curve it reads (CostViewParams; None: its engine's own view)

    @cached_property  # read every engine iteration
    def lag_steps(self) -> int:
        return int(self.params["lag_steps"]) if self.entry.reads_lag else 0

    @property
    def lossless(self) -> bool:
        return self.entry.is_lossless(self.params)

    def __call__(self, inputs: ScheduleInputs) -> np.ndarray:
        return self.entry.function(inputs, **self.params)

    @cached_property
    def plans_draft(self) -> bool:
        return self.entry.plan_draft is not None

    def plan_draft(self, inputs: ScheduleInputs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Draft lengths [S], which requests draft [S, R] and the least verify budget [S] (schedulers with a
        draft plan only)."""
        return self.entry.plan_draft(inputs, **self.params)


def make_scheduler(kind: str, **params) -> Scheduler:
    """The scheduler ``kind`` with ``params`` (KeyError for unknown kinds; pydantic's ValidationError for
    parameters its model rejects, unknown ones included)."""
    e = REGISTRY[kind]
    bound = e.params.model_validate(params).model_dump()
    sps = bound.pop("sps", None)
    return Scheduler(kind=kind, params=bound, entry=e, sps=sps)


def from_config(config) -> Scheduler:
    """Build from a scheduler config object (an instance of a :func:`config_model` class; None: the default)."""
    if config is None:
        return make_scheduler(DEFAULT_KIND)
    return make_scheduler(config.kind, **config.model_dump(exclude={"kind"}))


def _describe_field(name: str, field) -> str:
    """``name`` with its range and default, e.g. ``lag_steps`` (1 ≤ · ≤ 64, default 2)."""
    low = high = ""
    for rule in field.metadata:
        for attr, sign in (("ge", "≤"), ("gt", "<"), ("le", "≤"), ("lt", "<")):
            value = getattr(rule, attr, None)
            if value is not None:
                if attr in ("ge", "gt"):
                    low = f"{value:g} {sign} "
                else:
                    high = f" {sign} {value:g}"
    if field.description:
        return f"`{name}` ({field.description})"
    parts = [f"{low}·{high}"] if low or high else []
    if field.is_required():
        parts.append("required")
    else:
        default = field.default
        parts.append(f"default {str(default).lower() if isinstance(default, bool) else default}")
    return f"`{name}` ({', '.join(parts)})"


def markdown_table() -> str:
    """The table of docs/schedulers.md: kind, parameters with ranges and defaults, what it does, lossless."""
    rows = ["| `kind` | parameters | what it does | lossless |", "|---|---|---|---|"]
    for kind in kinds(arm=True):
        e = REGISTRY[kind]
        params = ", ".join(_describe_field(name, field) for name, field in e.params.model_fields.items())
        rows.append(f"| `{kind}` | {params or '–'} | {e.summary} | {e.lossless_note} |")
    return "\n".join(rows)


def write_docs_table(path: str = "docs/schedulers.md") -> bool:
    """Rewrite the generated table in ``path``; True when it changed."""
    from simlab.common.doc_tables import replace_between

    return replace_between(path, "registry table", markdown_table())


def load_compiled() -> None:
    """Load the compiled path walks every scheduler uses (from numba's cache; compiled there on first use), by
    running each scheduler once on a tiny step: a simulation then times its arms without the loading (about
    0.3 s per process), and worker processes forked afterwards inherit the loaded code."""
    steps, num_requests, gamma = 2, 3, 2
    conf = np.full((steps, num_requests, gamma), 0.5)
    max_len = np.full((steps, num_requests), gamma)
    inputs = ScheduleInputs(
        conf=conf, max_len=max_len, verify_s=lambda batch_tokens: 0.01 + 1e-4 * np.asarray(batch_tokens, float),
        draft_s=np.full(steps, 1e-3), token_budget=np.full(steps, 3), lagged_conf=conf, lagged_max_len=max_len,
        true_accepted=np.ones((steps, num_requests), dtype=np.int64),
        draft_cost=lambda draft_len, num_drafting: 1e-3 * np.asarray(draft_len, float) * (np.asarray(num_drafting) > 0))
    variants = {"threshold": [{"threshold": 0.4}], "adaptive": [{}, {"slo_tpot_ms": 20.0}]}  # the compiled paths
    for kind in REGISTRY:
        for params in variants.get(kind, [{}]):
            scheduler = make_scheduler(kind, **params)
            inputs.min_budget = scheduler.plan_draft(inputs)[2] if scheduler.plans_draft else None
            scheduler(inputs)
