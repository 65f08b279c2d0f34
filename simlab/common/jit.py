"""numba, set up the same way by every compiled module: its cache in the user's cache folder.

Import ``njit`` from here (not from numba) so that ``NUMBA_CACHE_DIR`` is set before numba reads it: by default
``$XDG_CACHE_HOME/simlab/numba`` or ``~/.cache/simlab/numba``; a ``NUMBA_CACHE_DIR`` already set wins. Compiled
modules are imported only when they are first needed, so the command line's start-up never loads numba.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> str:
    """Where compiled code is cached."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(base) / "simlab" / "numba")


os.environ.setdefault("NUMBA_CACHE_DIR", cache_dir())

from numba import njit  # noqa: E402

__all__ = ["cache_dir", "njit"]
