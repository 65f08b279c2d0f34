"""The length pools of ``dist: empirical``: a column of a trace, read once per trace and reused."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from simlab.config.workload import EmpiricalLength
from simlab.workload.trace_index import locate_trace
from simlab.workload.traces import TraceOrigin, TraceTable, read_trace


class EmpiricalPools:
    """Reads the trace behind each empirical length distribution of a workload (each trace once).

    Call it as ``pools(cfg, "prompt_tokens")``: the int64 lengths of the trace column ``cfg.column``.
    Errors name ``file`` and the field ``workload.<field>.trace``.
    """

    def __init__(self, *, base_dir: Path, file: str | Path) -> None:
        self._base_dir = base_dir
        self._file = file
        self._tables: dict[tuple, TraceTable] = {}

    def __call__(self, cfg: EmpiricalLength, field: str) -> np.ndarray:
        origin = TraceOrigin(file=self._file, prefix=f"workload.{field}")
        location = locate_trace(cfg.trace, base_dir=self._base_dir, file=self._file, field=origin.field("trace"))
        fmt = location.format_for(cfg.format, cfg.columns is not None)
        key = (str(location.path.resolve()), fmt, cfg.columns)
        if key not in self._tables:
            self._tables[key] = read_trace(location.path, format=fmt, columns=cfg.columns, origin=origin)
        table = self._tables[key]
        return table.prompt_tokens if cfg.column == "prompt" else table.output_tokens
