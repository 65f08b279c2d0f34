"""Reading a request trace (Azure CSV, Mooncake JSONL, or a generic CSV/JSONL with a column mapping).

The result is a :class:`TraceTable`: arrivals in seconds after the earliest request, sorted by time (stably,
when the file was not), and the token counts of each request. Reading is vectorised (pandas for CSV, one
``json.loads`` per line for JSONL, keeping only the needed keys so Mooncake's ``hash_ids`` are never stored).
Bad rows raise :class:`~simlab.common.errors.InputError` naming the trace file, the line and the column.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import pandas as pd

from simlab.common.errors import InputError
from simlab.config.workload import TraceColumns
from simlab.workload.trace_formats import CONTAINER, PRESET_COLUMNS, STANDARD_COLUMNS, infer_format, open_text
from simlab.workload.trace_values import BadValue, arrival_offsets_s, labels, shares, token_counts

LineOf = Callable[[int], int]
"""Maps a data row index (0-based) to its line number in the file (1-based)."""


@dataclass(frozen=True)
class TraceOrigin:
    """Where the trace's settings were written, for errors about them: a file and a field prefix."""

    file: Optional[str | Path] = None
    prefix: str = ""
    aliases: tuple[tuple[str, str], ...] = ()  # (setting, what the user wrote instead), e.g. a CLI option

    def field(self, name: str) -> str:
        """How the user wrote the setting ``name`` (e.g. ``columns.arrival``): ``prefix.name`` or an alias."""
        alias = dict(self.aliases).get(name)
        if alias:
            return alias
        return f"{self.prefix}.{name}" if self.prefix else name


@dataclass(frozen=True)
class TraceTable:
    """A trace's requests in time order: ``arrival_s[0] == 0.0``; ``domain_labels`` when a column gave them."""

    path: Path
    format: str
    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    domain_labels: Optional[np.ndarray]
    was_sorted: bool
    order: Optional[np.ndarray] = None  # the rows of the file in the order given (None: the file's order)
    overlap: Optional[np.ndarray] = None  # float64 [N]: a column's share of each output repeating its context

    def __len__(self) -> int:
        return len(self.arrival_s)


def read_trace(
    path: Path,
    *,
    format: Optional[str] = None,
    columns: Optional[TraceColumns] = None,
    domain_column: Optional[str] = None,
    origin: TraceOrigin = TraceOrigin(),
    sort: bool = True,
) -> TraceTable:
    """Read every request of the trace at ``path``. ``format`` is inferred when None (see infer_format).

    Arrivals out of time order are sorted (stably) when ``sort``, else an :class:`InputError` names the first
    line whose arrival is earlier than the line before it."""
    fmt, header = infer_format(path, format, columns)
    cols = _columns_for(path, fmt, columns, header, origin)
    domain_col = domain_column or cols.domain
    if domain_col is not None and domain_col not in header:
        where = "domain_column" if domain_column else "columns.domain"
        raise InputError(f"no such column in {path}", file=origin.file, field=origin.field(where),
                         value=domain_col, valid=_listing(header))
    overlap_col = cols.overlap
    if overlap_col is not None and overlap_col not in header:
        raise InputError(f"no such column in {path}", file=origin.file, field=origin.field("columns.overlap"),
                         value=overlap_col, valid=_listing(header))
    names = [cols.arrival, cols.prompt_tokens, cols.output_tokens] + ([domain_col] if domain_col else [])
    names += [overlap_col] if overlap_col else []
    reader = _read_csv if CONTAINER[fmt] == "csv" else _read_jsonl
    frame, line_of = reader(path, names, cols.arrival_unit == "datetime")
    if len(frame) == 0:
        raise InputError("the trace has no requests", file=path, valid="a header and at least one request row")
    try:
        arrival_s = arrival_offsets_s(frame[cols.arrival], cols.arrival, cols.arrival_unit)
        prompt = token_counts(frame[cols.prompt_tokens], cols.prompt_tokens)
        output = token_counts(frame[cols.output_tokens], cols.output_tokens)
        domain = labels(frame[domain_col], domain_col) if domain_col else None
        overlap = shares(frame[overlap_col], overlap_col) if overlap_col else None
    except BadValue as bad:
        raise InputError(bad.problem, file=path, field=f"line {line_of(bad.row)}, column {bad.column}",
                         value=bad.value, valid=bad.valid) from None
    backwards = np.flatnonzero(arrival_s[1:] < arrival_s[:-1])
    was_sorted = backwards.size == 0
    if not was_sorted and not sort:
        row = int(backwards[0]) + 1
        raise InputError(
            f"arrives {arrival_s[row - 1] - arrival_s[row]:.9g} s before the request of line {line_of(row - 1)}; the "
            "trace is not in time order", file=path, field=f"line {line_of(row)}, column {cols.arrival}",
            value=frame[cols.arrival].iloc[row],
            valid=f"arrivals in time order, or {origin.field('sort')}: true to sort them (stably) as they are read",
        )
    order = None
    if not was_sorted:
        order = np.argsort(arrival_s, kind="stable")
        arrival_s, prompt, output = arrival_s[order], prompt[order], output[order]
        domain = domain[order] if domain is not None else None
        overlap = overlap[order] if overlap is not None else None
    return TraceTable(path=path, format=fmt, arrival_s=arrival_s, prompt_tokens=prompt, output_tokens=output,
                      domain_labels=domain, was_sorted=was_sorted, order=order, overlap=overlap)


