"""The audit file's schema: what one ``simlab audit`` input may say, validated field by field.

Probabilities are kept exact: a YAML number is read through its decimal text (``0.1`` is 1/10, not the
nearest binary float) and a string such as ``"1/3"`` is read as that fraction. Confidences and the SPS
curve only feed the schedulers' discrete decisions, so they are plain floats.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Annotated, Optional, Union

from pydantic import BeforeValidator, Field, PositiveInt, StringConstraints, field_validator

from simlab.config.base import StrictModel
from simlab.schedulers.registry import config_union

MAX_GAMMA = 6
MAX_OUTPUT_TOKENS = 8
MAX_VOCAB = 8
MAX_TREE_BRANCHING = 4
PROBABILITY_HINT = "a number in [0, 1] or an exact fraction in quotes such as '1/3'"


def _exact_probability(value: object) -> Fraction:
    """A probability from YAML, exactly: numbers via their decimal text, strings as fractions."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"not a probability; valid: {PROBABILITY_HINT}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"not a finite number; valid: {PROBABILITY_HINT}")
    try:
        exact = Fraction(str(value).strip())
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"not a number or fraction; valid: {PROBABILITY_HINT}") from None
    if not 0 <= exact <= 1:
        raise ValueError(f"outside [0, 1]; valid: {PROBABILITY_HINT}")
    return exact


def _symbol_text(value: object) -> object:
    """YAML reads a bare ``1`` as an integer; a symbol is its text."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


Probability = Annotated[Fraction, BeforeValidator(_exact_probability)]
Symbol = Annotated[str, BeforeValidator(_symbol_text), StringConstraints(pattern=r"^\S+$")]
UnitFloat = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]


def _scheduler_shorthand(value: object) -> object:
    """A bare name such as ``hardware_aware`` means ``{kind: hardware_aware}``."""
    return {"kind": value} if isinstance(value, str) else value


AuditScheduler = Annotated[config_union(audit=True), BeforeValidator(_scheduler_shorthand)]


class MarkovTable(StrictModel):
    """A first-order Markov chain over the vocabulary, the same at every position.

    ``start`` is the distribution of the first token of the output; ``after[s]`` the distribution of the
    next token when the previous token of the sequence being built is ``s``. Symbols left out of a row
    have probability 0.
    """

    start: dict[Symbol, Probability]
    after: dict[Symbol, dict[Symbol, Probability]]


class ConfidenceTable(StrictModel):
    """The confidence head: ``start`` is c_1 (every round); for k >= 2, c_k = ``after[x_{k-1}]`` where
    x_{k-1} is the token drafted at the previous position of the same block."""

    start: UnitFloat
    after: dict[Symbol, UnitFloat]


class AuditFile(StrictModel):
    """One losslessness audit: a vocabulary, target and draft chains, a confidence head, an SPS curve,
    the number of output tokens N whose joint distribution is compared, and the schedulers to audit.

    ``prior_confidence`` is what ``async_topk``/``goodput`` see as "lagged" confidences in the first
    ``lag_steps`` rounds of a request, before any round that far back exists: one value for every
    position or a list of ``gamma`` values (default: ``confidence.start`` at every position).
    ``sps`` maps batch tokens B to target steps per second; a B that is not in the table is unavailable
    (its verify cost is infinite, so cost-aware schedulers never choose it). B = 1 must be present.
    ``draft_s`` maps a draft length d = 1..gamma to the drafter's seconds for one request drafting d positions,
    in the same unit as 1 / SPS (default: drafting is free); schedulers that plan their draft read it.
    """

    vocab: list[Symbol] = Field(min_length=1, max_length=MAX_VOCAB)
    gamma: int = Field(ge=1, le=MAX_GAMMA)
    target: MarkovTable
    draft: MarkovTable
    confidence: ConfidenceTable
    prior_confidence: Optional[Union[UnitFloat, list[UnitFloat]]] = None
    sps: dict[PositiveInt, Annotated[float, Field(gt=0.0, allow_inf_nan=False)]] = Field(min_length=1)
    draft_s: Optional[dict[PositiveInt, Annotated[float, Field(ge=0.0, allow_inf_nan=False)]]] = None
    num_output_tokens: int = Field(ge=1, le=MAX_OUTPUT_TOKENS)
    schedulers: list[AuditScheduler] = Field(min_length=1)
    # draft trees verified whole by recursive rejection sampling: children per node at each depth, the root's first
    trees: list[Annotated[list[Annotated[int, Field(ge=1, le=MAX_TREE_BRANCHING)]],
                          Field(min_length=1, max_length=MAX_GAMMA)]] = Field(default_factory=list)

    @field_validator("vocab")
    @classmethod
    def _distinct(cls, vocab: list[str]) -> list[str]:
        seen: set[str] = set()
        for symbol in vocab:
            if symbol in seen:
                raise ValueError(f"symbol {symbol!r} is listed twice; valid: distinct symbols")
            seen.add(symbol)
        return vocab
