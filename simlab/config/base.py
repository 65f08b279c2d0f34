"""The base of every config object: strict (unknown fields are errors) and immutable."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """A validated config object. Unknown fields are rejected so that typos surface as errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)
