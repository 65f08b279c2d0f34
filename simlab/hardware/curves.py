"""Piecewise-linear curves and bilinear grids, flat beyond their ends.

Each has a scalar path (``at``: plain Python with bisect, about a microsecond) for the once-per-step calls
and a vectorised path (``__call__``: numpy broadcasting, no Python loop) for the schedulers' whole curves.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Sequence

import numpy as np


class Curve:
    """``y(x)`` linear between the points ``(xs[i], ys[i])``, flat beyond the first and last."""

    __slots__ = ("xs", "ys", "_xs_arr", "_ys_arr", "_constant")

    def __init__(self, xs: Sequence[float], ys: Sequence[float]) -> None:
        if len(xs) != len(ys) or not xs:
            raise ValueError(f"a curve needs as many x as y values (got {len(xs)} and {len(ys)})")
        if any(b <= a for a, b in zip(xs, xs[1:])):
            raise ValueError("curve x values must be strictly increasing")
        self.xs = [float(x) for x in xs]
        self.ys = [float(y) for y in ys]
        self._xs_arr = np.asarray(self.xs)
        self._ys_arr = np.asarray(self.ys)
        self._constant = self.ys[0] if len(self.ys) == 1 else None

    @classmethod
    def constant(cls, value: float) -> "Curve":
        return cls([1.0], [value])

    def at(self, x: float) -> float:
        """The curve at one point."""
        if self._constant is not None:
            return self._constant
        xs = self.xs
        if x <= xs[0]:
            return self.ys[0]
        if x >= xs[-1]:
            return self.ys[-1]
        i = bisect_right(xs, x)
        x0, x1 = xs[i - 1], xs[i]
        y0, y1 = self.ys[i - 1], self.ys[i]
        return y0 + (y1 - y0) * (x - x0) / (x1 - x0)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """The curve at every element of ``x`` (any shape)."""
        x = np.asarray(x, dtype=float)
        if self._constant is not None:
            return np.full(x.shape, self._constant)
        return np.interp(x, self._xs_arr, self._ys_arr)


class LinearTail(Curve):
    """A :class:`Curve` that goes on along its last segment beyond its last point (a cost that keeps growing with
    its tokens), and stays flat below its first."""

    __slots__ = ()

    def at(self, x: float) -> float:
        xs = self.xs
        if x > xs[-1]:
            y0, y1 = self.ys[-2], self.ys[-1]
            return y1 + (y1 - y0) * (x - xs[-1]) / (xs[-1] - xs[-2])
        return Curve.at(self, x)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        xs, ys = self._xs_arr, self._ys_arr
        slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
        return np.interp(x, xs, ys) + np.where(x > xs[-1], slope * (x - xs[-1]), 0.0)


class Grid:
    """``z(row, col)`` over a rectangular grid, bilinear inside, flat beyond every edge.

    ``values[i][j]`` is the value at ``rows[i]``, ``cols[j]``.
    """

    __slots__ = ("rows", "cols", "values", "_row_curves", "_rows_arr", "_cols_arr", "_values_arr", "_values_flat")

    def __init__(self, rows: Sequence[float], cols: Sequence[float], values: Sequence[Sequence[float]]) -> None:
        if len(values) != len(rows) or any(len(v) != len(cols) for v in values):
            raise ValueError(f"a grid needs {len(rows)} rows of {len(cols)} values")
        for axis in (rows, cols):
            if not axis or any(b <= a for a, b in zip(axis, axis[1:])):
                raise ValueError("grid axes must be non-empty and strictly increasing")
        self.rows = [float(r) for r in rows]
        self.cols = [float(c) for c in cols]
        self.values = [[float(v) for v in row] for row in values]
        self._row_curves = [Curve(self.cols, row) for row in self.values]
        # a one-point axis becomes two points holding the same values, so every cell has two corners
        rows_arr, cols_arr, values_arr = np.asarray(self.rows), np.asarray(self.cols), np.asarray(self.values)
        if rows_arr.size == 1:
            rows_arr, values_arr = np.append(rows_arr, rows_arr[0] + 1.0), np.vstack([values_arr, values_arr])
        if cols_arr.size == 1:
            cols_arr, values_arr = np.append(cols_arr, cols_arr[0] + 1.0), np.hstack([values_arr, values_arr])
        self._rows_arr, self._cols_arr, self._values_arr = rows_arr, cols_arr, values_arr
        self._values_flat = np.ascontiguousarray(values_arr).ravel()

    def at(self, row: float, col: float) -> float:
        """The grid at one point."""
        rows = self.rows
        if row <= rows[0]:
            return self._row_curves[0].at(col)
        if row >= rows[-1]:
            return self._row_curves[-1].at(col)
        i = bisect_right(rows, row)
        w = (row - rows[i - 1]) / (rows[i] - rows[i - 1])
        low = self._row_curves[i - 1].at(col)
        high = self._row_curves[i].at(col)
        return low + (high - low) * w

    def __call__(self, row: np.ndarray, col: np.ndarray) -> np.ndarray:
        """The grid at ``(row, col)`` broadcast together (e.g. rows ``[S, 1]`` and columns ``[S, n]``).

        Each axis is located on its own shape before broadcasting, so a curve over n columns at S contexts
        costs O(S + n) searches and one O(S * n) blend. Integer batches go faster through :class:`BatchLookup`.
        """
        row, col = np.asarray(row, dtype=float), np.asarray(col, dtype=float)
        z = self._values_arr
        i, wr = _locate(self._rows_arr, row)
        j, wc = _locate(self._cols_arr, col)
        flat, width = self._values_flat, z.shape[1]
        corner = i * width + j
        z00, z01 = flat[corner], flat[corner + 1]
        z10, z11 = flat[corner + width], flat[corner + width + 1]
        top = z00 + (z01 - z00) * wc
        bottom = z10 + (z11 - z10) * wc
        return top + (bottom - top) * wr


class BatchLookup:
    """A grid (or curve) tabulated at every integer batch 0..D, for integer batch tokens: one gather per grid
    row and one blend across rows, with the same arithmetic as :meth:`Grid.__call__` (columns, then rows).

    ``padded`` [D + 1] is the column each integer batch reads (CUDA-graph padding applied). Batches above D read
    D, which is exact when the grid is flat from D on. Batch 0 costs 0.
    """

    __slots__ = ("_flat", "_width", "_last", "_rows_arr", "_rows")

    def __init__(self, grid: "Grid | None", curve: "Curve | None", padded: np.ndarray) -> None:
        if grid is not None:
            j, wc = _locate(grid._cols_arr, padded)
            z = grid._values_arr
            table = z[:, j] + (z[:, j + 1] - z[:, j]) * wc  # [grid rows, D + 1]
            self._rows_arr = grid._rows_arr
            self._rows = grid._rows_arr.tolist()
        else:
            table = curve(padded)[None, :]  # type: ignore[misc]
            self._rows_arr = self._rows = None
        table[:, 0] = 0.0
        self._width = table.shape[1]
        self._last = self._width - 1
        self._flat = np.ascontiguousarray(table).ravel()

    def arrays(self) -> tuple[np.ndarray, int, np.ndarray]:
        """(the flat table [rows x width], its width, the row axis; empty for a curve) for compiled readers,
        which repeat :meth:`__call__`'s arithmetic."""
        rows = np.zeros(0) if self._rows_arr is None else np.ascontiguousarray(self._rows_arr, dtype=np.float64)
        return self._flat, self._width, rows

    def __call__(self, batch_tokens: np.ndarray, row: np.ndarray | float) -> np.ndarray:
        """Values at integer ``batch_tokens`` (>= 0) and ``row`` (context tokens), broadcast together."""
        b = np.minimum(batch_tokens, self._last)
        if self._rows_arr is None:
            value = self._flat[b]
            shape = np.broadcast_shapes(b.shape, np.shape(row))
            return value if value.shape == shape else np.broadcast_to(value, shape).copy()
        if np.size(row) == 1:  # one context (a step, or a scheduler's curve): locate it in plain Python
            rows, x = self._rows, float(np.asarray(row).flat[0])
            clipped = min(max(x, rows[0]), rows[-1])
            i = min(bisect_right(rows, clipped), len(rows) - 1) - 1
            wr = (clipped - rows[i]) / (rows[i + 1] - rows[i])
            if np.ndim(row) > b.ndim:
                b = b.reshape((1,) * (np.ndim(row) - b.ndim) + b.shape)
        else:
            i, wr = _locate(self._rows_arr, np.asarray(row, dtype=float))
        index = i * self._width + b
        top = self._flat[index]
        return top + (self._flat[index + self._width] - top) * wr


def _locate(axis: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index ``i`` of the cell ``[axis[i], axis[i+1]]`` holding each ``x`` (clamped) and the weight of ``i+1``."""
    clipped = np.minimum(np.maximum(x, axis[0]), axis[-1])
    # clipped >= axis[0], so the right-side search is >= 1
    i = np.minimum(axis.searchsorted(clipped, side="right"), axis.size - 1) - 1
    low = axis[i]
    w = (clipped - low) / (axis[i + 1] - low)
    return i, w
