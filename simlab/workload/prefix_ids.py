"""Prompt prefix block ids for prefix caching, read in a second pass only when a scenario turns it on.

A request's prompt is named by the ids of its 512-token blocks, in order (docs/engine.md section 7):

- a Mooncake trace gives them as ``hash_ids``;
- a generic CSV/JSONL trace may give a ``prefix_group`` column: requests with the same label share their first
  ``prefix_tokens`` tokens (a column; without one, the group's shortest prompt). Their shared full blocks get
  the group's ids; every other block of a prompt gets an id of its own.

Both return (offsets [N+1], ids [M]) in the order ``read_trace`` gives the requests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from simlab.common.errors import InputError
from simlab.config.workload import PREFIX_BLOCK_TOKENS
from simlab.workload.trace_formats import open_text

Ragged = tuple[np.ndarray, np.ndarray]

def _ragged(lists: list[list[int]], order: Optional[np.ndarray]) -> Ragged:
    if order is not None:
        lists = [lists[i] for i in order.tolist()]
    counts = np.array([len(x) for x in lists], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    ids = np.fromiter((h for x in lists for h in x), dtype=np.int64, count=int(offsets[-1]))
    return offsets, ids


def read_hash_ids(path: Path, order: Optional[np.ndarray] = None) -> Ragged:
    """Every request's ``hash_ids`` of a Mooncake JSONL trace (``order``: the permutation read_trace applied)."""
    lists: list[list[int]] = []
    with open_text(path) as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            obj = json.loads(line)
            hashes = obj.get("hash_ids") if isinstance(obj, dict) else None
            if not isinstance(hashes, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in hashes):
                raise InputError("hash_ids must be a list of integers for prefix caching", file=path,
                                 field=f"line {number}, column hash_ids", valid="a JSON list of integers")
            lists.append(hashes)
    return _ragged(lists, order)


def read_prefix_groups(path: Path, container: str, group_column: str, tokens_column: Optional[str],
                       prompt_tokens_in_file_order: np.ndarray, order: Optional[np.ndarray] = None) -> Ragged:
    """Block ids from a generic trace's ``prefix_group`` (and ``prefix_tokens``) columns."""
    wanted = [group_column] + ([tokens_column] if tokens_column else [])
    if container == "csv":
        frame = pd.read_csv(path, usecols=lambda c: c.strip() in wanted, dtype={group_column: str},
                            keep_default_na=False, skipinitialspace=True)
        frame.columns = [c.strip() for c in frame.columns]
    else:
        rows = []
        with open_text(path) as fh:
            for line in fh:
                if line.strip():
                    obj = json.loads(line)
                    rows.append({name: obj.get(name) for name in wanted})
        frame = pd.DataFrame(rows, columns=wanted)
    for name in wanted:
        if name not in frame.columns:
            raise InputError("no such column for prefix caching", file=path, field=f"columns.{name}", value=name)
    groups = frame[group_column].astype(str).to_numpy()
    prompt = np.asarray(prompt_tokens_in_file_order, dtype=np.int64)
    if tokens_column:
        shared = pd.to_numeric(frame[tokens_column], errors="coerce").to_numpy()
        bad = np.flatnonzero(~np.isfinite(shared) | (shared < 0))
        if bad.size:
            raise InputError("not a token count", file=path, field=f"row {int(bad[0]) + 1}, column {tokens_column}",
                             value=frame[tokens_column].iloc[int(bad[0])], valid="an integer >= 0")
        shared = np.minimum(shared.astype(np.int64), prompt)
    else:
        shortest = pd.Series(prompt).groupby(groups).transform("min").to_numpy()
        shared = shortest
    ids: dict[tuple[str, int], int] = {}
    lists: list[list[int]] = []
    fresh = 0
    for label, shared_tokens, prompt_tokens in zip(groups.tolist(), shared.tolist(), prompt.tolist()):
        own = []
        for j in range(prompt_tokens // PREFIX_BLOCK_TOKENS):
            if (j + 1) * PREFIX_BLOCK_TOKENS <= shared_tokens:
                key = (label, j)
                if key not in ids:
                    ids[key] = len(ids)
                own.append(ids[key])
            else:
                fresh += 1
                own.append(-fresh)  # a block no other request shares
        lists.append(own)
    return _ragged(lists, order)
