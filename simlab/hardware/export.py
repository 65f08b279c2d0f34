"""Write a cost model as data: a contract table (``kind: table`` YAML) or SGLang's SPS table (JSON).

A table holds no request-count axis and drafter curves without context, so a roofline is sampled under stated
assumptions (:class:`ExportSettings`), recorded in the file's ``provenance``:

- verify grid: rows by total context tokens (0, then powers of two from 1024), columns by batch tokens
  (powers of two and every CUDA-graph bucket); attention at each point assumes ``query_tokens_per_request``
  query tokens per request (R = max(1, B / q));
- drafters at ``draft_gamma`` and ``draft_context_per_request``: the autoregressive curve over requests R is
  ``draft_s(method, gamma, R) / gamma`` (the round's fixed parts spread over its gamma forwards); the parallel
  curve over block tokens T = R x gamma (a grid of gamma x powers of two), one block forward with the stack's host
  time per drafter forward and per speculative round; the sequential-head curve over R;
- prefill: ``per_token_s`` = one ``prefill_chunk_tokens`` chunk from context 0, divided by its tokens.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

import numpy as np
import yaml

from simlab.common.outputs import write_file_atomic
from simlab.common.version import __version__
from simlab.hardware.base import CostModel
from simlab.hardware.roofline import RooflineCostModel
from simlab.hardware.specs import gpu_fields, model_fields
from simlab.hardware.table import TableCostModel

SIGNIFICANT_DIGITS = 6
SPS_KEYS = ("sample_batch_tokens", "sample_steps_per_sec", "max_batch_tokens")
ROOFLINE_NOTE = (
    "Roofline-modelled from GPU datasheet figures and the model's public config (docs/hardware.md); "
    "NOT measured on hardware. Replace with a measured profile (`simlab profile`) for absolute numbers."
)
CALIBRATED_NOTE = (
    "Calibrated roofline (docs/hardware.md): GPU datasheet figures and the model's public config, priced with "
    "efficiencies and step overheads fitted to public measurements of other models (hw_profiles/calibration/"
    "SOURCES.md); NOT measured on this GPU and model. Its stated error is provenance.calibration.error. Replace "
    "with a measured profile (`simlab profile`, `simlab profiles fit`) for absolute numbers."
)


@dataclass(frozen=True)
class ExportSettings:
    """Where a roofline is sampled when written as a table (see the module docstring)."""

    max_batch_tokens: int = 8192
    max_context_tokens: int = 2**20
    query_tokens_per_request: float = 4.0
    draft_gamma: int = 7
    draft_context_per_request: int = 1024
    max_draft_requests: int = 4096
    prefill_chunk_tokens: int = 2048
    autoregressive_method: str = "eagle3"


def batch_grid(cm: CostModel, max_batch_tokens: int) -> list[int]:
    """Powers of two up to ``max_batch_tokens`` and every captured CUDA-graph size below it."""
    powers = [2**k for k in range(0, 31) if 2**k <= max_batch_tokens]
    return sorted(set(powers) | {s for s in cm.buckets.sizes if s <= max_batch_tokens})


def context_grid(max_context_tokens: int) -> list[int]:
    """0, then powers of two from 1024 up to ``max_context_tokens``."""
    return [0] + [2**k for k in range(10, 41) if 2**k <= max_context_tokens]


def table_dict(cm: CostModel, settings: ExportSettings = ExportSettings(), *, generator: str,
               date: Optional[str] = None) -> dict[str, Any]:
    """The cost model as a ``kind: table`` mapping with provenance (``date`` defaults to today, UTC)."""
    date = date or datetime.now(timezone.utc).date().isoformat()
    if isinstance(cm, TableCostModel):
        dumped = cm.config.model_dump(mode="json", exclude_none=True)
        data = {"kind": "table", "name": cm.name, **{k: v for k, v in dumped.items() if k not in ("kind", "name")}}
        data["provenance"] = {"generator": generator, "simlab_version": __version__, "date": date,
                              "source": {k: v for k, v in cm.describe().items() if k != "provenance"}}
        if cm.config.provenance is not None:
            data["provenance"]["source_provenance"] = cm.describe()["provenance"]
        return data
    if isinstance(cm, RooflineCostModel):
        return _roofline_table(cm, settings, generator=generator, date=date)
    raise TypeError(f"cannot export a {type(cm).__name__}")


def _roofline_table(cm: RooflineCostModel, s: ExportSettings, *, generator: str, date: str) -> dict[str, Any]:
    batch = batch_grid(cm, s.max_batch_tokens)
    contexts = context_grid(s.max_context_tokens)
    b = np.asarray(batch, dtype=float)[None, :]
    c = np.asarray(contexts, dtype=float)[:, None]
    grid = cm.verify_s(b, c, np.maximum(1.0, b / s.query_tokens_per_request))
    gamma, per_request = s.draft_gamma, s.draft_context_per_request
    requests = [2**k for k in range(0, 31) if 2**k <= s.max_draft_requests]
    drafter = cm.drafter
    autoregressive = [cm.draft_s(s.autoregressive_method, gamma, r, r * per_request) / gamma for r in requests]
    block_tokens = [gamma * r for r in requests]
    host = cm.params.draft_forward_overhead_s + cm.params.spec_round_overhead_s  # the block's step: one forward
    parallel = [drafter.parallel_block_s(gamma * r, r, r * per_request) + host for r in requests]
    head = [drafter.head_step_s(r) for r in requests]
    chunk = s.prefill_chunk_tokens
    describe = cm.describe()
    provenance_extra = {"calibration": describe["calibration"]} if "calibration" in describe else {}
    return {
        "kind": "table",
        "name": cm.name,
        "verify": {"batch_tokens": batch, "context_tokens": contexts, "step_s": _round(grid.tolist())},
        "draft": {
            "autoregressive": {"batch_tokens": requests, "step_s": _round(autoregressive)},
            "parallel": {"batch_tokens": block_tokens, "step_s": _round(parallel)},
            "sequential_head": {"batch_tokens": requests, "step_s": _round(head)},
        },
        "prefill": {"per_token_s": _round(cm.prefill_s(chunk) / chunk)},
        "cuda_graph_buckets": cm.buckets.to_config(),
        "kv_cache_tokens": cm.kv_cache_tokens(),
        "provenance": {
            "generator": generator,
            "simlab_version": __version__,
            "date": date,
            "measured": False,
            "note": CALIBRATED_NOTE if provenance_extra else ROOFLINE_NOTE,
            "source": {k: describe[k] for k in ("kind", "gpu", "model", "tensor_parallel", "expert_parallel",
                                                 "num_gpus", "parameters") if k in describe},
            **provenance_extra,
            "gpu": gpu_fields(cm.gpu),
            "model": model_fields(cm.model),
            "derived": describe["derived"],
            "sampling": {**asdict(s), "prefill_prior_context_tokens": 0},
        },
    }


def sps_dict(cm: CostModel, *, context_tokens: float = 0.0, query_tokens_per_request: float = 4.0,
             max_batch_tokens: int = 8192) -> dict[str, Any]:
    """SGLang's SPS table: target steps per second at each batch size, at ``context_tokens`` total KV tokens.

    A table (a measured profile, say) is sampled at its own batch sizes too, and only up to its largest one: beyond
    it a table is flat, which no measurement supports.
    """
    if isinstance(cm, TableCostModel):
        measured = cm.config.verify.batch_tokens
        max_batch_tokens = min(max_batch_tokens, max(measured))
        batch = sorted(set(batch_grid(cm, max_batch_tokens)) | {b for b in measured if b <= max_batch_tokens})
    else:
        batch = batch_grid(cm, max_batch_tokens)
    b = np.asarray(batch, dtype=float)
    seconds = cm.verify_s(b, np.full(b.shape, float(context_tokens)), np.maximum(1.0, b / query_tokens_per_request))
    return {
        "sample_batch_tokens": batch,
        "sample_steps_per_sec": _round((1.0 / np.asarray(seconds)).tolist()),
        "max_batch_tokens": batch[-1],
    }


def _round(value: Any) -> Any:
    if isinstance(value, list):
        return [_round(v) for v in value]
    return float(f"{float(value):.{SIGNIFICANT_DIGITS}g}")


class _PlainDumper(yaml.SafeDumper):
    """Writes repeated lists out in full instead of as YAML anchors and aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump_table_yaml(data: dict[str, Any]) -> str:
    """YAML text for a table mapping: lists of numbers in flow style, keys in the order given."""
    return yaml.dump(data, Dumper=_PlainDumper, sort_keys=False, default_flow_style=None, width=120,
                     allow_unicode=True)


