"""numba, set up the same way by every compiled module: its cache in the user's cache folder.

Import ``njit`` from here (not from numba) so that ``NUMBA_CACHE_DIR`` is set before numba reads it: by default
``$XDG_CACHE_HOME/simlab/numba/<key>`` or ``~/.cache/simlab/numba/<key>``; a ``NUMBA_CACHE_DIR`` already set wins.
Compiled modules are imported only when they are first needed, so the command line's start-up never loads numba.

numba checks a cached function against its own source file only, not against the functions it calls in other
modules: after an edit to ``cost_kernel.py`` alone, ``block_kernel.run_block`` would load machine code compiled
from the old one. The key is therefore a hash of every compiled module's source (the modules that import this
one): any change to any of them compiles everything afresh in a new folder.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parents[1]
_MARKER = b"simlab.common.jit import njit"


def sources_key() -> str:
    """A hash of the sources of simlab's compiled modules (those that import ``njit`` from here)."""
    digest = hashlib.sha1()
    for path in sorted(_PACKAGE.rglob("*.py")):
        text = path.read_bytes()
        if _MARKER in text:
            digest.update(path.relative_to(_PACKAGE).as_posix().encode() + b"\0" + text + b"\0")
    return digest.hexdigest()[:16]


def cache_dir() -> str:
    """Where compiled code is cached."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(base) / "simlab" / "numba" / sources_key())


os.environ.setdefault("NUMBA_CACHE_DIR", cache_dir())

from numba import njit  # noqa: E402

__all__ = ["cache_dir", "njit", "sources_key"]
