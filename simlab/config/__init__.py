"""Typed, validated config objects. Each union is discriminated by ``kind`` (``dist`` for lengths)."""

from simlab.config.acceptance import (
    AcceptanceConfig,
    AcceptanceSetting,
    ConfidenceConfig,
    HeterogeneityConfig,
    IIDAcceptance,
    PositionalAcceptance,
    PresetAcceptance,
)
from simlab.config.arms import METHODS, Arm, SchedulerConfig
from simlab.config.hardware import HardwareConfig, RooflineHardware, TableHardware
from simlab.config.scenario import SLO, EngineConfig, Scenario
from simlab.config.workload import WorkloadConfig

__all__ = [
    "AcceptanceConfig",
    "AcceptanceSetting",
    "Arm",
    "ConfidenceConfig",
    "EngineConfig",
    "HardwareConfig",
    "HeterogeneityConfig",
    "IIDAcceptance",
    "METHODS",
    "PositionalAcceptance",
    "PresetAcceptance",
    "RooflineHardware",
    "SLO",
    "Scenario",
    "SchedulerConfig",
    "TableHardware",
    "WorkloadConfig",
]
