"""The results folder: summary.json, requests.csv and steps.csv.gz, written atomically as one folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simlab.outputs import staged_dir

REQUEST_COLUMNS = ("arm", "id", "arrival_s", "prompt_tokens", "output_tokens", "domain", "first_token_s",
                   "finish_s", "steps", "replica")
STEP_COLUMNS = ("arm", "t_s", "num_requests", "batch_tokens", "verify_tokens", "accepted_tokens", "step_s",
                "decode_requests", "emitted_tokens", "prefill_tokens", "replica", "kv_tokens", "drafted_tokens",
                "draft_len")


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def dumps(data: Any) -> str:
    """JSON with NaN written as null (strict JSON readers reject NaN)."""
    return json.dumps(_nan_to_none(data), indent=2, default=_json_default, allow_nan=False) + "\n"


def _nan_to_none(value: Any) -> Any:
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _nan_to_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_nan_to_none(v) for v in value]
    return value


def write_results(out_dir: Path, summary: dict, requests: pd.DataFrame, steps: pd.DataFrame,
                  extra_files: dict[str, bytes] | None = None, *, command: str | None = None) -> Path:
    """Write the folder under a temporary name beside ``out_dir`` and swap it in; nothing half-written remains.

    The caller checks ``out_dir`` first (:func:`simlab.outputs.check_out_dir`): this replaces what is there."""
    out_dir = Path(out_dir)
    with staged_dir(out_dir, kind="run", command=command) as staging:
        (staging / "summary.json").write_text(dumps(summary), encoding="utf-8")
        requests.to_csv(staging / "requests.csv", index=False, float_format="%.9f")
        steps.to_csv(
            staging / "steps.csv.gz", index=False, float_format="%.9f",
            compression={"method": "gzip", "compresslevel": 1, "mtime": 0},
        )
        for name, payload in (extra_files or {}).items():
            (staging / name).write_bytes(payload)
    return out_dir


def requests_frame(arm: str, ids: np.ndarray, requests, log) -> pd.DataFrame:
    """One row per request of one arm."""
    return pd.DataFrame(
        {
            "arm": arm,
            "id": ids,
            "arrival_s": log.arrival_s,
            "prompt_tokens": requests.prompt_tokens,
            "output_tokens": requests.output_tokens,
            "domain": np.asarray(requests.domain_names, dtype=object)[requests.domain],
            "first_token_s": log.first_token_s,
            "finish_s": log.finish_s,
            "steps": log.steps,
            "replica": log.replica,
        },
        columns=list(REQUEST_COLUMNS),
    )


def steps_frame(arm: str, steps: dict[str, np.ndarray]) -> pd.DataFrame:
    """One row per engine step of one arm."""
    frame = pd.DataFrame({name: steps[name] for name in STEP_COLUMNS if name != "arm"})
    frame.insert(0, "arm", arm)
    return frame[list(STEP_COLUMNS)]
