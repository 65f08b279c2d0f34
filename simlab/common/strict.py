"""The base of every validated object: strict (unknown fields are errors) and immutable.

It lives outside :mod:`simlab.config` so that modules the config package itself imports (the scheduler
registry, whose parameter models the config's unions are built from) can use it without an import circle."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """A validated config object. Unknown fields are rejected so that typos surface as errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)
