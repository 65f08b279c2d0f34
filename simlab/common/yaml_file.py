"""Reading a YAML file, with a missing file or a syntax error reported as one line for a person.

Files are parsed with libyaml's safe loader when PyYAML has it (about 6x the pure-Python one) and kept per
process, keyed by path, size and modification time: a sweep reads the same profile and preset for every point.
Callers get their own copy, so editing what they read changes nothing for the next caller."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from simlab.common.errors import InputError

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_PARSED: dict[tuple[str, int, int], Any] = {}
_MAX_NUM_PARSED = 256


def read_yaml(path: str | Path, *, what: str = "file") -> Any:
    """Parse a YAML file, reporting a missing file or a syntax error as an :class:`InputError`."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"no such {what}", file=path, valid=f"a path to an existing {what}")
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _PARSED:
        if len(_PARSED) >= _MAX_NUM_PARSED:
            _PARSED.clear()
        _PARSED[key] = _parse(path)
    return copy.deepcopy(_PARSED[key])


def _parse(path: Path) -> Any:
    try:
        with path.open(encoding="utf-8") as fh:
            try:
                return yaml.load(fh, Loader=_LOADER)  # noqa: S506 - a safe loader
            except yaml.YAMLError:
                # The pure-Python parser's messages name the character and the token it expected; take its words.
                fh.seek(0)
                return yaml.load(fh, Loader=yaml.SafeLoader)  # noqa: S506
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"not valid YAML{where}: {problem}", file=path) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason})", file=path) from None
