"""A scenario's ``sweep:`` block and its points.

``grid:`` maps field paths to lists and takes every combination; ``zip:`` maps field paths to lists of equal
length varied together; the two combine as a product (grid outer, zip inner). Each point is a whole scenario
(plain data without ``sweep:``) whose id is a short hash of the resolved point: the validated scenario's
canonical JSON. Equal scenarios have equal ids, whatever order or spelling produced them, which is what lets a
rerun skip the points already finished.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from pydantic import Field, PositiveFloat

from simlab.common.errors import InputError
from simlab.common.schema_errors import validate
from simlab.common.strict import StrictModel
from simlab.studies.paths import check_path, set_path

POINT_ID_CHARS = 12


class SweepBlock(StrictModel):
    """The ``sweep:`` block of a scenario (see docs/studies.md)."""

    grid: dict[str, list[Any]] = Field(default_factory=dict)
    zip: dict[str, list[Any]] = Field(default_factory=dict)
    load: Optional[str] = None
    baseline: Optional[str] = Field(default=None, min_length=1)
    sla_user_tok_s: list[PositiveFloat] = Field(default_factory=list)


@dataclass(frozen=True)
class Point:
    """One scenario of a sweep: ``values`` maps each varied path to its value here, ``data`` is the scenario."""

    id: str
    values: dict[str, Any]
    data: dict
    arm_labels: tuple[str, ...]


@dataclass(frozen=True)
class Sweep:
    """A sweep read from a scenario: its block, the varied fields (grid first, then zip) and every point."""

    file: Path
    block: SweepBlock
    base: dict
    fields: tuple[str, ...]
    points: tuple[Point, ...]
    scenario_sha256: str

    @property
    def name(self) -> str:
        return str(self.base.get("name", "sweep"))

    @property
    def arm_labels(self) -> tuple[str, ...]:
        return self.points[0].arm_labels


def canonical_json(data: Any) -> str:
    """Sorted keys, no spaces: the same data always gives the same text."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def data_sha256(data: Any) -> str:
    """The SHA-256 of ``data``'s canonical JSON (a scenario's hash, as reports record it)."""
    return hashlib.sha256(canonical_json(data).encode("utf-8")).hexdigest()


def read_sweep(data: Any, *, file: str | Path) -> Sweep:
    """Check a scenario holding ``sweep:`` and expand its points. Bad input raises :class:`InputError` before
    anything runs: a malformed block, an unknown path, an empty list, zip lists of unequal length, a path
    varied twice, a point that is not a valid scenario, two points that are the same scenario, an unknown
    baseline arm or load field."""
    from simlab.config.loading import scenario_from_data

    path = Path(file)
    if not isinstance(data, dict) or "sweep" not in data:
        raise InputError("holds no sweep: block", file=path, field="sweep",
                         valid="a scenario with sweep: {grid: {FIELD: [values]}} (docs/studies.md); "
                               "run a plain scenario with `simlab run`")
    raw_block = data["sweep"]
    block: SweepBlock = validate(SweepBlock, raw_block if raw_block is not None else {}, file=path,
                                 field_prefix="sweep")
    base = {k: v for k, v in data.items() if k != "sweep"}
    if not block.grid and not block.zip:
        raise InputError("varies nothing", file=path, field="sweep",
                         valid="grid: and/or zip:, each mapping a field path to a list of values")
    parsed: dict[str, list] = {}
    for kind, mapping in (("grid", block.grid), ("zip", block.zip)):
        for key, values in mapping.items():
            where = f"sweep.{kind}.{key}"
            if key in parsed:
                raise InputError("is varied in both grid and zip", file=path, field=where,
                                 valid="each field in one of them")
            parsed[key] = check_path(base, key, file=path, field=f"sweep.{kind}")
            if not values:
                raise InputError("is an empty list: the sweep would have no points", file=path, field=where,
                                 value=values, valid="a list of at least one value")
    lengths = {key: len(values) for key, values in block.zip.items()}
    if len(set(lengths.values())) > 1:
        shown = ", ".join(f"{k} has {n}" for k, n in lengths.items())
        raise InputError(f"lists of unequal length ({shown})", file=path, field="sweep.zip",
                         valid="lists of the same length, varied together")
    fields = tuple(block.grid) + tuple(block.zip)
    if block.load is not None and block.load not in fields:
        raise InputError("is not a varied field", file=path, field="sweep.load", value=block.load,
                         valid=", ".join(fields))
    zip_rows = list(zip(*block.zip.values())) if block.zip else [()]
    points: list[Point] = []
    seen: dict[str, int] = {}
    for grid_values in itertools.product(*block.grid.values()):
        for zip_values in zip_rows:
            values = dict(zip(fields, (*grid_values, *zip_values)))
            point_data = base
            for key, value in values.items():
                point_data = set_path(point_data, parsed[key], value)
            try:
                loaded = scenario_from_data(point_data, file=path)
            except InputError as err:
                raise InputError(f"{err.problem} (at the sweep point {_describe(values)})", file=path,
                                 field=err.field, value=err.value, valid=err.valid) from None
            point_id = data_sha256(loaded.scenario.model_dump(mode="json"))[:POINT_ID_CHARS]
            if point_id in seen:
                raise InputError(f"points {seen[point_id] + 1} and {len(points) + 1} are the same scenario "
                                 f"({_describe(values)})", file=path, field="sweep",
                                 valid="lists without repeated values")
            seen[point_id] = len(points)
            labels = tuple(arm.label for arm in loaded.scenario.arms)
            points.append(Point(point_id, values, point_data, labels))
    if block.baseline is not None and block.baseline not in points[0].arm_labels:
        raise InputError("is not an arm of the scenario", file=path, field="sweep.baseline",
                         value=block.baseline, valid=", ".join(points[0].arm_labels))
    return Sweep(path.resolve(), block, base, fields, tuple(points), data_sha256(data))


def load_sweep(path: str | Path) -> Sweep:
    """Read a scenario file holding ``sweep:``."""
    from simlab.common.yaml_file import read_yaml

    return read_sweep(read_yaml(path, what="scenario file"), file=path)


def _describe(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in values.items())
