"""Progress of a run as people see it: a bar on a terminal, plain lines when stderr is a file or a pipe.

Both are :class:`~simlab.runner.RunProgress` objects for :func:`simlab.run_scenario`; :func:`run_progress` picks
one for the command line.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from typing import Callable, Iterator, Optional, TextIO

from simlab.runner import RunProgress

QUARTERS = 4


class BarProgress(RunProgress):
    """Feeds a rich progress bar, one task per arm."""

    def __init__(self, progress) -> None:
        self.progress = progress
        self.tasks: list = []

    def start(self, arm_labels: list[str], num_requests: int) -> None:
        self.tasks = [self.progress.add_task(label, total=num_requests) for label in arm_labels]

    def update(self, arm_index: int, num_finished: int) -> None:
        self.progress.update(self.tasks[arm_index], completed=num_finished)


class LineProgress(RunProgress):
    """One line per arm at 25, 50, 75 and 100 % of its requests, and a line with every arm's share at least
    every ``every_s`` seconds while any arm advances (so a log never stays silent for long)."""

    def __init__(self, stream: Optional[TextIO] = None, *, every_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self.every_s = every_s
        self.clock = clock
        self.labels: list[str] = []
        self.num_requests = 0
        self.done: list[int] = []
        self.quarter: list[int] = []

    def _print(self, text: str) -> None:
        stream = self.stream or sys.stderr
        print(text, file=stream, flush=True)
        self.last_line_s = self.clock()

    def start(self, arm_labels: list[str], num_requests: int) -> None:
        self.labels = list(arm_labels)
        self.num_requests = num_requests
        self.done = [0] * len(arm_labels)
        self.quarter = [0] * len(arm_labels)
        self.start_s = self.clock()
        self._print(f"simulating {len(arm_labels)} arm{'s' if len(arm_labels) != 1 else ''} "
                    f"x {num_requests:,} requests")

    def update(self, arm_index: int, num_finished: int) -> None:
        self.done[arm_index] = num_finished
        total = max(self.num_requests, 1)
        quarter = min(QUARTERS, num_finished * QUARTERS // total)
        elapsed = self.clock() - self.start_s
        if quarter > self.quarter[arm_index]:
            self.quarter[arm_index] = quarter
            self._print(f"{self.labels[arm_index]}: {quarter * 100 // QUARTERS}% "
                        f"({num_finished:,}/{self.num_requests:,} requests, {elapsed:.0f} s)")
        elif self.clock() - self.last_line_s >= self.every_s:
            shares = ", ".join(f"{label} {100 * done // total}%" for label, done in zip(self.labels, self.done))
            self._print(f"{elapsed:.0f} s: {shares}")


@contextmanager
def run_progress(quiet: bool = False) -> Iterator[Optional[RunProgress]]:
    """The progress a command shows on stderr: none when ``quiet``, a bar on a terminal, plain lines otherwise."""
    if quiet:
        yield None
        return
    from rich.console import Console

    console = Console(stderr=True)
    if not console.is_terminal:
        yield LineProgress()
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        yield BarProgress(bar)
