"""A sweep folder read back for its report: the table, the load axis, the facets and each arm's kind."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

import pandas as pd

from simlab.common.errors import InputError
from simlab.studies.figures import field_label, format_value, short_field
from simlab.studies.search import FIND_DEFAULTS

LOAD_FIELDS = tuple(FIND_DEFAULTS) + ("engine.max_num_seqs",)
RATE_FIELDS = ("workload.time_scale", "workload.rate")


@dataclass
class SweepData:
    """``table``: sweep.csv (successful rows); ``x``: the field on the load axis; ``facets``: the other varied
    fields, one panel per combination of their values."""

    folder: Path
    doc: dict
    table: pd.DataFrame
    failed: pd.DataFrame
    positions: Optional[pd.DataFrame]
    x: str
    facets: list[str]

    @property
    def point_settings(self) -> dict[str, dict]:
        """Each point's setting (:func:`simlab.studies.study_setting.scenario_setting`), by point id; empty for a
        sweep.json written before simlab recorded them."""
        return {p["id"]: p["setting"] for p in self.doc["points"] if p.get("setting")}

    @property
    def settings(self) -> list[dict]:
        return list(self.point_settings.values())

    @property
    def x_is_rate(self) -> bool:
        """Whether the load axis shows requests/s: the varied field scales an open loop's or a trace's arrivals
        (``workload.time_scale``: a smaller scale is more load) and every point recorded its arrival rate."""
        rates = self.point_settings
        return (self.x in RATE_FIELDS and len(rates) == len(self.doc["points"])
                and all(s.get("arrival_rate_rps") for s in rates.values()))

    @property
    def x_label(self) -> str:
        """The load axis's label, with its unit."""
        if self.x_is_rate:
            return f"arrival rate (requests/s; varied: {short_field(self.x)})"
        return field_label(self.x)

    @property
    def arms(self) -> list[str]:
        return list(self.doc["arms"])

    @property
    def arm_kinds(self) -> dict[str, dict]:
        return self.doc.get("arm_kinds", {})

    @property
    def x_numeric(self) -> bool:
        return pd.api.types.is_numeric_dtype(self.table[self.x]) if len(self.table) else True

    def x_values(self, frame: pd.DataFrame) -> pd.Series:
        """Positions on the load axis: the values, or their order of appearance for a non-numeric field."""
        if self.x_is_rate:
            rates = {pid: s["arrival_rate_rps"] for pid, s in self.point_settings.items()}
            return frame["point"].map(rates).astype(float)
        if self.x_numeric:
            return frame[self.x].astype(float)
        return frame[self.x].map({v: i for i, v in enumerate(self.x_categories)})

    @property
    def x_categories(self) -> list[Any]:
        seen: dict[Any, None] = {}
        for point in self.doc["points"]:
            seen.setdefault(point["values"][self.x], None)
        return list(seen)

    def facet_frames(self) -> Iterator[tuple[str, pd.DataFrame]]:
        """(title, rows) for each combination of the facet fields, in the sweep's order."""
        if not self.facets:
            yield "", self.table
            return
        combos: dict[tuple, list[str]] = {}
        for point in self.doc["points"]:
            combo = tuple(json.dumps(point["values"][f], sort_keys=True) for f in self.facets)
            combos.setdefault(combo, []).append(point["id"])
        for combo, ids in combos.items():
            title = facet_title(dict(zip(self.facets, (json.loads(t) for t in combo))))
            yield title, self.table[self.table["point"].isin(ids)]


def facet_title(values: dict[str, Any]) -> str:
    """A panel's title from its facet values: ``bias_logit=0.85, concurrency=32``; a disaggregation's pools as
    ``prefill:decode 3:5`` (its zipped ``replicas=1`` left out) and no pools as ``co-located, 8 replicas``."""
    split = "engine.disaggregation"
    if split in values:
        pools = values[split]
        rest = {k: v for k, v in values.items() if k not in (split, "engine.replicas")}
        head = (f"prefill:decode {format_value(pools).split()[0]}" if pools else
                f"co-located, {values.get('engine.replicas', '')} replicas".replace(",  replicas", ""))
        return ", ".join([head, *(f"{short_field(f)}={format_value(v)}" for f, v in rest.items())])
    return ", ".join(f"{short_field(f)}={format_value(v)}" for f, v in values.items())


def read_sweep_folder(folder: str | Path) -> SweepData:
    """Read sweep.json, sweep.csv and positions.csv (when there) of a sweep folder."""
    folder = Path(folder)
    missing = [n for n in ("sweep.json", "sweep.csv") if not (folder / n).is_file()]
    if missing:
        raise InputError(f"not a sweep folder (missing {', '.join(missing)})", file=folder,
                         valid="a folder written by `simlab sweep`")
    doc = json.loads((folder / "sweep.json").read_text(encoding="utf-8"))
    fields = list(doc["fields"])
    frame = pd.read_csv(folder / "sweep.csv", dtype={"point": str, "arm": str, "error": str},
                        keep_default_na=False, na_values=[""])
    for field in fields:  # the values as the scenario gave them (JSON cells for lists and mappings)
        by_point = {p["id"]: p["values"][field] for p in doc["points"]}
        frame[field] = frame["point"].map(by_point)
    failed = frame[frame["error"].notna()]
    table = frame[frame["error"].isna()].reset_index(drop=True)
    positions = None
    if (folder / "positions.csv").is_file():
        positions = pd.read_csv(folder / "positions.csv", dtype={"point": str, "arm": str})
    x = _choose_x(doc, fields, table)
    sweep_block = (doc.get("scenario") or {}).get("sweep") or {}
    zipped = set(sweep_block.get("zip") or {})
    facets = [f for f in fields if f != x and not (x in zipped and f in zipped)]
    return SweepData(folder, doc, table, failed, positions, x, facets)


def _choose_x(doc: dict, fields: list[str], table: pd.DataFrame) -> str:
    if doc.get("load"):
        return doc["load"]
    for field in LOAD_FIELDS:  # demand (users, rate, time scale) before capacity (replicas, seats)
        if field in fields:
            return field
    for field in fields:
        if len(table) and pd.api.types.is_numeric_dtype(table[field]):
            return field
    return fields[0]
