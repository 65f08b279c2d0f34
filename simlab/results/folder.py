"""The results folder: summary.json, requests.csv and steps.csv.gz, written atomically as one folder, and read back."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from simlab.common.frame_csv import write_frame_csv
from simlab.common.json_text import dumps
from simlab.common.outputs import staged_dir
from simlab.results.records import REQUEST_COLUMNS, STEP_COLUMNS


def write_results(out_dir: Path, summary: dict, requests: pd.DataFrame, steps: pd.DataFrame,
                  extra_files: dict[str, bytes] | None = None, *, command: str | None = None) -> Path:
    """Write the folder under a temporary name beside ``out_dir`` and swap it in; nothing half-written remains.

    The caller checks ``out_dir`` first (:func:`simlab.common.outputs.check_out_dir`): this replaces what is there."""
    out_dir = Path(out_dir)
    with staged_dir(out_dir, kind="run", command=command) as staging:
        (staging / "summary.json").write_text(dumps(summary), encoding="utf-8")
        # the bytes pandas' to_csv(index=False, float_format="%.9f") writes, in about half its time
        write_frame_csv(requests, staging / "requests.csv")
        write_frame_csv(steps, staging / "steps.csv.gz", gzip_level=1)
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


RESULT_FILES = ("summary.json", "requests.csv", "steps.csv.gz")


def check_results_folder(folder: Path) -> Path:
    """Raise :class:`InputError` unless ``folder`` holds the files of a ``simlab run`` results folder."""
    from simlab.common.errors import InputError

    folder = Path(folder)
    missing = [n for n in RESULT_FILES if not (folder / n).is_file()]
    if missing:
        raise InputError(f"not a results folder (missing {', '.join(missing)})", file=folder,
                         valid="a folder written by `simlab run`")
    return folder


def load_results(folder: Path) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    """Read a results folder written by ``simlab run``."""
    folder = check_results_folder(folder)
    summary = json.loads((folder / "summary.json").read_text())
    return summary, pd.read_csv(folder / "requests.csv"), pd.read_csv(folder / "steps.csv.gz")
