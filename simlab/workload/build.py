"""A workload config to the requests it describes."""

from __future__ import annotations

from pathlib import Path

from simlab.config.workload import ClosedLoopWorkload, GammaWorkload, PoissonWorkload, TraceWorkload, WorkloadConfig
from simlab.workload.empirical import EmpiricalPools
from simlab.workload.replay import build_trace_workload
from simlab.workload.requests import Workload
from simlab.workload.synthetic import build_closed_loop, build_open_loop


def build_workload(cfg: WorkloadConfig, *, base_dir: Path, seed: int, file: str | Path,
                   prefix_ids: bool = False) -> Workload:
    """The requests of the workload ``cfg``.

    ``base_dir`` resolves relative trace paths (the scenario file's folder); ``seed`` seeds every random draw
    (the same seed gives the same requests); ``file`` is the scenario file, named in errors. Raises
    :class:`~simlab.common.errors.InputError` for a missing or malformed trace. ``prefix_ids`` also reads the prompts'
    prefix block ids where the trace has them (prefix caching).
    """
    base_dir = Path(base_dir)
    if isinstance(cfg, TraceWorkload):
        return build_trace_workload(cfg, base_dir=base_dir, seed=seed, file=file, prefix_ids=prefix_ids)
    pools = EmpiricalPools(base_dir=base_dir, file=file)
    if isinstance(cfg, (PoissonWorkload, GammaWorkload)):
        return build_open_loop(cfg, seed=seed, read_pool=pools)
    if isinstance(cfg, ClosedLoopWorkload):
        return build_closed_loop(cfg, seed=seed, read_pool=pools)
    raise TypeError(f"not a workload config: {type(cfg).__name__}")
