"""Trace replay: a trace's requests, sped up or slowed down, cut to a duration or count, with domains."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from simlab.common.errors import InputError
from simlab.config.workload import MAX_NUM_DOMAINS, TraceWorkload
from simlab.workload.domains import draw_domains, encode_labels
from simlab.workload.requests import DEFAULT_DOMAINS, Requests, Workload
from simlab.workload.trace_index import locate_trace
from simlab.workload.traces import TraceOrigin, read_trace


def build_trace_workload(cfg: TraceWorkload, *, base_dir: Path, seed: int, file: str | Path,
                         prefix_ids: bool = False) -> Workload:
    """Replay the trace ``cfg.path``: arrivals relative to the first request, gaps scaled by ``time_scale``,
    arrivals at or after ``max_duration_s`` dropped, then the first ``max_requests`` kept. With
    ``prefix_ids``, a Mooncake trace's ``hash_ids`` are read too (for prefix caching)."""
    origin = TraceOrigin(file=file, prefix="workload")
    location = locate_trace(cfg.path, base_dir=base_dir, file=file, field=origin.field("path"))
    fmt = location.format_for(cfg.format, cfg.columns is not None)
    table = read_trace(location.path, format=fmt, columns=cfg.columns, domain_column=cfg.domain_column,
                       origin=origin, sort=cfg.sort)
    arrival_s = table.arrival_s * cfg.time_scale
    num_kept = len(arrival_s)
    if cfg.max_duration_s is not None:
        num_kept = int(np.searchsorted(arrival_s, cfg.max_duration_s, side="left"))
    if cfg.max_requests is not None:
        num_kept = min(num_kept, cfg.max_requests)
    # never empty: the first arrival is 0.0 and max_duration_s > 0, and read_trace refuses an empty trace
    if table.domain_labels is not None:
        domain, names = encode_labels(table.domain_labels[:num_kept])
        if len(names) > MAX_NUM_DOMAINS:
            raise InputError(f"the domain column has {len(names)} distinct labels", file=table.path,
                             valid=f"at most {MAX_NUM_DOMAINS} domains")
        domain_source: dict = {"column": cfg.domain_source_column}
    else:
        mix = cfg.domains or DEFAULT_DOMAINS
        domain, names = draw_domains(mix, num_kept, seed)
        domain_source = {"mix": dict(mix), "seed": seed}
    requests = Requests(
        arrival_s=np.ascontiguousarray(arrival_s[:num_kept]),
        prompt_tokens=table.prompt_tokens[:num_kept].copy(),
        output_tokens=table.output_tokens[:num_kept].copy(),
        domain=domain,
        domain_names=names,
        prefix_ids=_prefix_ids(table, cfg, num_kept) if prefix_ids else None,
        overlap=None if table.overlap is None else table.overlap[:num_kept].copy(),
    )
    source = {
        "kind": "trace",
        "trace": location.shipped.name if location.shipped else None,
        "path": str(location.path.resolve()),
        "format": table.format,
        "rows_read": len(table),
        "sorted_on_read": not table.was_sorted,
        "time_scale": cfg.time_scale,
        "max_requests": cfg.max_requests,
        "max_duration_s": cfg.max_duration_s,
        "num_requests": len(requests),
        "duration_s": float(requests.arrival_s[-1]),
        "domains": domain_source,
    }
    if table.overlap is not None:
        source["overlap"] = {"column": cfg.columns.overlap, "mean": round(float(table.overlap[:num_kept].mean()), 6)}
    if location.shipped:
        source["licence"] = location.shipped.licence
    return Workload(requests=requests, closed_loop=None, source=source)



def _prefix_ids(table, cfg: TraceWorkload, num_kept: int):
    """The first ``num_kept`` requests' prefix block ids, when the trace names them: a Mooncake trace's
    hash_ids, or a generic trace's ``columns.prefix_group`` (see simlab/workload/prefix_ids.py)."""
    from simlab.workload.prefix_ids import read_hash_ids, read_prefix_groups
    from simlab.workload.trace_formats import CONTAINER

    if table.format == "mooncake":
        offsets, ids = read_hash_ids(table.path, table.order)
    elif cfg.columns is not None and cfg.columns.prefix_group is not None:
        in_file_order = table.prompt_tokens.copy()
        if table.order is not None:
            in_file_order[table.order] = table.prompt_tokens
        offsets, ids = read_prefix_groups(table.path, CONTAINER[table.format], cfg.columns.prefix_group,
                                          cfg.columns.prefix_tokens, in_file_order, table.order)
    else:
        return None
    return offsets[: num_kept + 1].copy(), ids[: int(offsets[num_kept])].copy()
