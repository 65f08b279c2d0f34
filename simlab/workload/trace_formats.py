"""Trace formats: the fixed column layouts of Azure and Mooncake traces, and inferring a file's format.

Two containers are read: CSV (a header line, then one request per line) and JSONL (one JSON object per line).
``azure`` and ``mooncake`` are fixed column layouts over CSV and JSONL; ``csv`` and ``jsonl`` take a column
mapping (:class:`~simlab.config.workload.TraceColumns`).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from pathlib import Path
from typing import IO, Optional

from simlab.common.errors import InputError
from simlab.config.workload import TraceColumns

AZURE_COLUMNS = TraceColumns(
    arrival="TIMESTAMP", prompt_tokens="ContextTokens", output_tokens="GeneratedTokens", arrival_unit="datetime"
)
MOONCAKE_COLUMNS = TraceColumns(
    arrival="timestamp", prompt_tokens="input_length", output_tokens="output_length", arrival_unit="ms"
)
PRESET_COLUMNS = {"azure": AZURE_COLUMNS, "mooncake": MOONCAKE_COLUMNS}
STANDARD_COLUMNS = TraceColumns(arrival="arrival", prompt_tokens="prompt_tokens", output_tokens="output_tokens")
"""A generic trace whose header (or first object) names these columns needs no ``columns:`` map (arrival in s)."""
CONTAINER = {"azure": "csv", "mooncake": "jsonl", "csv": "csv", "jsonl": "jsonl"}
_EXTENSIONS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}


def open_text(path: Path) -> IO[str]:
    """Open a trace as UTF-8 text, decompressing ``.gz`` files."""
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return path.open(encoding="utf-8", newline="")


def container_of(path: Path) -> str:
    """``csv`` or ``jsonl``, from the extension (``.gz`` ignored), else from the first non-blank character."""
    suffix = Path(path.stem).suffix if path.suffix == ".gz" else path.suffix
    if suffix.lower() in _EXTENSIONS:
        return _EXTENSIONS[suffix.lower()]
    with open_text(path) as fh:
        for line in fh:
            if line.strip():
                return "jsonl" if line.lstrip().startswith("{") else "csv"
    return "csv"


def header_of(path: Path, container: str) -> list[str]:
    """Column names: the CSV header, or the keys of the first JSON object (empty for an empty file)."""
    try:
        with open_text(path) as fh:
            for number, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                if container == "csv":
                    return [name.strip() for name in next(csv.reader([line]))]
                try:
                    first = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(f"not valid JSON ({exc.msg})", file=path, field=f"line {number}",
                                     valid="one JSON object per line") from None
                return list(first) if isinstance(first, dict) else []
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason})", file=path) from None
    return []


def infer_format(path: Path, declared: Optional[str], columns: Optional[TraceColumns]) -> tuple[str, list[str]]:
    """The trace's format (``declared`` if given) and its column names.

    Without a declared format: a column mapping means the generic reader for the file's container; otherwise an
    Azure header (TIMESTAMP, ContextTokens, GeneratedTokens) means ``azure`` and Mooncake keys (timestamp,
    input_length, output_length) mean ``mooncake``; anything else is the generic container format.
    """
    container = CONTAINER[declared] if declared else container_of(path)
    header = header_of(path, container)
    if declared:
        return declared, header
    if columns is None:
        for name, preset in PRESET_COLUMNS.items():
            if CONTAINER[name] == container and _has_columns(header, preset):
                return name, header
    return container, header


def _has_columns(header: list[str], columns: TraceColumns) -> bool:
    return {columns.arrival, columns.prompt_tokens, columns.output_tokens} <= set(header)
