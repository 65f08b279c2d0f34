"""A scenario's ``acceptance:`` given as a name or a path, as ``hardware:`` may be.

- a bare name (no path separator, no extension) is a shipped preset: ``acceptance: qwen3-8b`` is
  ``{kind: preset, name: qwen3-8b}``;
- a path (relative to the scenario file) names a YAML file holding one acceptance mapping with a ``kind``, such
  as ``simlab acceptance fit`` writes, or a preset file (a mapping with ``name`` and ``methods`` and no ``kind``).
  Paths inside that file resolve against its own folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Union

from simlab.acceptance.presets import shipped_presets
from simlab.common.errors import InputError
from simlab.common.resources import is_bare_name, resolve_path
from simlab.config.acceptance import AcceptanceConfig, PresetAcceptance
from simlab.config.base import StrictModel

FIELD = "acceptance"


class _AcceptanceFile(StrictModel):
    acceptance: AcceptanceConfig


def resolve_acceptance(text: str, *, file: Union[str, Path, None]) -> tuple[AcceptanceConfig, Optional[Path]]:
    """The acceptance mapping ``text`` names, and the file it came from (None for a shipped preset)."""
    from simlab.common.yaml_file import read_yaml  # the scenario loader imports this package

    if is_bare_name(text):
        if text not in shipped_presets():
            raise InputError("no acceptance preset of that name is shipped", file=file, field=FIELD, value=text,
                             valid=f"one of {', '.join(shipped_presets())}, or a path to an acceptance file "
                                   "(written by `simlab acceptance fit`)")
        return PresetAcceptance(kind="preset", name=text), None
    base_dir = Path(file).resolve().parent if file is not None else Path.cwd()
    path = resolve_path(text, base_dir).resolve()
    if not path.is_file():
        raise InputError(
            "no such acceptance file",
            file=file,
            field=FIELD,
            value=text,
            valid=f"a path to a YAML acceptance file (relative paths start at {base_dir}), or a "
            f"shipped preset name such as {shipped_presets()[0] if shipped_presets() else 'qwen3-8b'}",
        )
    data = read_yaml(path, what="acceptance file")
    if not isinstance(data, dict):
        raise InputError("an acceptance file must hold a mapping", file=path,
                         value="empty file" if data is None else type(data).__name__,
                         valid="a mapping with kind: positional (as `simlab acceptance fit` writes), iid or preset")
    if "kind" not in data:
        if "methods" in data and "name" in data:  # a preset file
            return PresetAcceptance(kind="preset", name=str(path)), path
        hint = ("a scenario file is not an acceptance file; point acceptance: at the file `simlab acceptance fit` "
                "wrote" if "arms" in data or "workload" in data else "kind: positional, iid or preset")
        raise InputError("an acceptance file needs a kind", file=path, field="kind", valid=hint)
    if data.get("kind") in ("table", "roofline"):
        raise InputError("this is a hardware description, not acceptance", file=path, field="kind",
                         value=data.get("kind"), valid="kind: positional, iid or preset")
    from simlab.common.schema_errors import validate

    try:
        parsed = validate(_AcceptanceFile, {"acceptance": data}, file=path)
    except InputError as err:
        field = err.field or ""
        field = field[len(FIELD) + 1:] if field.startswith(FIELD + ".") else field
        raise InputError(err.problem, file=path, field=field or None, value=err.value, valid=err.valid) from None
    return parsed.acceptance, path
