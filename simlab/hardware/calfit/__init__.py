"""Calibrating the roofline: fit its efficiencies and overheads to public measurements, state its error.

``calibrate(folder)`` reads hw_profiles/calibration/ (calibration.yaml and the measurement files it names, see
:mod:`simlab.hardware.calfit.sources`), fits every GPU (:mod:`simlab.hardware.calfit.fit`) and returns what
``fitted.yaml`` holds; ``dump_fitted`` renders it. ``scripts/calibrate_hardware.py`` and ``scripts/make_profiles.py``
run it; the cost models read the written file (:mod:`simlab.hardware.calibration`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import yaml

from simlab.hardware.calfit.fit import Calibrator
from simlab.hardware.calfit.replayed import Replay
from simlab.hardware.calfit.sources import load_spec

FITTED_HEADER = (
    "# written by simlab scripts/calibrate_hardware.py from the measurements in this folder (calibration.yaml, "
    "SOURCES.md); do not edit: run python scripts/make_profiles.py\n"
)


def calibrate(folder: Path, replay: Optional[Replay] = None) -> dict[str, Any]:
    """Fit every GPU of ``folder``/calibration.yaml; the mapping fitted.yaml holds. ``replay`` (the engine
    replay of an engine record, ``simlab.studies.profile_check.replay_record``) makes stages 3-5 fit what the
    engine simulates rather than their closed form (:mod:`simlab.hardware.calfit.replayed`)."""
    return Calibrator(load_spec(Path(folder)), replay).run()


class _PlainDumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump_fitted(data: dict[str, Any]) -> str:
    """fitted.yaml's text: the header line, then the mapping in its own key order."""
    return FITTED_HEADER + yaml.dump(data, Dumper=_PlainDumper, sort_keys=False, default_flow_style=None,
                                     width=120, allow_unicode=True)


__all__ = ["calibrate", "dump_fitted", "FITTED_HEADER"]