def _columns_for(
    path: Path, fmt: str, columns: Optional[TraceColumns], header: list[str], origin: TraceOrigin
) -> TraceColumns:
    if fmt in PRESET_COLUMNS:
        preset = PRESET_COLUMNS[fmt]
        missing = [c for c in (preset.arrival, preset.prompt_tokens, preset.output_tokens) if c not in header]
        if missing:
            what = "header" if CONTAINER[fmt] == "csv" else "first object"
            raise InputError(f"no column {', '.join(missing)} for the {fmt} format", file=path,
                             field=f"line 1 ({what})", value=", ".join(header) or "(empty)",
                             valid=f"{_listing([preset.arrival, preset.prompt_tokens, preset.output_tokens])}; "
                                   "for another layout use format csv or jsonl with columns")
        return preset
    if columns is None:
        for preset in (*PRESET_COLUMNS.values(), STANDARD_COLUMNS):
            if {preset.arrival, preset.prompt_tokens, preset.output_tokens} <= set(header):
                return preset
        raise InputError(
            f"a {fmt} trace needs a column mapping", file=origin.file, field=origin.field("columns"),
            valid=f"columns: {{arrival: ..., prompt_tokens: ..., output_tokens: ...}}, or a header naming "
                  f"arrival, prompt_tokens, output_tokens; {path.name} has " + _listing(header),
        )
    for key in ("arrival", "prompt_tokens", "output_tokens"):
        name = getattr(columns, key)
        if name not in header:
            raise InputError(f"no such column in {path}", file=origin.file, field=origin.field(f"columns.{key}"),
                             value=name, valid=_listing(header))
    return columns


def _listing(header: list[str]) -> str:
    return "columns " + ", ".join(header) if header else "(the file has no columns)"


def _check_field_counts(path: Path) -> None:
    """Every non-blank CSV record has as many fields as the header, else an InputError names its line."""
    try:
        with open_text(path) as fh:
            reader = csv.reader(fh, skipinitialspace=True)
            header = next((row for row in reader if row), None)
            if header is None:
                return
            width = len(header)
            for row in reader:
                if row and len(row) != width:
                    problem = "more" if len(row) > width else "fewer"
                    raise InputError(
                        f"{len(row)} fields, {problem} than the header's {width}", file=path,
                        field=f"line {reader.line_num}", value=",".join(row),
                        valid=f"every row has the header's {width} fields ({', '.join(h.strip() for h in header)})",
                    )
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason})", file=path) from None
    except csv.Error as exc:
        raise InputError(f"not a valid CSV: {exc}", file=path) from None


def _read_csv(path: Path, names: list[str], arrival_is_text: bool) -> tuple[pd.DataFrame, LineOf]:
    _check_field_counts(path)
    dtype = {names[0]: str} if arrival_is_text else None
    if len(names) > 3:
        dtype = {**(dtype or {}), names[3]: str}
    try:
        frame = pd.read_csv(path, usecols=lambda c: c.strip() in names, dtype=dtype, keep_default_na=False,
                            skipinitialspace=True, compression="infer")
    except pd.errors.EmptyDataError:
        raise InputError("the trace is empty", file=path, valid="a header and at least one request row") from None
    except pd.errors.ParserError as exc:
        raise InputError(f"not a valid CSV: {str(exc).strip()}", file=path) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason})", file=path) from None
    frame.columns = [c.strip() for c in frame.columns]
    return frame, lambda row: _csv_line_of(path, row)


def _csv_line_of(path: Path, row: int) -> int:
    """The file line of data row ``row``: pandas skips blank lines, so count non-blank lines after the header."""
    wanted = row + 2
    seen = 0
    with open_text(path) as fh:
        for number, line in enumerate(fh, start=1):
            if line.strip():
                seen += 1
                if seen == wanted:
                    return number
    return wanted


def _read_jsonl(path: Path, names: list[str], arrival_is_text: bool) -> tuple[pd.DataFrame, LineOf]:
    pick = itemgetter(*names)
    rows: list[tuple] = []
    line_numbers: list[int] = []
    try:
        with open_text(path) as fh:
            for number, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    rows.append(pick(json.loads(line)))
                except (KeyError, TypeError, json.JSONDecodeError) as exc:
                    _jsonl_line_error(path, number, line, names, exc)
                line_numbers.append(number)
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason})", file=path) from None
    columns = list(zip(*rows)) if rows else [()] * len(names)
    frame = pd.DataFrame({name: pd.Series(list(values), dtype=None if values else object)
                          for name, values in zip(names, columns)})
    return frame, lambda row: line_numbers[row]


def _jsonl_line_error(path: Path, number: int, line: str, names: list[str], exc: Exception) -> None:
    if isinstance(exc, json.JSONDecodeError):
        raise InputError(f"not valid JSON ({exc.msg})", file=path, field=f"line {number}",
                         valid="one JSON object per line") from None
    obj = json.loads(line)
    if not isinstance(obj, dict):
        raise InputError("not a JSON object", file=path, field=f"line {number}", value=obj,
                         valid="one JSON object per line") from None
    missing = next(name for name in names if name not in obj)
    raise InputError("missing", file=path, field=f"line {number}, column {missing}",
                     valid=f"every line has {', '.join(names)}") from None

