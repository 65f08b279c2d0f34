"""From a scenario's ``hardware:`` (an object, a bare profile name or a path) to a :class:`CostModel`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from simlab.common.errors import InputError
from simlab.common.resources import is_bare_name, resolve_path, shipped_dir
from simlab.common.schema_errors import validate
from simlab.config.hardware import AicHardware, HardwareConfig, OperationsHardware, RooflineHardware, TableHardware
from simlab.hardware.base import CostModel
from simlab.hardware.roofline_build import build_roofline
from simlab.hardware.table import TableCostModel

PROFILE_SUFFIXES = (".yaml", ".yml")


def build_cost_model(
    cfg: HardwareConfig, *, base_dir: Path, file: str | Path | None, field: str = "hardware"
) -> CostModel:
    """The cost model a scenario's ``hardware`` names.

    ``cfg`` is a table or roofline object, a bare profile name (``h100-sxm_qwen3-8b``: a file in hw_profiles/)
    or a path to a profile file (relative to ``base_dir``, the scenario's folder). Bad input raises
    :class:`InputError` naming ``file`` (or the profile file) and the field.
    """
    if isinstance(cfg, TableHardware):
        return TableCostModel(cfg, source=str(file) if file is not None else None)
    if isinstance(cfg, RooflineHardware):
        return build_roofline(cfg, file=str(file) if file is not None else None, field=field)
    if isinstance(cfg, OperationsHardware):
        from simlab.hardware.operations_table import build_operations
        return build_operations(cfg, file=str(file) if file is not None else None)
    if isinstance(cfg, AicHardware):
        from simlab.hardware.aiconfigurator import build_aiconfigurator
        return build_aiconfigurator(cfg, file=str(file) if file is not None else None)
    if isinstance(cfg, str):
        path = find_profile(cfg, base_dir=base_dir, file=file, field=field)
        return load_profile(path)
    raise InputError("not a hardware description", file=file, field=field, value=type(cfg).__name__,
                     valid="a profile name, a path to a profile, or a mapping with kind: table or roofline")


def shipped_profiles() -> dict[str, Path]:
    """Shipped profile names (file stems in hw_profiles/) and their files, sorted by name."""
    folder = shipped_dir("hw_profiles")
    if not folder.is_dir():
        return {}
    files = [p for p in folder.iterdir() if p.suffix in PROFILE_SUFFIXES and p.is_file()]
    return {p.stem: p for p in sorted(files)}


def is_shipped_profile(text: str) -> bool:
    """Whether ``text`` is the name of a shipped profile (as ``simlab profiles list`` prints it; such a name may
    hold a dot, as in ``h100-sxm_llama-3.1-8b``)."""
    return text in shipped_profiles()


def find_profile(text: str, *, base_dir: Path, file: str | Path | None, field: str = "hardware") -> Path:
    """The profile file ``text`` names: a shipped profile for a shipped name or any other bare name (no path
    separator, no extension), else a path from ``base_dir``."""
    shipped = shipped_profiles()
    if text in shipped:
        return shipped[text]
    if is_bare_name(text):
        near = [n for n in shipped if text.lower() in n.lower()]
        choices = ", ".join(near or shipped) or "(none shipped)"
        raise InputError("no hardware profile of that name is shipped in hw_profiles/", file=file, field=field,
                         value=text, valid=f"one of {choices}; or a path to a profile file")
    path = resolve_path(text, base_dir)
    if not path.is_file():
        raise InputError("no such hardware profile file", file=file, field=field, value=text,
                         valid=f"a path to a YAML profile (relative paths start at {base_dir}) or a shipped name "
                               "such as h100-sxm_qwen3-8b")
    return path


def load_profile(path: str | Path) -> TableCostModel:
    """Read a profile file: YAML holding one ``kind: table`` object (see hw_profiles/README.md)."""
    from simlab.common.yaml_file import read_yaml  # here, not at the top: the scenario loader may import this package

    path = Path(path)
    data = read_yaml(path, what="hardware profile")
    check_is_table(data, file=path)
    cfg = validate(TableHardware, data, file=path)
    return TableCostModel(cfg, name=path.stem, source=str(path))


def check_is_table(data: Any, *, file: str | Path) -> None:
    """Raise a clear :class:`InputError` unless ``data`` looks like a ``kind: table`` mapping."""
    if not isinstance(data, dict):
        shown = "empty file" if data is None else type(data).__name__
        raise InputError("a hardware profile must be a mapping", file=file, value=shown,
                         valid="a YAML mapping with kind: table, verify, draft, prefill (hw_profiles/README.md)")
    kind: Optional[Any] = data.get("kind")
    if kind != "table":
        hint = ("a scenario file is not a profile; name a profile, or export one with `simlab profiles export`"
                if "arms" in data or "workload" in data else
                "a roofline belongs inline in the scenario's hardware:, or export it as a table with "
                "`simlab profiles export`" if kind == "roofline" else "kind: table")
        raise InputError("a hardware profile file must hold a cost table", file=file, field="kind",
                         value=kind if kind is not None else ..., valid=hint)


def roofline_source(provenance: dict[str, Any]) -> dict[str, Any]:
    """What a profile exported from a roofline stands for, from its provenance's ``source``: the GPU, the model, the
    serving stack and the weight and KV precisions (vLLM and bf16 for a profile written before stacks existed)."""
    source = provenance.get("source") or {}
    params = source.get("parameters") or {}
    return {"gpu": source.get("gpu"), "model": source.get("model"), "stack": params.get("stack", "vllm"),
            "precision": params.get("precision", "bf16"), "kv_precision": params.get("kv_precision", "bf16")}
