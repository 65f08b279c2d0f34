"""Acceptance logs from real engines: one small parser module per format, looked up by name.

``read_logs(paths, format, **options)`` returns an :class:`AcceptanceLog` (per-position counts, and per-round
detail where the format has it). See docs/acceptance-logs.md for every format and its conversion rules.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Optional, Sequence

from simlab.acceptance.logs.parsed import AcceptanceLog, PositionCounts, Rounds
from simlab.common.errors import InputError

FORMATS: dict[str, str] = {
    "simlab": "simlab.acceptance.logs.simlab_folder",
    "vllm-metrics": "simlab.acceptance.logs.vllm_metrics",
    "deepspec": "simlab.acceptance.logs.deepspec",
    "sglang-sts": "simlab.acceptance.logs.sglang_sts",
    "specdecode-bench": "simlab.acceptance.logs.specdecode_bench",
    "csv": "simlab.acceptance.logs.csv_rounds",
}

OPTION_FORMATS = {"gamma": ("specdecode-bench", "csv"), "proposer": ("specdecode-bench",),
                  "model": ("vllm-metrics",), "arms": ("simlab",)}


def format_module(name: str):
    """The parser module of format ``name`` (InputError listing the formats otherwise)."""
    if name not in FORMATS:
        raise InputError("no such log format", field="--format", value=name, valid=", ".join(FORMATS))
    return importlib.import_module(FORMATS[name])


def confidence_formats() -> list[str]:
    """Formats whose logs can carry the confidence head's estimates."""
    return [name for name in FORMATS if format_module(name).HAS_CONFIDENCE]


def read_logs(paths: Sequence[str | Path], format: str, *, gamma: Optional[int] = None,
              proposer: Optional[str] = None, model: Optional[str] = None,
              arms: Optional[list[str]] = None) -> AcceptanceLog:
    """Parse ``paths`` as logs of ``format``. Options apply to some formats only (an InputError otherwise)."""
    module = format_module(format)
    given = {"gamma": gamma, "proposer": proposer, "model": model, "arms": arms or None}
    for option, value in given.items():
        if value is not None and format not in OPTION_FORMATS[option]:
            flag = "--arm" if option == "arms" else f"--{option}"
            raise InputError(f"applies to {', '.join(OPTION_FORMATS[option])} logs only", field=flag,
                             value=value if option != "arms" else ",".join(value),
                             valid=f"leave it out for {format} logs")
    if not paths:
        raise InputError("no log given", field="LOGS", valid="one or more log files or folders")
    return module.read([Path(p) for p in paths], **{k: v for k, v in given.items() if v is not None})


__all__ = ["AcceptanceLog", "FORMATS", "PositionCounts", "Rounds", "confidence_formats", "format_module", "read_logs"]
