"""The base of every config object (defined in :mod:`simlab.strict`, re-exported here)."""

from simlab.strict import StrictModel

__all__ = ["StrictModel"]