def table_text(data: dict[str, Any], *, written_by: str) -> str:
    """A table file's text: a ``# written by simlab ...`` line (so that simlab may replace the file later, see
    :func:`simlab.common.outputs.is_simlab_file`), then the YAML."""
    return f"# written by {written_by}\n" + dump_table_yaml(data)


def write_table(path: str | Path, data: dict[str, Any], *, written_by: str = "simlab profiles export") -> Path:
    """Write a table file atomically (check the path first with :func:`simlab.common.outputs.check_out_file`)."""
    return write_file_atomic(path, table_text(data, written_by=written_by))


def sps_text(data: dict[str, Any]) -> str:
    """SGLang's SPS JSON as simlab writes it: one key per line (each list on its line), nothing else added."""
    lines = ",\n".join(f"  {json.dumps(key)}: {json.dumps(value)}" for key, value in data.items())
    return "{\n" + lines + "\n}\n"


def write_sps(path: str | Path, data: dict[str, Any]) -> Path:
    """Write an SPS table atomically."""
    return write_file_atomic(path, sps_text(data))


def is_sps_file(path: str | Path) -> bool:
    """Whether ``path`` holds an SPS table exactly as :func:`sps_text` writes it. The format has no room for a
    ``generator`` mark, so this is how ``simlab profiles export`` knows it may replace its own earlier file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
        data = json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(data, dict) and list(data) == list(SPS_KEYS) and sps_text(data) == text
