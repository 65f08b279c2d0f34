"""What the engine records: one row per engine step, one per request, and per-position counts."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simlab.results.records import STEP_COLUMNS as _SCHEMA

STEP_COLUMNS = tuple(name for name in _SCHEMA if name != "arm")  # the results folder's step columns
_FLOAT_COLUMNS = {"t_s", "step_s"}


class StepLog:
    """A growable columnar table of engine steps (amortised O(1) appends of whole blocks). Rows beyond the size
    are always zeros (the columns start as zeros, grow with zeros and are never truncated)."""

    def __init__(self, capacity: int = 4096) -> None:
        self._size = 0
        self._columns = {
            name: np.zeros(capacity, dtype=np.float64 if name in _FLOAT_COLUMNS else np.int64) for name in STEP_COLUMNS
        }

    def __len__(self) -> int:
        return self._size

    def append(self, num_rows: int, **columns) -> int:
        """Append ``num_rows`` rows; every column is a scalar or an array of that length (missing ones are 0).
        Returns the index of the first row."""
        end = self._size + num_rows
        if end > len(self._columns["t_s"]):
            capacity = max(end, 2 * len(self._columns["t_s"]))
            for name, old in self._columns.items():
                grown = np.zeros(capacity, dtype=old.dtype)
                grown[: self._size] = old[: self._size]
                self._columns[name] = grown
        start = self._size
        for name, value in columns.items():  # the rows past the size are zeros: missing columns stay 0
            self._columns[name][start:end] = value
        self._size = end
        return start

    def add_to(self, row: int, **columns) -> None:
        """Add to the values of one row."""
        for name, value in columns.items():
            self._columns[name][row] += value

    def columns(self) -> dict[str, np.ndarray]:
        """The rows in time order (replicas append whole blocks, so raw order interleaves them by block)."""
        order = np.lexsort((self._columns["replica"][: self._size], self._columns["t_s"][: self._size]))
        return {name: col[: self._size][order] for name, col in self._columns.items()}


@dataclass
class RequestLog:
    """Per-request timestamps and counters, indexed by request id."""

    arrival_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    steps: np.ndarray
    replica: np.ndarray

    @classmethod
    def empty(cls, num_requests: int) -> "RequestLog":
        nan = np.full(num_requests, np.nan)
        return cls(
            arrival_s=nan.copy(),
            first_token_s=nan.copy(),
            finish_s=nan.copy(),
            steps=np.zeros(num_requests, dtype=np.int64),
            replica=np.full(num_requests, -1, dtype=np.int64),
        )


class PositionCounts:
    """Per draft position k: how often it was verified, reached (verified with every earlier position
    accepted) and accepted. Denominators are counted per position, as verify lengths vary.

    Adding keeps the verify lengths and accepted counts until enough have come, then folds them into three
    histograms (of verify lengths, of reached lengths and of accepted counts) with one bincount; the
    per-position counts are read from the histograms."""

    FOLD_EVERY = 1 << 16  # request-steps kept before folding

    def __init__(self, gamma: int) -> None:
        self.gamma = gamma
        self._histogram = np.zeros(3 * (gamma + 1), dtype=np.int64)
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []
        self._num_pending = 0

    @classmethod
    def empty(cls, gamma: int) -> "PositionCounts":
        return cls(gamma)

    def add(self, lengths: np.ndarray, accepted: np.ndarray) -> None:
        """lengths/accepted: verify lengths and accepted counts of some request-steps (any shape; not
        modified afterwards)."""
        if self.gamma == 0:
            return
        self._pending.append((lengths, accepted))
        self._num_pending += lengths.size
        if self._num_pending >= self.FOLD_EVERY:
            self._fold()

    def _fold(self) -> None:
        if not self._pending:
            return
        gamma = self.gamma
        lengths = np.concatenate([pair[0].ravel() for pair in self._pending])
        accepted = np.concatenate([pair[1].ravel() for pair in self._pending])
        self._pending, self._num_pending = [], 0
        reached = np.minimum(lengths, accepted + 1)
        keys = np.concatenate([lengths, reached + (gamma + 1), accepted + 2 * (gamma + 1)])
        self._histogram += np.bincount(keys, minlength=3 * (gamma + 1))

    def _at_least(self, which: int) -> np.ndarray:
        """[gamma] how many of histogram ``which``'s values are >= k, for k = 1..gamma."""
        self._fold()
        counts = self._histogram[which * (self.gamma + 1) : (which + 1) * (self.gamma + 1)]
        return counts[::-1].cumsum()[::-1][1:]

    @property
    def verified(self) -> np.ndarray:
        return self._at_least(0)

    @property
    def reached(self) -> np.ndarray:
        return self._at_least(1)

    @property
    def accepted(self) -> np.ndarray:
        return self._at_least(2)
