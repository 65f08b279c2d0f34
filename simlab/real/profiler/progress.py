"""What a profile run shows while it runs and when it ends: a rich progress bar on a terminal, one line per phase
otherwise (logs of unattended GPU runs), and a short summary table of what was measured."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from simlab.real.profiler.runner import ProfileResult, ProgressSink
from simlab.real.profiler.timing import Timing


class BarProgress(ProgressSink):
    """A rich bar over every planned point; phases change its description."""

    def __init__(self, total: int, console: Console) -> None:
        self.console = console
        self.bar = Progress(TextColumn("{task.description:<28}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), console=console, transient=True)
        self.task = self.bar.add_task("starting", total=total)

    def __enter__(self) -> "BarProgress":
        self.bar.start()
        return self

    def __exit__(self, *exc) -> None:
        self.bar.stop()

    def phase(self, name: str, total: int) -> None:
        self.bar.update(self.task, description=name)

    def advance(self, name: str, label: str, timing: Optional[Timing]) -> None:
        self.bar.advance(self.task)

    def message(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)


class LineProgress(ProgressSink):
    """One line when a phase ends (points, median range, seconds), plus every message; for logs."""

    def __init__(self, total: int, console: Console) -> None:
        self.console, self.total = console, total
        self.begin = time.perf_counter()
        self.done = 0
        self._phase: Optional[tuple[str, int, float, list[float]]] = None

    def __enter__(self) -> "LineProgress":
        return self

    def __exit__(self, *exc) -> None:
        self._end_phase()

    def phase(self, name: str, total: int) -> None:
        self._end_phase()
        self._phase = (name, total, time.perf_counter(), [])

    def advance(self, name: str, label: str, timing: Optional[Timing]) -> None:
        self.done += 1
        if self._phase is not None and timing is not None:
            self._phase[3].append(timing.median_s)

    def message(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def _end_phase(self) -> None:
        if self._phase is None:
            return
        name, total, start, medians = self._phase
        self._phase = None
        spread = f", median {min(medians) * 1e3:.3g}..{max(medians) * 1e3:.3g} ms" if medians else ""
        self.message(f"{name}: {len(medians)}/{total} points in {time.perf_counter() - start:.1f} s{spread} "
                     f"[{self.done}/{self.total} done, {time.perf_counter() - self.begin:.0f} s elapsed]")


class QuietProgress(ProgressSink):
    def __enter__(self) -> "QuietProgress":
        return self

    def __exit__(self, *exc) -> None:
        pass


def make_progress(total: int, *, quiet: bool):
    """A bar on a terminal, lines otherwise, nothing when ``quiet`` (all on stderr)."""
    if quiet:
        return QuietProgress()
    console = Console(stderr=True, highlight=False)
    if not console.is_terminal:
        console = Console(stderr=True, highlight=False, width=160)
    return BarProgress(total, console) if console.is_terminal else LineProgress(total, console)


def print_summary(result: ProfileResult, out: Path) -> None:
    """A table of verify ms at a few batch sizes per context, the drafter and prefill figures, and the file."""
    console = Console(stderr=True, highlight=False)
    if not console.is_terminal:
        console = Console(stderr=True, highlight=False, width=160)
    rows = sorted(result.verify)
    columns = sorted(result.verify[rows[0]])
    shown = sorted({columns[0], *[b for b in columns if b in (8, 64, 512, 2048, 8192)], columns[-1]})
    table = Table(title="verify ms (raw medians) by total context")
    table.add_column("context")
    for b in shown:
        table.add_column(f"B={b}", justify="right")
    for c in rows:
        table.add_row(str(c), *[f"{result.verify[c][b].median_s * 1e3:.3f}" if b in result.verify[c] else "-"
                                for b in shown])
    console.print(table)
    for name, curve in (("parallel block (gamma %d)" % result.spec.gamma, result.draft_parallel.get(result.spec.gamma)),
                        ("sequential head / position", result.sequential_head),
                        ("autoregressive step", result.autoregressive)):
        if curve:
            low, high = min(curve), max(curve)
            console.print(f"{name}: R={low} {curve[low].median_s * 1e3:.3f} ms, R={high} "
                          f"{curve[high].median_s * 1e3:.3f} ms")
    if result.prefill:
        chunk = max(result.prefill)
        console.print(f"prefill: {result.prefill[chunk].median_s / chunk * 1e6:.2f} us/token ({chunk}-token chunk)")
    graphed = sum(t.cuda_graph for row in result.verify.values() for t in row.values())
    console.print(f"{result.num_points()} points in {result.elapsed_s:.1f} s ({graphed} verify points in CUDA graphs), "
                  f"{len(result.skipped)} skipped, {len(result.notes)} graph fallbacks; wrote {out}")


__all__ = ["BarProgress", "LineProgress", "make_progress", "print_summary"]
