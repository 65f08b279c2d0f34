"""Errors meant for people: bad input is reported as one line naming the file, the field, the value
and what would be valid, and maps to exit status 2 on the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class InputError(Exception):
    """The user's input (a scenario, a trace, a profile) is wrong.

    ``str(err)`` is the whole message: ``FILE: FIELD: VALUE: PROBLEM; valid: EXPECTED``.
    """

    def __init__(
        self,
        problem: str,
        *,
        file: str | Path | None = None,
        field: str | None = None,
        value: Any = ...,
        valid: str | None = None,
    ) -> None:
        self.problem = problem
        self.file = str(file) if file is not None else None
        self.field = field
        self.value = value
        self.valid = valid
        super().__init__(self.message)

    @property
    def message(self) -> str:
        parts = []
        if self.file:
            parts.append(self.file)
        if self.field:
            parts.append(self.field)
        head = ": ".join(parts)
        body = self.problem
        if self.value is not ...:
            body = f"{_show(self.value)}: {body}"
        text = f"{head}: {body}" if head else body
        if self.valid:
            text += f"; valid: {self.valid}"
        return text

    def with_context(self, *, file: str | Path | None = None, field_prefix: str | None = None) -> "InputError":
        """A copy that also names the file, or nests the field under ``field_prefix``."""
        field = self.field
        if field_prefix:
            field = f"{field_prefix}.{field}" if field else field_prefix
        return InputError(
            self.problem,
            file=self.file or (str(file) if file is not None else None),
            field=field,
            value=self.value,
            valid=self.valid,
        )


def _show(value: Any) -> str:
    text = repr(plain(value))
    return text if len(text) <= 80 else text[:77] + "..."


def plain(value: Any) -> Any:
    """``value`` as the plain Python value a person wrote: numpy scalars and arrays become int, float, bool and
    lists (a message shows ``-600``, not ``np.int64(-600)``)."""
    if hasattr(value, "tolist") and callable(value.tolist) and type(value).__module__ == "numpy":
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return type(value)(plain(v) for v in value)
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    return value


class OutputError(Exception):
    """Writing an output failed for a reason outside the input (disk full, permissions changed mid-run, ...).

    ``str(err)`` is one line naming the path and the reason; the command line prints it and exits with status 1.
    Whatever was at the path is left as it was."""

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(self.message)

    @property
    def message(self) -> str:
        return f"{self.path}: could not write: {self.reason}; nothing there was changed"

    @classmethod
    def from_os_error(cls, path: str | Path, exc: OSError) -> "OutputError":
        reason = exc.strerror or str(exc) or type(exc).__name__
        where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(path) else ""
        return cls(path, f"{reason}{where}")
