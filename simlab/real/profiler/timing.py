"""Timing one built step: warm-ups, then the median of timed replays.

- CPU: ``time.perf_counter`` around each run (torch CPU ops are synchronous).
- CUDA: warm-ups on a side stream, then (by default) the step is captured in a CUDA graph and each replay is
  timed with a pair of CUDA events. If capture fails the step is timed eagerly, also with events, and the
  failure is returned as a note. Synchronising after each timed replay keeps replays from overlapping.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Optional

import torch


@dataclass(frozen=True)
class Timing:
    """The median seconds of the timed replays, every sample, how it ran and the wall time it took."""

    median_s: float
    samples_s: tuple[float, ...]
    cuda_graph: bool
    wall_s: float
    note: Optional[str] = None


def time_step(
    run: Callable[[], object], *, device: torch.device, warmup: int, replays: int, use_cuda_graph: bool = True,
) -> Timing:
    """Warm ``run`` up ``warmup`` times, then time ``replays`` runs (see the module docstring)."""
    if replays < 1:
        raise ValueError("replays must be at least 1")
    begin = time.perf_counter()
    with torch.inference_mode():
        if device.type == "cuda":
            samples, graphed, note = _time_cuda(run, device, warmup, replays, use_cuda_graph)
        else:
            samples, graphed, note = _time_cpu(run, warmup, replays), False, None
    return Timing(median_s=statistics.median(samples), samples_s=tuple(samples), cuda_graph=graphed,
                  wall_s=time.perf_counter() - begin, note=note)


def _time_cpu(run: Callable[[], object], warmup: int, replays: int) -> list[float]:
    for _ in range(warmup):
        run()
    samples = []
    for _ in range(replays):
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return samples


def _time_cuda(run: Callable[[], object], device: torch.device, warmup: int, replays: int,
               use_cuda_graph: bool) -> tuple[list[float], bool, Optional[str]]:
    with torch.cuda.device(device):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(max(warmup, 1 if use_cuda_graph else 0)):  # capture needs one eager run first
                run()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        replay: Callable[[], object] = run
        graph, note = None, None
        if use_cuda_graph:
            try:
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    run()
                replay = graph.replay
            except Exception as error:  # noqa: BLE001 - any capture failure falls back to eager timing
                first_line = str(error).splitlines()[0][:300] if str(error) else ""
                graph, note = None, f"CUDA graph capture failed, timed eagerly: {type(error).__name__}: {first_line}"
                _recover_after_failed_capture()
        samples = []
        for _ in range(replays):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            replay()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) / 1e3)
        graphed = graph is not None
        del graph, replay
    return samples, graphed, note


def _recover_after_failed_capture() -> None:
    """Leave the device usable after an aborted capture (its errors are not sticky)."""
    try:
        torch.cuda.synchronize()
    except Exception:  # noqa: BLE001
        pass
    torch.cuda.empty_cache()


__all__ = ["Timing", "time_step"]
