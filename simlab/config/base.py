"""The base of every config object (defined in :mod:`simlab.common.strict`, re-exported here)."""

from simlab.common.strict import StrictModel

__all__ = ["StrictModel"]
