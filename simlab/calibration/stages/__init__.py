"""Calibrating the roofline: fit its efficiencies and overheads to public measurements, state its error.

``calibrate(folder)`` reads hw_profiles/calibration/ (calibration.yaml and the measurement files it names, see
:mod:`simlab.calibration.stages.sources`), fits every GPU (:mod:`simlab.calibration.stages.fit`) and returns what
``fitted.yaml`` holds; ``dump_fitted`` renders it. ``scripts/calibrate_hardware.py`` and ``scripts/make_profiles.py``
run it; the cost models read the written file (:mod:`simlab.hardware.calibration`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import yaml

from simlab.calibration.stages.fit import Calibrator
from simlab.calibration.stages.replayed import Replay
from simlab.calibration.stages.sources import load_spec

FITTED_HEADER = (
    "# written by simlab scripts/calibrate_hardware.py from the measurements in this folder (calibration.yaml, "
    "SOURCES.md); do not edit: run python scripts/make_profiles.py\n"
)


def calibrate(folder: Path, *, on_engine: bool = True) -> dict[str, Any]:
    """Fit every GPU of ``folder``/calibration.yaml; the mapping fitted.yaml holds. Stages 3-5 fit what the engine
    simulates for each run (:func:`simlab.calibration.profile_check.replay_record`;
    :mod:`simlab.calibration.stages.replayed`), or with ``on_engine`` False their closed form alone."""
    replay: Optional[Replay] = None
    if on_engine:
        from simlab.calibration.profile_check import replay_record

        replay = replay_record
    return Calibrator(load_spec(Path(folder)), replay).run()


class _PlainDumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump_fitted(data: dict[str, Any]) -> str:
    """fitted.yaml's text: the header line, then the mapping in its own key order."""
    return FITTED_HEADER + yaml.dump(data, Dumper=_PlainDumper, sort_keys=False, default_flow_style=None,
                                     width=120, allow_unicode=True)


__all__ = ["calibrate", "dump_fitted", "FITTED_HEADER"]
