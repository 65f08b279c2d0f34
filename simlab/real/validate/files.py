"""YAML files inside a validation folder (a fitted acceptance model, fitted profiles), marked as simlab's."""

from __future__ import annotations

from pathlib import Path

HEADER = "# written by simlab validate\n"


def write_yaml(path: Path, document: dict) -> Path:
    """Write ``document`` as YAML (inside a staging folder: the folder as a whole is swapped in atomically)."""
    import json

    import yaml

    from simlab.common.json_text import dumps  # JSON-safe values first (numpy scalars, NaN as null)

    path.parent.mkdir(parents=True, exist_ok=True)
    plain = json.loads(dumps(document))
    path.write_text(HEADER + yaml.safe_dump(plain, sort_keys=False, width=120), encoding="utf-8")
    return path
