"""Progress of a study: a rich bar on a terminal (done, failed, time left), plain lines otherwise."""

from __future__ import annotations

import sys
import time
from typing import Optional, TextIO


class StudyProgress:
    """What a sweep or a what-if reports as it runs. This base class reports nothing."""

    def start(self, total: int, *, skipped: int = 0, label: str = "points") -> None:
        """``total`` tasks to run now (``skipped`` were already done); 0 when they are not known yet (a
        what-if learns its probes as it goes, see :meth:`add`), and then no time left is estimated."""

    def add(self, count: int) -> None:
        """``count`` more tasks were planned (a what-if learns its probes as it goes)."""

    def done(self, name: str, *, failed: bool = False, note: str = "") -> None:
        """One task finished (``failed`` when it ended in an error)."""

    def close(self) -> None:
        """The study ended."""


class PlainProgress(StudyProgress):
    """One line per finished task on a stream: for logs and pipes, where a bar would be noise."""

    def __init__(self, stream: Optional[TextIO] = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.total = self.finished = self.failed = 0
        self.label = "points"
        self.open_ended = False
        self.started = time.perf_counter()

    def start(self, total: int, *, skipped: int = 0, label: str = "points") -> None:
        self.total, self.label, self.started = total, label, time.perf_counter()
        self.open_ended = total == 0
        if skipped:
            self._print(f"{skipped} {label} already finished, {total} to run")

    def add(self, count: int) -> None:
        self.total += count

    def done(self, name: str, *, failed: bool = False, note: str = "") -> None:
        self.finished += 1
        self.failed += failed
        elapsed = time.perf_counter() - self.started
        status = "FAILED" if failed else "done"
        if self.open_ended:
            timing = f"{_clock(elapsed)} elapsed"
        else:
            left = elapsed / self.finished * (self.total - self.finished)
            timing = f"{_clock(elapsed)} elapsed, about {_clock(left)} left"
        count = f"{self.finished}" if self.open_ended else f"{self.finished}/{self.total}"
        self._print(f"[{count}] {name} {status}{': ' + note if note else ''}; {self.failed} failed; {timing}")

    def close(self) -> None:
        """A last line: what ran, in how long (the total was an estimate where the study plans as it goes)."""
        self._print(_finished_line(self.finished, self.label, self.failed, time.perf_counter() - self.started))

    def _print(self, text: str) -> None:
        print(text, file=self.stream, flush=True)


class BarProgress(StudyProgress):
    """A rich progress bar on stderr: tasks done of total, failures, elapsed and estimated time left."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
            TimeRemainingColumn

        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("[red]{task.fields[failed]} failed"), TextColumn("elapsed"), TimeElapsedColumn(),
            TextColumn("left"), TimeRemainingColumn(), console=Console(stderr=True), transient=True,
        )
        self._task = None
        self.failed = 0
        self.finished = 0
        self.label = "points"
        self.started = time.perf_counter()

    def start(self, total: int, *, skipped: int = 0, label: str = "points") -> None:
        self._progress.start()
        self.label, self.started = label, time.perf_counter()
        if skipped:
            self._progress.console.print(f"{skipped} {label} already finished, {total} to run")
        self._task = self._progress.add_task(label, total=total, failed=0)

    def add(self, count: int) -> None:
        task = self._progress.tasks[0]
        self._progress.update(self._task, total=(task.total or 0) + count)

    def done(self, name: str, *, failed: bool = False, note: str = "") -> None:
        self.failed += failed
        self.finished += 1
        self._progress.update(self._task, advance=1, failed=self.failed)

    def close(self) -> None:
        self._progress.stop()
        if self._task is not None:
            self._progress.console.print(_finished_line(self.finished, self.label, self.failed,
                                                        time.perf_counter() - self.started), highlight=False)


def default_progress(quiet: bool = False) -> StudyProgress:
    """A bar when stderr is a terminal, plain lines when it is not, nothing when ``quiet``."""
    if quiet:
        return StudyProgress()
    return BarProgress() if sys.stderr.isatty() else PlainProgress()


def _finished_line(finished: int, label: str, failed: int, elapsed_s: float) -> str:
    return f"finished: {finished} {label} in {_clock(elapsed_s)}, {failed} failed"


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"
