"""Runs a profile: every grid point of a :class:`ProfileSpec` built, timed and collected, under a time budget.

Order (the cheap, essential parts first, so that a run cut short still yields a usable table):

1. verify at the smallest context, every batch size (the table's first row);
2. the drafter: parallel block over requests (at every gamma of the sweep), the sequential head and the
   autoregressive step over requests;
3. prefill chunks;
4. verify at every further context, one row at a time.

Time guard: before each point the runner predicts its wall time from what it measured (the same batch size in
the previous rows, extrapolated linearly in context; in the first row and the other phases, the previous point
scaled up by size) and skips it when it would end past the budget; a
verify row after the first is attempted only when the whole row is predicted to fit. Skipped points, with the
reason, are kept in the result (and the profile's provenance). A point that fails (out of memory, an unsupported
kernel) is recorded the same way and the run goes on. After each row or phase ``on_partial`` receives the result
so far, so a partial profile can be written even if the process is stopped later.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

from simlab.real.profiler.models import ProfiledModels
from simlab.real.profiler.spec import ProfileSpec, place_verify
from simlab.real.profiler.steps import (
    Step, autoregressive_step, draft_block_step, prefill_step, sequential_head_step, verify_step,
)
from simlab.real.profiler.timing import Timing, time_step

VERIFY, PARALLEL, HEAD = "verify", "draft_parallel", "sequential_head"
AUTOREGRESSIVE, PREFILL = "autoregressive", "prefill"


MAX_CAPTURE_FAILURES = 3


class ProfileError(RuntimeError):
    """The run produced too little to write a profile."""


class ProgressSink:
    """Receives progress; the default does nothing (the command line shows a bar or prints lines)."""

    def phase(self, name: str, total: int) -> None:
        """A phase (or verify row) of ``total`` points starts."""

    def advance(self, name: str, label: str, timing: Optional[Timing]) -> None:
        """One point of phase ``name`` is done (``timing`` None: skipped or failed)."""

    def message(self, text: str) -> None:
        """Something worth a line of its own."""


@dataclass
class ProfileResult:
    """What a run measured. Keys: verify[context][batch_tokens], draft_parallel[gamma][requests],
    sequential_head[requests], autoregressive[requests], prefill[tokens]."""

    spec: ProfileSpec
    verify: dict[int, dict[int, Timing]] = field(default_factory=dict)
    draft_parallel: dict[int, dict[int, Timing]] = field(default_factory=dict)
    sequential_head: dict[int, Timing] = field(default_factory=dict)
    autoregressive: dict[int, Timing] = field(default_factory=dict)
    prefill: dict[int, Timing] = field(default_factory=dict)
    skipped: list[dict] = field(default_factory=list)
    notes: list[dict] = field(default_factory=list)
    peak_activation_bytes: Optional[int] = None
    elapsed_s: float = 0.0
    finished: bool = False

    def num_points(self) -> int:
        """Points measured so far."""
        return (sum(len(r) for r in self.verify.values()) + sum(len(r) for r in self.draft_parallel.values())
                + len(self.sequential_head) + len(self.autoregressive) + len(self.prefill))


def planned_points(spec: ProfileSpec, *, drafter: bool, markov_head: bool) -> int:
    """How many points a run of ``spec`` measures if nothing is skipped."""
    count = len(spec.batch_tokens) * len(spec.context_tokens) + len(spec.prefill_chunks)
    if drafter:
        count += len(spec.draft_requests) * (len(spec.draft_gammas) + 1 + int(markov_head))
    return count


class Profiler:
    """Measures ``models`` on the grids of ``spec`` (see the module docstring)."""

    def __init__(self, models: ProfiledModels, spec: ProfileSpec, *, progress: Optional[ProgressSink] = None,
                 on_partial: Optional[Callable[[ProfileResult], None]] = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.models, self.spec = models, spec
        self.target, self.drafter = models.target, models.drafter
        self.device = self.target.device
        self.progress = progress or ProgressSink()
        self.on_partial = on_partial
        self.clock = clock
        self.result = ProfileResult(spec=spec)
        self._start = 0.0
        self._deadline: Optional[float] = None
        self._last: dict[str, tuple[int, float]] = {}  # phase -> (size, wall_s) of its latest point
        self._use_graphs = spec.use_cuda_graphs
        self._graph_captures = {"ok": 0, "failed": 0}

    # ------------------------------------------------------------------------------------------- the run
    def run(self) -> ProfileResult:
        """Measure everything that fits; raise :class:`ProfileError` if not even one verify point did."""
        self._start = self.clock()
        if self.spec.time_budget_s is not None:
            self._deadline = self._start + self.spec.time_budget_s
        contexts = self.spec.context_tokens
        self._warm_up()
        self._verify_row(contexts[0], first=True)
        if not self.result.verify.get(contexts[0]):
            raise ProfileError("no verify point could be measured: " + "; ".join(
                f"{s['point']}: {s['reason']}" for s in self.result.skipped[:3]))
        self._checkpoint()
        if self.drafter is not None:
            self._drafter_phases(self.drafter)
            self._checkpoint()
        layers = self._feature_layers()
        self._sweep(PREFILL, "", self.spec.prefill_chunks,
                    lambda p: prefill_step(self.target, p, hidden_layer_ids=layers), self.result.prefill)
        self._checkpoint()
        for context in contexts[1:]:
            self._verify_row(context, first=False)
            self._checkpoint()
        self.result.finished = True
        self.result.elapsed_s = self.clock() - self._start
        return self.result

    def _drafter_phases(self, drafter) -> None:
        spec, target, context = self.spec, self.target, self.spec.draft_context_per_request
        for gamma in spec.draft_gammas:
            self._sweep(PARALLEL, f"gamma {gamma}", spec.draft_requests,
                        lambda r, g=gamma: draft_block_step(target, drafter, r, g, context),
                        self.result.draft_parallel.setdefault(gamma, {}), size=lambda r, g=gamma: r * g)
        if drafter.markov_in is not None:
            self._sweep(HEAD, "", spec.draft_requests, lambda r: sequential_head_step(target, drafter, r),
                        self.result.sequential_head)
        else:
            self.progress.message("sequential head: the drafter has no Markov head (DFlash); not measured")
        self._sweep(AUTOREGRESSIVE, "", spec.draft_requests,
                    lambda r: autoregressive_step(target, drafter, r, context), self.result.autoregressive)

    def _warm_up(self, runs: int = 3) -> None:
        """Untimed runs of a mid-grid verify point, so that the first timed points do not pay one-time costs
        (thread pools, allocator growth, cuBLAS handles)."""
        spec = self.spec
        batch_tokens = spec.batch_tokens[len(spec.batch_tokens) // 2]
        queries, contexts = place_verify(batch_tokens, spec.context_tokens[0], spec.query_tokens_per_request)
        try:
            with torch.inference_mode():
                step = verify_step(self.target, queries, contexts, hidden_layer_ids=self._feature_layers())
                for _ in range(runs):
                    step.run()
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
        except RuntimeError:  # the point itself will report what went wrong
            pass

    def _checkpoint(self) -> None:
        self.result.elapsed_s = self.clock() - self._start
        if self.on_partial is not None:
            self.on_partial(self.result)

    def _feature_layers(self) -> tuple[int, ...]:
        return tuple(self.drafter.target_layer_ids) if self.drafter is not None else ()

    # ------------------------------------------------------------------------------------------- phases
    def _verify_row(self, context: int, *, first: bool) -> None:
        spec, name = self.spec, f"{VERIFY} C={context}"
        columns = list(spec.batch_tokens) if first else sorted(self.result.verify[spec.context_tokens[0]])
        predicted = {} if first else {b: self._predict_verify(context, b) for b in columns}
        if not first and not self._fits(sum(predicted.values())):
            self._skip_many(VERIFY, [f"C={context} B={b}" for b in columns],
                            f"time budget: the row needs about {sum(predicted.values()):.1f} s, "
                            f"{self._left():.1f} s left")
            return
        self.progress.phase(name, len(columns))
        row: dict[int, Timing] = {}
        layers = self._feature_layers()
        for i, batch_tokens in enumerate(columns):
            label = f"C={context} B={batch_tokens}"
            estimate = self._predict(VERIFY, batch_tokens) if first else predicted[batch_tokens]
            if not self._fits(estimate):
                self._skip_many(VERIFY, [f"C={context} B={b}" for b in columns[i:]],
                                f"time budget: {self._left():.1f} s left" + ("" if first else ", row abandoned"))
                break
            queries, contexts = place_verify(batch_tokens, context, spec.query_tokens_per_request)
            timing = self._measure(VERIFY, label, lambda: verify_step(self.target, queries, contexts,
                                                                     hidden_layer_ids=layers), track_memory=first)
            self.progress.advance(name, label, timing)
            if timing is None:
                if not first:  # a row must be complete to enter the grid
                    self._skip_many(VERIFY, [f"C={context} B={b}" for b in columns[i + 1:]],
                                    f"row C={context} abandoned after {label} failed")
                    return
                continue
            row[batch_tokens] = timing
            self._last[VERIFY] = (batch_tokens, timing.wall_s)
        if row and (first or len(row) == len(columns)):
            self.result.verify[context] = row

    def _sweep(self, phase: str, label: str, sizes, build: Callable[[int], Step], into: dict,
                       size: Callable[[int], int] = lambda n: n) -> None:
        name = f"{phase} {label}".strip()
        self.progress.phase(name, len(sizes))
        self._last.pop(phase, None)
        for i, n in enumerate(sizes):
            point = f"{name} n={n}"
            if not self._fits(self._predict(phase, size(n))):
                self._skip_many(phase, [f"{name} n={m}" for m in sizes[i:]], f"time budget: {self._left():.1f} s left")
                return
            timing = self._measure(phase, point, lambda: build(n))
            self.progress.advance(name, point, timing)
            if timing is not None:
                into[n] = timing
                self._last[phase] = (size(n), timing.wall_s)

    # ------------------------------------------------------------------------------------------- one point
    def _measure(self, phase: str, point: str, build: Callable[[], Step], *, track_memory: bool = False
                 ) -> Optional[Timing]:
        cuda = self.device.type == "cuda"
        step = None
        begin = self.clock()
        try:
            if cuda:
                torch.cuda.synchronize(self.device)
                before = torch.cuda.memory_allocated(self.device)
            step = build()
            if cuda:
                torch.cuda.reset_peak_memory_stats(self.device)
            timing = time_step(step.run, device=self.device, warmup=self.spec.warmup, replays=self.spec.replays,
                               use_cuda_graph=self._use_graphs)
            if cuda and track_memory:
                activation = torch.cuda.max_memory_allocated(self.device) - before - step.kv_cache_bytes
                self.result.peak_activation_bytes = max(self.result.peak_activation_bytes or 0, int(activation))
        except RuntimeError as error:  # out of memory, an unsupported kernel: record it and go on
            reason = f"{type(error).__name__}: {str(error).splitlines()[0][:300] if str(error) else ''}"
            self.result.skipped.append({"phase": phase, "point": point, "reason": reason})
            self.progress.message(f"{point}: failed ({reason})")
            return None
        finally:
            del step
            if cuda:
                torch.cuda.empty_cache()
        if timing.note:
            self.result.notes.append({"phase": phase, "point": point, "note": timing.note})
        self._count_capture(timing)
        # the point's whole wall time (building, allocating, timing, freeing) feeds the time guard
        return dataclasses.replace(timing, wall_s=max(timing.wall_s, self.clock() - begin))

    def _count_capture(self, timing: Timing, limit: int = MAX_CAPTURE_FAILURES) -> None:
        """After ``limit`` failed captures and none that worked, stop trying (each failure costs a capture)."""
        if not self._use_graphs:
            return
        self._graph_captures["ok" if timing.cuda_graph else "failed"] += 1
        if self._graph_captures["failed"] >= limit and not self._graph_captures["ok"]:
            self._use_graphs = False
            self.result.notes.append({"phase": "all", "point": "-", "note": f"CUDA graphs turned off after {limit} "
                                      "failed captures; every later point is timed eagerly"})
            self.progress.message(f"CUDA graph capture failed {limit} times: timing eagerly from now on "
                                  f"({timing.note})")

    # ------------------------------------------------------------------------------------------- time guard
    def _left(self) -> float:
        return float("inf") if self._deadline is None else self._deadline - self.clock()

    def _fits(self, predicted_s: float) -> bool:
        return self._deadline is None or self.clock() + predicted_s <= self._deadline

    def _predict(self, phase: str, size: int) -> float:
        """Wall seconds of the next point of ``phase``: its latest point's, scaled up by size."""
        if phase not in self._last:
            return 0.0
        last_size, last_wall = self._last[phase]
        return last_wall * max(1.0, size / max(last_size, 1))

    def _predict_verify(self, context: int, batch_tokens: int) -> float:
        """The same column in the latest rows, extrapolated linearly in context (a step's attention work grows
        linearly with the context it reads), never below the latest row's."""
        rows = sorted(c for c in self.result.verify if c < context)
        latest = self.result.verify[rows[-1]][batch_tokens].wall_s
        if len(rows) < 2:
            return latest
        before = self.result.verify[rows[-2]][batch_tokens].wall_s
        slope = max(0.0, (latest - before) / (rows[-1] - rows[-2]))
        return latest + slope * (context - rows[-1])

    def _skip_many(self, phase: str, points: list[str], reason: str) -> None:
        if points:
            self.progress.message(f"skipping {len(points)} {phase} point(s): {reason}")
        self.result.skipped.extend({"phase": phase, "point": p, "reason": reason} for p in points)


__all__ = ["AUTOREGRESSIVE", "HEAD", "PARALLEL", "PREFILL", "ProfileError", "ProfileResult", "Profiler",
           "ProgressSink", "VERIFY", "planned_points"]
