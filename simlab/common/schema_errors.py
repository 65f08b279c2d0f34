"""Turn pydantic validation errors into one line a person can act on."""

from __future__ import annotations

import difflib
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from simlab.common.errors import InputError

_UNION_TYPE_ERRORS = {"string_type", "model_type", "model_attributes_type", "dict_type", "int_type", "float_type"}


def validate(model: type[BaseModel], data: Any, *, file: str | Path, field_prefix: str = "") -> Any:
    """Validate ``data`` as ``model``; on failure raise :class:`InputError` naming file, field and value."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise to_input_error(exc, model, data, file=file, field_prefix=field_prefix) from None


def to_input_error(
    exc: ValidationError, model: type[BaseModel], data: Any, *, file: str | Path, field_prefix: str = ""
) -> InputError:
    problems = [_describe(err, model, data) for err in exc.errors()]
    deep = [p for p in problems if p["type"] not in _UNION_TYPE_ERRORS]
    chosen = deep or problems
    # an unknown field is usually the cause of the rest (a typo leaves the real field missing): name it first
    chosen = sorted(chosen, key=lambda p: p["type"] != "extra_forbidden")
    first = chosen[0]
    same_place = [p for p in problems if p["path"] == first["path"]]
    if len(same_place) > 1 and all(p["type"] in _TYPE_NAMES or p["type"] == "literal_error" for p in same_place):
        # one value tried against each member of a union: say what each member would have taken
        first = {**first, "problem": "not a valid value", "valid": _union_choices(same_place)}
        chosen = [first] + [p for p in chosen if p["path"] != first["path"]]
    field = ".".join(x for x in (field_prefix, first["path"]) if x) or "(top level)"
    extra = len(chosen) - 1
    problem = first["problem"] + (f" (and {extra} more problem{'s' if extra > 1 else ''})" if extra else "")
    return InputError(problem, file=file, field=field, value=first["value"], valid=first["valid"])


_TYPE_NAMES = {
    "string_type": "a name or path (text)",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "dict_type": "a mapping",
    "int_type": "an integer",
    "float_type": "a number",
    "int_parsing": "an integer",
    "float_parsing": "a number",
    "greater_than": "a positive number",
}


def _union_choices(problems: list[dict]) -> str:
    choices: list[str] = []
    for p in problems:
        text = p["valid"] if p["type"] == "literal_error" else _TYPE_NAMES[p["type"]]
        if text and text not in choices:
            choices.append(text)
    return " or ".join(choices)


def _describe(err: dict, model: type[BaseModel], data: Any) -> dict:
    path_parts: list[str] = []
    node = data
    absent = False
    real_loc: list[Any] = []
    entered = True  # the first loc part after stepping into a tagged union member is the tag itself
    for part in err["loc"]:
        if entered and isinstance(node, dict) and part in (node.get("kind"), node.get("dist")):
            entered = False
            continue
        entered = True
        if isinstance(node, dict) and part in node:
            real_loc.append(part)
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            real_loc.append(part)
            node = node[part]
        elif part == err["loc"][-1] and isinstance(node, dict) and isinstance(part, str) and part.isidentifier():
            # a field absent from the file: missing, unknown, or a default that does not fit
            real_loc.append(part)
            node = ...
            absent = err["type"] != "extra_forbidden"
        # anything else is a union branch tag or a validator name: not a place in the user's file
    for part in real_loc:
        if isinstance(part, int):
            path_parts.append(f"[{part}]")
        else:
            path_parts.append(("." if path_parts else "") + str(part))
    path = "".join(path_parts)
    etype = err["type"]
    ctx = err.get("ctx") or {}
    value: Any = ... if absent else err.get("input", ...)
    valid = None
    msg = err["msg"]
    if etype == "missing":
        problem, value = "missing: this field is required", ...
        fields = _fields_at(model, data, real_loc[:-1])
        if fields:
            valid = "fields here are " + ", ".join(fields)
    elif etype == "extra_forbidden":
        problem = "unknown field"
        fields = _fields_at(model, data, real_loc[:-1])
        near = difflib.get_close_matches(str(real_loc[-1]), fields, n=1) if real_loc and fields else []
        if near:
            problem += f" (did you mean {near[0]}?)"
        valid = ("fields here are " + ", ".join(fields)) if fields else None
    elif etype == "union_tag_invalid":
        problem = "not a known kind"
        valid = ctx.get("expected_tags")
        value = ctx.get("tag", value)
        path = path + (f".{ctx.get('discriminator', 'kind').strip(chr(39))}" if path else "kind")
    elif etype == "union_tag_not_found":
        disc = str(ctx.get("discriminator", "kind")).strip("'")
        problem = f"missing: '{disc}' is required"
        tags = _tags_at(model, data, real_loc, disc)
        valid = f"{disc}: one of {', '.join(tags)}" if tags else None
        value = ...
        path = f"{path}.{disc}" if path else disc
    elif etype == "literal_error":
        problem = "not allowed"
        valid = str(ctx.get("expected"))
    elif etype in ("value_error", "assertion_error"):
        problem = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    else:
        problem = msg[0].lower() + msg[1:] if msg else etype
    if isinstance(value, (dict, list)) and etype not in ("union_tag_invalid", "literal_error"):
        value = _short(value)
    return {"path": path, "problem": problem, "value": value, "valid": valid, "type": etype}


def _short(value: Any) -> Any:
    text = repr(value)
    return value if len(text) <= 60 else text[:57] + "..."


def _fields_at(model: type[BaseModel], data: Any, loc: list[Any]) -> list[str]:
    """Field names of the config object found by following ``loc`` through ``data`` from ``model``."""
    target = _model_at(model, data, loc)
    return list(target.model_fields) if target is not None else []


def _tags_at(model: type[BaseModel], data: Any, loc: list[Any], disc: str) -> list[str]:
    """The values the discriminator ``disc`` may take for the union found at ``loc``."""
    parent = _model_at(model, data, loc[:-1]) if loc else None
    if parent is None or not loc or not isinstance(loc[-1], str):
        return []
    info = parent.model_fields.get(loc[-1])
    if info is None:
        return []
    tags: list[str] = []
    for member in _flatten(info.annotation) if info is not None else []:
        field = member.model_fields.get(disc)
        if field is not None:
            tags += [str(t) for t in typing.get_args(field.annotation)]
    return tags


def _model_at(model: Any, data: Any, loc: list[Any]) -> type[BaseModel] | None:
    annotation: Any = model
    node = data
    for part in loc:
        annotation = _pick(annotation, node)
        if annotation is None:
            return None
        if isinstance(part, str):
            if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
                # a dict[str, X]: step into X
                args = typing.get_args(annotation)
                if typing.get_origin(annotation) is dict and len(args) == 2:
                    annotation = args[1]
                    node = node.get(part) if isinstance(node, dict) else None
                    continue
                return None
            info = annotation.model_fields.get(part)
            if info is None:
                return None
            annotation = info.annotation
            node = node.get(part) if isinstance(node, dict) else None
        else:
            args = typing.get_args(annotation)
            annotation = args[0] if args else None
            node = node[part] if isinstance(node, list) and part < len(node) else None
    annotation = _pick(annotation, node)
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def pick_member(annotation: Any, node: Any) -> Any:
    """The type an annotation stands for at ``node``: Optional/Annotated unwrapped, and a union resolved to the
    member ``node`` matches (by its ``kind``/``dist`` tag, or the one non-model member for a plain value);
    None when ``node`` does not decide it."""
    return _pick(annotation, node)


def _pick(annotation: Any, node: Any) -> Any:
    """Resolve Optional/Annotated/Union to the member matching ``node`` (by its kind or dist tag)."""
    for _ in range(10):
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
            continue
        if origin is typing.Union or origin is types.UnionType:
            members = [a for a in typing.get_args(annotation) if a is not type(None)]
            models = [m for m in (_strip(a) for a in members) if isinstance(m, type) and issubclass(m, BaseModel)]
            nested = [a for a in members if typing.get_origin(_strip_annotated(a)) in (typing.Union, types.UnionType)]
            if isinstance(node, dict):
                for member in models + [m for n in nested for m in _flatten(n)]:
                    for tag in ("kind", "dist"):
                        field = member.model_fields.get(tag)
                        if field is not None and node.get(tag) in typing.get_args(field.annotation):
                            return member
                if len(models) == 1 and not nested:
                    return models[0]
            if len(members) == 1:
                annotation = members[0]
                continue
            non_models = [a for a in members if not (isinstance(_strip(a), type) and issubclass(_strip(a), BaseModel))]
            if len(non_models) == 1 and not isinstance(node, dict):
                annotation = non_models[0]
                continue
            return None
        return annotation
    return annotation


def _strip_annotated(a: Any) -> Any:
    while typing.get_origin(a) is typing.Annotated:
        a = typing.get_args(a)[0]
    return a


def _strip(a: Any) -> Any:
    return _strip_annotated(a)


def _flatten(a: Any) -> list[type[BaseModel]]:
    a = _strip_annotated(a)
    out = []
    for m in typing.get_args(a):
        m = _strip_annotated(m)
        if typing.get_origin(m) in (typing.Union, types.UnionType):
            out += _flatten(m)
        elif isinstance(m, type) and issubclass(m, BaseModel):
            out.append(m)
    return out
