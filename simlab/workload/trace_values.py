"""Checking and converting a trace's columns, vectorised; the first bad row is reported by its index.

The readers turn a :class:`BadValue` (row index, column) into an :class:`~simlab.common.errors.InputError` that names
the line of the file.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

_UNITS_PER_SECOND = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}
_LARGEST_TOKENS = 2**53
POSITIVE_INT = "a positive integer (1, 2, ...)"


class BadValue(Exception):
    """Row ``row`` (0-based, among data rows) of ``column`` holds ``value``, which is wrong: ``problem``."""

    def __init__(self, row: int, column: str, value: Any, problem: str, valid: str) -> None:
        super().__init__(problem)
        self.row, self.column, self.value, self.problem, self.valid = row, column, value, problem, valid


def token_counts(values: pd.Series, column: str) -> np.ndarray:
    """A column of token counts as int64, each a whole number >= 1."""
    if pd.api.types.is_bool_dtype(values.dtype):
        _fail(values, column, np.ones(len(values), dtype=bool), "not a number", POSITIVE_INT)
    if pd.api.types.is_integer_dtype(values.dtype):
        array = values.to_numpy(dtype=np.int64)
        _check_positive(values, column, array >= 1)
        return array
    _reject_bools(values, column, POSITIVE_INT)
    numbers = _numbers(values, column, POSITIVE_INT)
    _check_positive(values, column, numbers >= 1)
    whole = (numbers == np.floor(numbers)) & (numbers <= _LARGEST_TOKENS)
    _fail(values, column, ~whole, "not a whole number", POSITIVE_INT)
    return numbers.astype(np.int64)


def arrival_offsets_s(values: pd.Series, column: str, unit: str) -> np.ndarray:
    """Arrival times as float64 seconds after the earliest one (so the earliest is 0.0).

    ``unit`` is s, ms, us or ns for numbers, or ``datetime`` for ISO 8601 date-times (nanosecond precision is
    kept: differences are taken in integer nanoseconds before converting to seconds).
    """
    if unit == "datetime":
        return _datetime_offsets_s(values, column)
    valid = f"a number of {unit} (the arrival time)"
    if pd.api.types.is_integer_dtype(values.dtype):
        ticks = values.to_numpy(dtype=np.int64)
        return (ticks - ticks.min()).astype(np.float64) / _UNITS_PER_SECOND[unit]
    _reject_bools(values, column, valid)
    numbers = _numbers(values, column, valid)
    return (numbers - numbers.min()) / _UNITS_PER_SECOND[unit]


def shares(values: pd.Series, column: str) -> np.ndarray:
    """A column of shares as float64, each from 0 to 1."""
    valid = "a share from 0 to 1"
    _reject_bools(values, column, valid)
    numbers = _numbers(values, column, valid)
    _fail(values, column, (numbers < 0.0) | (numbers > 1.0), "not between 0 and 1", valid)
    return numbers


def labels(values: pd.Series, column: str) -> np.ndarray:
    """A column of domain labels as an array of non-empty str."""
    text = values.astype(object)
    empty = text.isna().to_numpy() | (text.astype(str).str.strip() == "").to_numpy()
    _fail(values, column, empty, "empty", "a domain name (non-empty text)")
    return text.astype(str).str.strip().to_numpy(dtype=object)


def _datetime_offsets_s(values: pd.Series, column: str) -> np.ndarray:
    valid = "an ISO 8601 date-time such as 2023-11-16 18:15:46.6805900"
    text = values.astype(object)
    parsed = pd.to_datetime(text, format="ISO8601", utc=True, errors="coerce")
    _fail(values, column, parsed.isna().to_numpy(), "not a date-time", valid)
    ticks_ns = parsed.dt.tz_convert(None).dt.as_unit("ns").to_numpy().view(np.int64)
    return (ticks_ns - ticks_ns.min()).astype(np.float64) / 1e9


def _numbers(values: pd.Series, column: str, valid: str) -> np.ndarray:
    """float64 of the values; empty, non-numeric and non-finite entries are errors."""
    numbers = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    bad = ~np.isfinite(numbers)
    if bad.any():
        row = int(np.argmax(bad))
        value = values.iloc[row]
        problem = "empty" if _is_empty(value) else ("not finite" if _is_number(value) else "not a number")
        raise BadValue(row, column, value, problem, valid)
    return numbers


def _check_positive(values: pd.Series, column: str, ok: np.ndarray) -> None:
    _fail(values, column, ~ok, "must be at least 1", POSITIVE_INT)


def _reject_bools(values: pd.Series, column: str, valid: str) -> None:
    if values.dtype == object:
        is_bool = np.fromiter((type(v) is bool for v in values.to_numpy()), dtype=bool, count=len(values))
        _fail(values, column, is_bool, "not a number", valid)


def _fail(values: pd.Series, column: str, bad: np.ndarray, problem: str, valid: str) -> None:
    if bad.any():
        row = int(np.argmax(bad))
        raise BadValue(row, column, values.iloc[row], problem, valid)


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value)) or (
        isinstance(value, str) and not value.strip()
    )


def _is_number(value: Any) -> bool:
    if isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
        return True
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True
