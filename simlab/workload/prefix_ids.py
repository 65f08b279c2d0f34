"""Prompt prefix block ids for prefix caching: a Mooncake trace's ``hash_ids`` (one per 512-token block of the
prompt, in order), read in a second pass only when a scenario turns prefix caching on."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from simlab.errors import InputError
from simlab.workload.trace_formats import open_text


def read_hash_ids(path: Path, arrival_key: str = "timestamp") -> tuple[np.ndarray, np.ndarray]:
    """(offsets [N+1], ids [M]) of every request of a Mooncake JSONL trace, in the order ``read_trace`` gives
    its requests (stably sorted by arrival)."""
    arrivals: list[float] = []
    counts: list[int] = []
    ids: list[int] = []
    with open_text(path) as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            obj = json.loads(line)
            hashes = obj.get("hash_ids") if isinstance(obj, dict) else None
            if not isinstance(hashes, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in hashes):
                raise InputError("hash_ids must be a list of integers for prefix caching", file=path,
                                 field=f"line {number}, column hash_ids", valid="a JSON list of integers")
            arrivals.append(float(obj[arrival_key]))
            counts.append(len(hashes))
            ids.extend(hashes)
    order = np.argsort(np.asarray(arrivals), kind="stable")
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    flat = np.asarray(ids, dtype=np.int64)
    sorted_counts = np.asarray(counts, dtype=np.int64)[order]
    new_offsets = np.concatenate([[0], np.cumsum(sorted_counts)]).astype(np.int64)
    gather = np.repeat(offsets[:-1][order] - new_offsets[:-1], sorted_counts) + np.arange(int(new_offsets[-1]))
    return new_offsets, flat[gather]
