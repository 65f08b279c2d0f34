"""Finding a trace: a bare name registered in the shipped traces/index.yaml, or a path.

``traces/index.yaml`` maps short names to files in the same folder, with their format, licence, source and a
description. Anything that is not a bare name (see :func:`simlab.common.resources.is_bare_name`) is a path,
resolved against the scenario file's folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import yaml

from simlab.common.errors import InputError
from simlab.common.resources import is_bare_name, resolve_path, shipped_dir
from simlab.config.workload import TraceFormat

INDEX_FILE = "index.yaml"
_FORMATS = TraceFormat.__args__  # type: ignore[attr-defined]
_ENTRY_FIELDS = ("file", "format", "licence", "source", "description")


@dataclass(frozen=True)
class ShippedTrace:
    """One entry of traces/index.yaml."""

    name: str
    path: Path
    format: str
    licence: str
    source: str
    description: str


@dataclass(frozen=True)
class TraceLocation:
    """Where a trace is: its file, and the shipped entry when it was named by a bare name."""

    path: Path
    shipped: Optional[ShippedTrace] = None

    @property
    def label(self) -> str:
        """The shipped name, or the path as text."""
        return self.shipped.name if self.shipped else str(self.path)

    def format_for(self, declared: Optional[str], has_columns: bool) -> Optional[str]:
        """The format to read with: the declared one, else the registered one (unless a column mapping is
        given, which asks for the generic reader), else None (inferred from the file)."""
        if declared or has_columns or self.shipped is None:
            return declared
        return self.shipped.format


def shipped_traces() -> dict[str, ShippedTrace]:
    """The traces registered in the shipped traces/index.yaml, by name (empty when there is none)."""
    folder = shipped_dir("traces")
    index = folder / INDEX_FILE
    if not index.is_file():
        return {}
    with index.open(encoding="utf-8") as fh:
        data = yaml.safe_load(fh) or {}
    entries = data.get("traces") if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        raise InputError("must be a mapping with a 'traces' mapping of name -> entry", file=index)
    traces = {}
    for name, entry in entries.items():
        missing = [key for key in _ENTRY_FIELDS if not isinstance(entry, dict) or key not in entry]
        if missing:
            raise InputError(f"missing {', '.join(missing)}", file=index, field=f"traces.{name}",
                             valid="each entry has " + ", ".join(_ENTRY_FIELDS))
        if entry["format"] not in _FORMATS:
            raise InputError("unknown format", file=index, field=f"traces.{name}.format", value=entry["format"],
                             valid=", ".join(_FORMATS))
        traces[str(name)] = ShippedTrace(
            name=str(name),
            path=folder / str(entry["file"]),
            format=str(entry["format"]),
            licence=str(entry["licence"]),
            source=str(entry["source"]).strip(),
            description=str(entry["description"]).strip(),
        )
    return traces


def locate_trace(text: str, *, base_dir: Path, file: str | Path | None, field: str) -> TraceLocation:
    """Resolve ``text`` (a shipped name or a path) to an existing trace file, or raise :class:`InputError`.

    ``file`` and ``field`` name where ``text`` was written (the scenario file and e.g. ``workload.path``).
    """
    traces = shipped_traces()
    names = ", ".join(sorted(traces)) or "(none)"
    if text in traces or is_bare_name(text):
        entry = traces.get(text)
        if entry is None:
            local = resolve_path(text, base_dir)
            hint = f"; to use the file {local}, write ./{text}" if local.is_file() else ""
            raise InputError(
                f"no shipped trace of this name (looked in {shipped_dir('traces') / INDEX_FILE}){hint}",
                file=file, field=field, value=text, valid=f"a shipped trace ({names}) or a path to a trace file",
            )
        if not entry.path.is_file():
            raise InputError(f"the shipped trace's file is missing: {entry.path}", file=file, field=field,
                             value=text, valid=f"a shipped trace ({names}) or a path to a trace file")
        return TraceLocation(path=entry.path, shipped=entry)
    path = resolve_path(text, base_dir)
    if not path.is_file():
        raise InputError(
            f"no such trace file (looked for {path.resolve()})", file=file, field=field, value=text,
            valid=f"a path to a CSV or JSONL trace (relative to {base_dir.resolve()}) or a shipped trace: {names}",
        )
    return TraceLocation(path=path)
