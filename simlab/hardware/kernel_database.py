"""GEMMs priced from aiconfigurator-core's own kernel timings where its database covers the GPU (``kernels:
database`` on ``kind: operations``; the ``aic`` extra): the latency of a GEMM of M x N x K read from the database's
rows of the GPU's newest vLLM release (every M, N and K it sampled), interpolated linearly in the logarithms of M, N,
K and the latency; an operation outside the rows (N or K beyond the largest sampled, M above 32,768, a GPU without
rows) and every other kernel family take the fitted curves (:mod:`simlab.hardware.kernel_curves`; docs/operations.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from simlab.hardware.kernel_fit import SYSTEMS, gemm_rows


@lru_cache(maxsize=8)
def gemm_grids(system: str) -> dict[str, tuple]:
    """Per dtype, ``(log2 M, log2 N, log2 K, log latency table)`` of the database's GEMM rows for ``system``, and
    the release they came from (``source``); a grid point the database did not sample is NaN."""
    from simlab.hardware.kernel_fit import _database

    frame, source = _database(system, "gemm", "gemm_perf.parquet")
    out: dict[str, tuple] = {"source": source}
    for dtype in ("bf16", "fp8"):
        rows = gemm_rows(frame, dtype)  # the rows the curves are fitted on
        if rows.empty:
            continue
        latency = rows.groupby(["m", "n", "k"]).latency.median()
        axes = [np.asarray(sorted(rows[c].unique()), dtype=float) for c in ("m", "n", "k")]
        table = np.full([a.size for a in axes], np.nan)
        index = [np.searchsorted(a, latency.index.get_level_values(c).to_numpy(dtype=float))
                 for a, c in zip(axes, ("m", "n", "k"))]
        table[tuple(index)] = np.log(latency.to_numpy() * 1e-3)  # ms -> s
        out[dtype] = (*[np.log2(a) for a in axes], table)
    return out


def _interpolate(grid: tuple, m: float, n: float, k: float) -> float:
    """Trilinear interpolation of the log latency at (log2 m, log2 n, log2 k); NaN outside the grid or next to a
    point the database did not sample."""
    value, corners = 0.0, []
    for axis, x in zip(grid[:3], (m, n, k)):
        x = math.log2(x)
        if x < axis[0] or x > axis[-1]:
            return math.nan
        high = min(int(np.searchsorted(axis, x)), axis.size - 1)
        low = max(high - 1, 0)
        span = axis[high] - axis[low]
        weight = 0.0 if span == 0.0 else (x - axis[low]) / span
        corners.append(((low, 1.0 - weight), (high, weight)))
    for i, wi in corners[0]:
        for j, wj in corners[1]:
            for h, wh in corners[2]:
                w = wi * wj * wh
                if w:
                    value += w * grid[3][i, j, h]
    return math.exp(value) if np.isfinite(value) else math.nan


@dataclass(frozen=True)
class DatabaseGemms:
    """``curves`` (:class:`~simlab.hardware.kernel_curves.KernelCurves`) whose GEMMs the database's rows price where
    they cover them; every attribute and other kernel family is ``curves``'."""

    curves: Any
    grids: dict

    def __getattr__(self, name: str) -> Any:
        return getattr(self.curves, name)

    def seconds(self, op) -> float:
        if op.kind == "gemm" and op.dtype in self.grids and op.m >= 1 and op.n > 0 and op.k > 0:
            measured = _interpolate(self.grids[op.dtype], float(op.m), float(op.n), float(op.k))
            if not math.isnan(measured):
                return measured
        return self.curves.seconds(op)


def with_database_gemms(curves, gpu_name: str, *, file=None, field: str = "hardware.kernels"):
    """``curves`` with the database's GEMMs for ``gpu_name`` (an :class:`InputError` where the database holds no
    rows for it or the ``aic`` extra is not installed)."""
    from simlab.common.errors import InputError

    system = SYSTEMS.get(gpu_name)
    if system is None:
        raise InputError(f"aiconfigurator-core's database holds no kernel rows for {gpu_name}", file=file,
                         field=field, value="database", valid="curves, or a GPU among " + ", ".join(SYSTEMS))
    try:
        grids = gemm_grids(system)
    except ImportError:
        raise InputError("kernels: database reads aiconfigurator-core's database, which is not installed", file=file,
                         field=field, value="database",
                         valid="curves, or install the aic extra (pip install 'simlab[aic]')") from None
    return DatabaseGemms(curves, {k: v for k, v in grids.items() if k != "source"}), grids["source"]
