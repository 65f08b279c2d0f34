"""Dotted field paths into a scenario's plain data: ``workload.rate``, ``engine.replicas``, ``hardware``,
``arms[2].gamma``, ``acceptance.confidence.noise_logit_sd``.

A path is checked against the scenario schema (:mod:`simlab.config`) along the data it walks through, so a
typo is an :class:`~simlab.common.errors.InputError` naming the path and what exists where it went wrong, and a field
the file leaves at its default (``engine.replicas`` in a file without ``engine:``) is still a valid path.
"""

from __future__ import annotations

import copy
import re
import typing
from typing import Any, Optional, Union

from pydantic import BaseModel

from simlab.common.errors import InputError
from simlab.common.schema_errors import pick_member
from simlab.config import Scenario

Part = Union[str, int]
_SEGMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)")
_INDEX = re.compile(r"\[(\d+)\]")
_MISSING = object()


def parse_path(path: str, *, file: Any = None, field: str = "sweep") -> list[Part]:
    """``arms[2].gamma`` -> ``["arms", 2, "gamma"]``; a malformed path is an :class:`InputError`."""
    if not isinstance(path, str) or not path:
        raise InputError("is not a field path", file=file, field=field, value=path,
                         valid="a dotted path such as workload.concurrency or arms[2].gamma")
    parts: list[Part] = []
    for segment in path.split("."):
        match = _SEGMENT.fullmatch(segment)
        if match is None:
            raise InputError("is not a field path", file=file, field=field, value=path,
                             valid="names joined by dots, list items as [N]: workload.concurrency, arms[2].gamma")
        parts.append(match.group(1))
        parts.extend(int(i) for i in _INDEX.findall(match.group(2)))
    return parts


def format_path(parts: list[Part]) -> str:
    """The inverse of :func:`parse_path`."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (("." if text else "") + part)
    return text


def check_path(data: dict, path: str, *, file: Any = None, field: str = "sweep") -> list[Part]:
    """Parse ``path`` and check that it names a field of the scenario ``data``; returns its parts.

    Errors name the path (as ``field``'s value) and what exists at the place it went wrong."""
    parts = parse_path(path, file=file, field=field)
    annotation: Any = Scenario
    node: Any = data
    for i, part in enumerate(parts):
        where = format_path(parts[:i]) or "the scenario"
        if isinstance(part, str) and isinstance(node, (str, int, float, bool)):
            raise InputError(f"{where} is a value, not a mapping with fields", file=file, field=field,
                             value=path, valid=_what_is_there(None, node, where))
        resolved = pick_member(annotation, node if node is not _MISSING else None)
        if resolved is None:
            raise InputError(f"cannot tell which kind {where} is", file=file, field=field, value=path,
                             valid=f"give {where}.kind in the scenario")
        if isinstance(part, int):
            if typing.get_origin(resolved) is not list:
                raise InputError(f"{where} is not a list", file=file, field=field, value=path,
                                 valid=_what_is_there(resolved, node, where))
            items = node if isinstance(node, list) else []
            if part >= len(items):
                raise InputError(f"{where} has {len(items)} item{'s' if len(items) != 1 else ''}", file=file,
                                 field=field, value=path,
                                 valid=f"{where}[0] to {where}[{len(items) - 1}]" if items else "none")
            annotation, node = typing.get_args(resolved)[0], items[part]
            continue
        if _is_model(resolved):
            info = resolved.model_fields.get(part)
            if info is None:
                raise InputError(f"{where} has no field {part!r}", file=file, field=field, value=path,
                                 valid=_what_is_there(resolved, node, where))
            annotation = info.annotation
        elif typing.get_origin(resolved) is dict:
            annotation = typing.get_args(resolved)[1]
        else:
            raise InputError(f"{where} is a value, not a mapping with fields", file=file, field=field,
                             value=path, valid=_what_is_there(resolved, node, where))
        node = node.get(part, _MISSING) if isinstance(node, dict) else _MISSING
    return parts


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _what_is_there(resolved: Any, node: Any, where: str) -> str:
    if _is_model(resolved):
        return f"fields of {where} are " + ", ".join(resolved.model_fields)
    if node is not _MISSING and node is not None:
        shown = repr(node)
        return f"{where} is {shown if len(shown) <= 40 else shown[:37] + '...'}; vary {where} itself"
    return f"vary {where} itself"


def get_path(data: Any, parts: list[Part], default: Any = None) -> Any:
    """The value at ``parts`` in ``data``, or ``default`` where the data stops."""
    node = data
    for part in parts:
        if isinstance(part, int):
            if not isinstance(node, list) or part >= len(node):
                return default
            node = node[part]
        else:
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
    return node


def set_path(data: dict, parts: list[Part], value: Any) -> dict:
    """A deep copy of ``data`` with ``value`` at ``parts`` (missing mappings on the way are created).

    Call :func:`check_path` first: list items must exist."""
    out = copy.deepcopy(data)
    node: Any = out
    for i, part in enumerate(parts[:-1]):
        following: Optional[Any] = node[part] if isinstance(part, int) else node.get(part)
        if not isinstance(following, (dict, list)):
            following = {}
            node[part] = following
        node = following
    node[parts[-1]] = copy.deepcopy(value)
    return out
