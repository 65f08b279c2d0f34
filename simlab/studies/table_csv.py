"""Deterministic CSV tables of studies: one row per point (or probe) × arm, every scalar metric a column.

Values are written the same way whatever produced them (floats as their shortest round-trip text, ``True`` and
``False``, empty for null), so two runs that computed the same numbers write the same bytes. Wall-clock
figures (``sim_wall_s``) differ between runs of the same point: they are kept out of these tables and go to
``timing.csv``.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any, Iterable

WALL_CLOCK_KEYS = frozenset({"sim_wall_s"})


def is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def metric_columns(metric_dicts: Iterable[dict]) -> list[str]:
    """Scalar metric keys in order of first appearance, without wall-clock keys."""
    keys: dict[str, None] = {}
    for metrics in metric_dicts:
        for key, value in metrics.items():
            if key not in WALL_CLOCK_KEYS and key not in keys and is_scalar(value):
                keys[key] = None
    return list(keys)


def cell(value: Any) -> str:
    """The text of one CSV cell."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (int, str)):
        return str(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def csv_text(header: list[str], rows: Iterable[list[Any]]) -> str:
    """A CSV document (``\\n`` line ends, minimal quoting)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow([cell(v) for v in row])
    return buffer.getvalue()
