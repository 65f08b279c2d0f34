"""Load a scenario file: YAML in, a validated :class:`~simlab.config.Scenario` out, or one clear error."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simlab.common.errors import InputError
from simlab.common.schema_errors import validate
from simlab.common.yaml_file import read_yaml
from simlab.config import Scenario


@dataclass(frozen=True)
class LoadedScenario:
    """A validated scenario and where it came from (relative paths resolve against ``base_dir``)."""

    scenario: Scenario
    file: Path

    @property
    def base_dir(self) -> Path:
        return self.file.parent


def load_scenario(path: str | Path, *, seed: int | None = None) -> LoadedScenario:
    """Read and validate a scenario file. ``seed`` overrides the file's seed."""
    path = Path(path)
    data = read_yaml(path, what="scenario file")
    return scenario_from_data(data, file=path, seed=seed)


def scenario_from_data(data: Any, *, file: str | Path, seed: int | None = None) -> LoadedScenario:
    """Validate a scenario given as a mapping. ``file`` names it in errors, and relative paths in it resolve
    against ``file``'s folder (it need not exist: a scenario built in code may name any path there)."""
    path = Path(file)
    if not isinstance(data, dict):
        raise InputError(
            "a scenario must be a mapping", file=path, value=_kind_of(data),
            valid="a YAML mapping with name, workload, hardware, acceptance and arms",
        )
    if "sweep" in data:
        raise InputError(
            "this scenario is a sweep (it holds sweep:), which runs one scenario per point", file=path,
            field="sweep", valid=f"`simlab sweep {path}` (or remove sweep: to run the scenario as it is)",
        )
    if seed is not None:
        data = {**data, "seed": seed}
    scenario = validate(Scenario, data, file=path)
    return LoadedScenario(scenario=scenario, file=path.resolve())


def _kind_of(data: Any) -> str:
    return "empty file" if data is None else type(data).__name__
