"""The default training corpus: the Python standard library's own ``.py`` sources, split by file.

Files are ordered by path; a file belongs to the validation split when a hash of its relative path falls in
the held-out fraction, so the split never changes with the file count or the order of reading. Documents are
joined with EOS between them into one token stream per split.
"""

from __future__ import annotations

import hashlib
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simlab.real.tokenizer import ByteTokenizer

EXCLUDED_DIRS = frozenset({"site-packages", "test", "tests", "idlelib", "lib2to3", "__pycache__"})


def stdlib_root() -> Path:
    """The standard library folder of the running interpreter."""
    return Path(sysconfig.get_paths()["stdlib"])


def list_sources(root: Path | None = None) -> list[Path]:
    """``.py`` files under ``root`` (default: the stdlib), excluding tests and third-party packages, sorted."""
    root = root or stdlib_root()
    files = [p for p in root.rglob("*.py") if not EXCLUDED_DIRS & set(p.relative_to(root).parts)]
    return sorted(files)


def is_validation(relative_path: str, fraction: float) -> bool:
    """Deterministic, content-independent split decision for one file."""
    digest = hashlib.sha256(relative_path.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "little") / 2**64 < fraction


@dataclass(frozen=True)
class Corpus:
    """Token streams (uint16) of the training and validation splits, and the files in each."""

    train: np.ndarray
    validation: np.ndarray
    train_files: tuple[str, ...]
    validation_files: tuple[str, ...]


def load_corpus(
    root: Path | None = None, *, validation_fraction: float = 0.05, max_bytes: int | None = None,
    tokenizer: ByteTokenizer = ByteTokenizer(),
) -> Corpus:
    """Read and tokenise the sources under ``root``; ``max_bytes`` caps the training split (files in order)."""
    root = root or stdlib_root()
    train: list[np.ndarray] = []
    validation: list[np.ndarray] = []
    train_files: list[str] = []
    validation_files: list[str] = []
    train_bytes = 0
    eos = np.array([tokenizer.eos_id], dtype=np.uint16)
    for path in list_sources(root):
        relative = path.relative_to(root).as_posix()
        data = path.read_bytes()
        if not data:
            continue
        tokens = np.frombuffer(data, dtype=np.uint8).astype(np.uint16)
        if is_validation(relative, validation_fraction):
            validation += [tokens, eos]
            validation_files.append(relative)
        elif max_bytes is None or train_bytes < max_bytes:
            train += [tokens, eos]
            train_files.append(relative)
            train_bytes += len(tokens)
    if not train or not validation:
        raise ValueError(f"no usable .py sources under {root} for both splits")
    return Corpus(
        train=np.concatenate(train), validation=np.concatenate(validation),
        train_files=tuple(train_files), validation_files=tuple(validation_files),
    )


def sample_windows(tokens: np.ndarray, num: int, length: int, rng: np.random.Generator) -> np.ndarray:
    """``num`` random windows of ``length`` tokens, int64 [num, length]."""
    starts = rng.integers(0, len(tokens) - length, size=num)
    return np.stack([tokens[s: s + length] for s in starts]).astype(np.int64)


__all__ = ["Corpus", "list_sources", "load_corpus", "sample_windows", "stdlib_root"]
