"""Where the files shipped with simlab live (traces/, hw_profiles/, scenarios/), and bare-name lookup.

A bare name (no path separator, no extension) names something shipped with the project:
``hardware: h100-sxm_qwen3-8b`` is ``hw_profiles/h100-sxm_qwen3-8b.yaml`` and
``path: azure-conv-2023`` is the trace registered under that name in ``traces/index.yaml``. Every name that
``simlab profiles list`` or ``simlab traces list`` prints is such a name, even one with a dot in it
(``h100-sxm_llama-3.1-8b``): the lookups first ask whether the text is a shipped name, and only then read a
dot as the start of a file extension.
``SIMLAB_HOME`` may point at another folder holding the same sub-folders.
"""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parents[1]  # simlab/, this file being simlab/common/resources.py


def shipped_dir(kind: str) -> Path:
    """The folder of shipped files of ``kind`` ("traces", "hw_profiles" or "scenarios")."""
    candidates = []
    if os.environ.get("SIMLAB_HOME"):
        candidates.append(Path(os.environ["SIMLAB_HOME"]) / kind)
    candidates += [_PACKAGE_DIR / "_shipped" / kind, _PACKAGE_DIR.parent / kind]
    for folder in candidates:
        if folder.is_dir():
            return folder
    return candidates[-1]


def is_bare_name(text: str) -> bool:
    """True for names like ``azure-conv-2023``: no path separator and no file extension."""
    return "/" not in text and "\\" not in text and Path(text).suffix == "" and text not in ("", ".", "..")


def resolve_path(text: str, base_dir: Path) -> Path:
    """Resolve a user-given path against ``base_dir`` (the scenario file's folder)."""
    path = Path(text).expanduser()
    return path if path.is_absolute() else (base_dir / path)
