"""A quick verify-cost curve for the real engine's load-aware schedulers: seconds of one target step as a
function of its batch tokens, measured on this machine (median of a few repeats per point).

It shares its steps and timer with the full profiler (``simlab profile``, :mod:`simlab.real.profiler.cli`), which
measures every cost curve the simulator reads and writes them as a hardware profile. The result is the
simulator's own :class:`~simlab.hardware.curves.Curve` (piecewise linear, flat beyond the ends), callable as a
:class:`simlab.schedulers.ScheduleInputs` ``verify_s``.
"""

from __future__ import annotations

from simlab.hardware.curves import Curve
from simlab.real.profiler.spec import powers_of_two, spread
from simlab.real.profiler.steps import verify_step
from simlab.real.profiler.table import monotone
from simlab.real.profiler.timing import time_step
from simlab.real.target import TargetModel


def profile_verify_cost(
    target: TargetModel, *, max_num_seqs: int, max_batch_tokens: int, context_tokens: int = 128, repeats: int = 3,
    grid: list[int] | None = None,
) -> Curve:
    """Time target forwards of B tokens spread over min(B, max_num_seqs) requests, each with
    ``context_tokens`` already cached, for B on ``grid`` (default: powers of two up to ``max_batch_tokens``).
    One warm-up per point, the median of ``repeats`` timed runs, then made non-decreasing (running maximum).

    ``Curve.xs`` / ``Curve.ys`` are the ``batch_tokens`` / ``step_s`` of a table profile's ``verify`` block."""
    grid = sorted(set(grid or powers_of_two(max_batch_tokens)))
    seconds = []
    for batch_tokens in grid:
        rows = min(max_num_seqs, batch_tokens)
        step = verify_step(target, spread(batch_tokens, rows), [context_tokens] * rows)
        timing = time_step(step.run, device=target.device, warmup=1, replays=repeats, use_cuda_graph=False)
        seconds.append(timing.median_s)
    return Curve(grid, [float(s) for s in monotone(seconds)])


__all__ = ["profile_verify_cost"]
