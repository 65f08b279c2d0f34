"""Where a study's points run: one interface, two executors.

- ``local``: a :class:`concurrent.futures.ProcessPoolExecutor` on this machine (forked workers where the
  platform allows, so they start with simlab already imported);
- ``dask``: a ``dask.distributed`` client, on a :class:`~distributed.LocalCluster` it starts (one
  single-threaded worker process per ``workers``) or, with ``address``, on a running scheduler (a user's
  cluster; its workers need simlab installed and must see the output folder at the same path).

A task is a picklable top-level function and its argument; tasks are expected to catch their own errors and
return them as data (see :func:`simlab.studies.tasks.run_task`). An executor yields ``(index, result)`` as
tasks finish, in any order; a task whose worker died yields a :class:`TaskLost` instead. What a task computes
must not depend on where it ran: simlab's common random numbers make every point deterministic.
"""

from __future__ import annotations

import importlib
import logging
import multiprocessing as mp
import os
from abc import ABC, abstractmethod
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional, Sequence

from simlab.common.errors import InputError

EXECUTORS = ("local", "dask")
WARM_MODULES = ("simlab.runner", "simlab.acceptance", "simlab.hardware", "simlab.workload", "simlab.results.folder")


def warm_up() -> None:
    """Import what a point needs (a few seconds: scipy, pandas) once per worker, not in its first point."""
    for name in WARM_MODULES:
        importlib.import_module(name)


@dataclass(frozen=True)
class TaskLost:
    """A task that returned nothing because its worker failed (killed, out of memory, unreachable)."""

    error: str


class Executor(ABC):
    """Runs tasks in parallel; use as a context manager so workers are shut down."""

    name: str
    num_workers: int

    @abstractmethod
    def run(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[tuple[int, Any]]:
        """Run ``fn(item)`` for every item; yield ``(index of item, result or TaskLost)`` as each finishes."""

    @abstractmethod
    def close(self) -> None:
        """Stop the workers (a task still running is abandoned)."""

    def describe(self) -> str:
        return f"{self.name} ({self.num_workers} worker{'s' if self.num_workers != 1 else ''})"

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


class LocalExecutor(Executor):
    """A process pool on this machine."""

    name = "local"

    def __init__(self, num_workers: int) -> None:
        self.num_workers = num_workers
        method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
        if method == "fork":
            warm_up()  # forked workers inherit the imports
        self._pool = ProcessPoolExecutor(max_workers=num_workers, mp_context=mp.get_context(method))
        # a forking pool starts every worker at its first task: do that now, before a progress bar's thread exists
        self._pool.submit(warm_up).result()

    def run(self, fn, items):
        futures = {self._pool.submit(fn, item): i for i, item in enumerate(items)}
        pending = set(futures)
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in sorted(done, key=futures.__getitem__):
                    yield futures[future], _outcome(future)
        finally:
            for future in pending:
                future.cancel()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


class DaskExecutor(Executor):
    """A ``dask.distributed`` client on a LocalCluster it starts, or on a running scheduler at ``address``."""

    name = "dask"

    def __init__(self, num_workers: Optional[int], address: Optional[str]) -> None:
        distributed = import_distributed()
        self._cluster = None
        if address:
            try:
                self._client = distributed.Client(address, timeout="20s")
            except (OSError, TimeoutError) as exc:
                raise InputError(f"no Dask scheduler answered ({exc})", field="--address", value=address,
                                 valid="the address of a running scheduler, e.g. tcp://host:8786") from None
            workers = self._client.scheduler_info().get("workers", {})
            self.num_workers = sum(int(w.get("nthreads", 1)) for w in workers.values()) or 1
        else:
            self.num_workers = num_workers or default_workers()
            self._cluster = distributed.LocalCluster(
                n_workers=self.num_workers, threads_per_worker=1, processes=True, dashboard_address=None,
                silence_logs=logging.ERROR,
            )
            self._client = distributed.Client(self._cluster)
        self._client.run(warm_up)

    def run(self, fn, items):
        distributed = import_distributed()
        futures = self._client.map(fn, list(items), pure=False)
        index = {future.key: i for i, future in enumerate(futures)}
        try:
            for future in distributed.as_completed(futures):
                yield index[future.key], _outcome(future)
        finally:
            for future in futures:
                if not future.done():
                    future.cancel()

    def describe(self) -> str:
        where = f"scheduler {self._client.scheduler.address}" if self._cluster is None else "LocalCluster"
        return f"dask on {where} ({self.num_workers} worker{'s' if self.num_workers != 1 else ''})"

    def close(self) -> None:
        self._client.close()
        if self._cluster is not None:
            self._cluster.close()


def _outcome(future) -> Any:
    try:
        return future.result()
    except Exception as exc:  # the worker died or could not be reached: the task's own errors come back as data
        text = str(exc).strip().splitlines()
        return TaskLost(f"{type(exc).__name__}: {text[0] if text else 'worker lost'}")


def import_distributed():
    """``dask.distributed``, or an :class:`InputError` saying how to install it."""
    try:
        import distributed
    except ImportError:
        raise InputError("needs Dask, which is not installed", field="--executor", value="dask",
                         valid="pip install 'simlab[dask]', or --executor local") from None
    return distributed


def default_workers() -> int:
    """The CPUs this process may use."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def check_executor_options(name: str = "local", *, workers: Optional[int] = None,
                           address: Optional[str] = None) -> None:
    """The ``--executor``, ``--workers`` and ``--address`` a command was given, checked before it does anything
    (every command that runs points, probes or deployments calls this)."""
    if name not in EXECUTORS:
        raise InputError("is not an executor", field="--executor", value=name, valid=", ".join(EXECUTORS))
    if workers is not None and workers < 1:
        raise InputError("must be at least 1", field="--workers", value=workers, valid="a positive integer")
    if name == "local" and address:
        raise InputError("is for --executor dask", field="--address", value=address,
                         valid="--executor dask --address ADDR, or no --address")
    if address and workers:
        raise InputError("sets the size of a LocalCluster; a running scheduler has its own workers",
                         field="--workers", value=workers, valid="--workers without --address, or neither")


def make_executor(name: str = "local", *, workers: Optional[int] = None, address: Optional[str] = None) -> Executor:
    """The executor called ``name`` (``local`` or ``dask``); ``address`` is for Dask only."""
    check_executor_options(name, workers=workers, address=address)
    if name == "local":
        return LocalExecutor(workers or default_workers())
    return DaskExecutor(workers, address)
