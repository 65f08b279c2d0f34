"""The SimPy serving engine: replicas with continuous batching, chunked prefill and speculative decode steps."""

from simlab.engine.decode import ArmPolicy
from simlab.engine.simulate import ArmResult, simulate_arm

__all__ = ["ArmPolicy", "ArmResult", "simulate_arm"]
