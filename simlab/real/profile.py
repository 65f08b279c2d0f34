"""A quick verify-cost curve for the real engine's load-aware schedulers: seconds of one target step as a
function of its batch tokens, measured on this machine (median of a few repeats per point).

It shares its steps and timer with the full profiler (``simlab profile``, :mod:`simlab.real.profile_cli`), which
measures every cost curve the simulator reads and writes them as a hardware profile.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simlab.real.profile_spec import powers_of_two, spread
from simlab.real.profile_steps import verify_step
from simlab.real.profile_table import monotone
from simlab.real.profile_timing import time_step
from simlab.real.target import TargetModel


@dataclass(frozen=True)
class CostTable:
    """Piecewise-linear seconds over batch tokens, flat beyond the ends, non-decreasing (as the contract's
    ``hardware.kind: table`` verify curve). Callable as a :class:`simlab.schedulers.ScheduleInputs` verify_s."""

    batch_tokens: tuple[int, ...]
    step_s: tuple[float, ...]

    def __call__(self, batch_tokens: np.ndarray) -> np.ndarray:
        return np.interp(np.asarray(batch_tokens, dtype=float), self.batch_tokens, self.step_s)

    def to_profile(self) -> dict:
        """The ``verify`` block of a table hardware profile."""
        return {"batch_tokens": list(self.batch_tokens), "step_s": list(self.step_s)}


def profile_verify_cost(
    target: TargetModel, *, max_num_seqs: int, max_batch_tokens: int, context_tokens: int = 128, repeats: int = 3,
    grid: list[int] | None = None,
) -> CostTable:
    """Time target forwards of B tokens spread over min(B, max_num_seqs) requests, each with
    ``context_tokens`` already cached, for B on ``grid`` (default: powers of two up to ``max_batch_tokens``).
    One warm-up per point, the median of ``repeats`` timed runs, then made non-decreasing (running maximum)."""
    grid = sorted(set(grid or powers_of_two(max_batch_tokens)))
    seconds = []
    for batch_tokens in grid:
        rows = min(max_num_seqs, batch_tokens)
        step = verify_step(target, spread(batch_tokens, rows), [context_tokens] * rows)
        timing = time_step(step.run, device=target.device, warmup=1, replays=repeats, use_cuda_graph=False)
        seconds.append(timing.median_s)
    return CostTable(batch_tokens=tuple(grid), step_s=tuple(float(s) for s in monotone(seconds)))


__all__ = ["CostTable", "profile_verify_cost"]
