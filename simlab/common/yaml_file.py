"""Reading a YAML file, with a missing file or a syntax error reported as one line for a person."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from simlab.common.errors import InputError


def read_yaml(path: str | Path, *, what: str = "file") -> Any:
    """Parse a YAML file, reporting a missing file or a syntax error as an :class:`InputError`."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"no such {what}", file=path, valid=f"a path to an existing {what}")
    try:
        with path.open(encoding="utf-8") as fh:
            return yaml.safe_load(fh)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"not valid YAML{where}: {problem}", file=path) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason})", file=path) from None
