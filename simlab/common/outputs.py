"""Where simlab writes, and the one rule it follows: never destroy what simlab did not write.

Every command that writes goes through this module:

- a **results folder** (``simlab run``, ``sweep``, ``whatif``, ``validate``, ...) is staged beside its target and
  swapped in at once. It carries ``manifest.json`` (``{"generator": "simlab", "kind": ...}``); ``--out`` may
  replace only a folder with such a manifest of the same kind, or an empty folder. A file, a folder holding a
  user's files, the current folder or one above it, and a folder holding one of the run's inputs are refused
  with an :class:`~simlab.common.errors.InputError` before anything is computed or written.
- a **single output file** (a profile, an SPS table, a report page, ...) is written through a temporary file and
  ``os.replace``. It may replace only a file that simlab wrote (see :func:`is_simlab_file`).

Folders and files get the permissions the umask gives (``mkdtemp`` and ``mkstemp`` alone would give 0700/0600).
A write that fails for a reason outside the input (a full disk, say) raises :class:`~simlab.common.errors.OutputError`,
one line that the command line prints before exiting with status 1; whatever was at the path stays as it was.
The rule for users: docs/outputs.md.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional

from simlab.common.errors import InputError, OutputError

MANIFEST = "manifest.json"
GENERATOR = "simlab"
_SNIFF_BYTES = 1 << 20


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _describe_existing(path: Path) -> str:
    if path.is_symlink():
        return "a symbolic link"
    if path.is_file():
        return "a file simlab did not write"
    return "a folder that holds files simlab did not write"


def read_manifest(folder: Path) -> Optional[dict]:
    """The folder's simlab manifest, or None when it has none (or an unreadable one)."""
    try:
        data = json.loads((Path(folder) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(data, dict) and data.get("generator") == GENERATOR:
        return data
    return None


def _is_relative_to(path: Path, other: Path) -> bool:
    try:
        path.relative_to(other)
    except ValueError:
        return False
    return True


def check_out_dir(path: str | Path, *, kind: str, inputs: Iterable[str | Path] = (), field: str = "--out",
                  resume: bool = False) -> Path:
    """Check, before any work, that ``path`` may become a results folder of ``kind``; returns it resolved.

    Allowed: a path that does not exist (its parent must be a folder or creatable), an empty folder, or a
    folder simlab wrote as the same ``kind``. ``resume`` keeps such a folder (a sweep adds to it) instead of
    replacing it. Everything else raises :class:`InputError` and touches nothing."""
    raw = Path(path)
    target = raw.expanduser().absolute()
    resolved = Path(os.path.realpath(target))
    cwd = Path(os.path.realpath(Path.cwd()))
    if raw.name in ("", ".", "..") or _is_relative_to(cwd, resolved):
        raise InputError("is the current folder or one above it; simlab writes a new folder and never replaces "
                         "one that holds your work", field=field, value=str(raw),
                         valid="a path to a new folder, e.g. results/NAME")
    for item in inputs:
        source = Path(os.path.realpath(Path(item).expanduser().absolute()))
        if _is_relative_to(source, resolved):
            raise InputError(f"holds an input of this command ({source.name}); replacing it would delete it",
                             field=field, value=str(raw), valid="a path to a new folder outside the inputs")
    if target.is_symlink() or target.exists():
        if not target.is_dir() or target.is_symlink():
            raise InputError(f"is {_describe_existing(target)}; simlab writes a results folder there only when "
                             "nothing is in the way", field=field, value=str(raw),
                             valid="a path to a new folder, an empty folder, or an earlier simlab results folder")
        manifest = read_manifest(target)
        if manifest is None:
            if any(target.iterdir()):
                raise InputError(f"is {_describe_existing(target)}; simlab replaces only folders it wrote",
                                 field=field, value=str(raw),
                                 valid="a path to a new folder, an empty folder, or an earlier simlab results folder")
        elif manifest.get("kind") != kind:
            raise InputError(f"holds simlab {manifest.get('kind')} results, not {kind} results; simlab will not "
                             "replace them with another kind", field=field, value=str(raw),
                             valid=f"a path to a new folder, an empty folder, or an earlier simlab {kind} folder")
    _check_writable_parent(target, raw, field)
    return target


def _check_writable_parent(target: Path, raw: Path, field: str) -> None:
    parent = target.parent
    while not parent.exists():
        if parent.parent == parent:
            break
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(f"cannot be created: {parent} is not a folder", field=field, value=str(raw),
                         valid="a path whose parent is a folder")
    try:  # permissions alone do not tell (root, read-only mounts, /proc): try, and leave nothing behind
        probe = tempfile.mkdtemp(prefix=".simlab-probe-", dir=parent)
        os.rmdir(probe)
    except OSError as exc:
        raise InputError(f"cannot be created: {parent} cannot be written ({exc.strerror or exc})", field=field,
                         value=str(raw), valid="a path in a folder you may write to") from None


def command_line() -> str:
    """The command that is running, as a person would retype it (``simlab`` and its quoted arguments), for the
    manifests of what it writes."""
    import shlex
    import sys

    return " ".join(["simlab", *map(shlex.quote, sys.argv[1:])])


def manifest(kind: str, *, command: Optional[str] = None, extra: Optional[dict] = None) -> dict:
    """A manifest document for a results folder of ``kind``."""
    from simlab.common.version import __version__

    doc = {"generator": GENERATOR, "kind": kind, "simlab_version": __version__,
           "written": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    if command:
        doc["command"] = command
    if extra:
        doc.update(extra)
    return doc


@contextmanager
def staged_dir(out_dir: str | Path, *, kind: str, command: Optional[str] = None,
               manifest_extra: Optional[dict] = None) -> Iterator[Path]:
    """Yield a staging folder beside ``out_dir``; on success it gains ``manifest.json`` and replaces
    ``out_dir`` in one move (the old folder, if any, is removed only after the new one is in place). On any
    error the staging folder is removed and ``out_dir`` is left as it was.

    Call :func:`check_out_dir` first: this does not check what it replaces. An ``OSError`` while writing (a full
    disk, say) becomes an :class:`~simlab.common.errors.OutputError` (one line; the command line exits 1)."""
    out_dir = Path(out_dir)
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    except OSError as exc:
        raise OutputError.from_os_error(out_dir, exc) from exc
    try:
        os.chmod(staging, 0o777 & ~_umask())
        yield staging
        (staging / MANIFEST).write_text(json.dumps(manifest(kind, command=command, extra=manifest_extra),
                                                   indent=2) + "\n", encoding="utf-8")
        _swap_in(staging, out_dir)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise OutputError.from_os_error(out_dir, exc) from exc
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _swap_in(staging: Path, out_dir: Path) -> None:
    """Put ``staging`` at ``out_dir``; an earlier folder there is deleted only once the new one is in place (if
    the second move fails, the earlier folder is moved back)."""
    if not out_dir.exists():
        os.replace(staging, out_dir)
        return
    retired = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
    previous = retired / "previous"
    try:
        os.replace(out_dir, previous)
        try:
            os.replace(staging, out_dir)
        except BaseException:
            os.replace(previous, out_dir)
            raise
    finally:
        shutil.rmtree(retired, ignore_errors=True)


def open_resumable_dir(out_dir: str | Path, *, kind: str, command: Optional[str] = None,
                       manifest_extra: Optional[dict] = None) -> Path:
    """Create ``out_dir`` with its manifest, or keep it when simlab wrote it as ``kind`` (a resumed sweep).
    Call :func:`check_out_dir` with ``resume=True`` first."""
    out_dir = Path(out_dir)
    if read_manifest(out_dir) is None:
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            os.chmod(out_dir, 0o777 & ~_umask())
        except OSError as exc:
            raise OutputError.from_os_error(out_dir, exc) from exc
        write_file_atomic(out_dir / MANIFEST, json.dumps(manifest(kind, command=command, extra=manifest_extra),
                                                         indent=2) + "\n")
    return out_dir


# ------------------------------------------------------------------------------------------------ single files
def is_simlab_file(path: str | Path) -> bool:
    """Whether simlab wrote the file at ``path``: a YAML/CSV/text file whose first line is ``# written by
    simlab`` or whose text holds ``generator: simlab``, a JSON document whose ``generator`` starts with
    ``simlab``, an HTML page with ``<meta name="generator" content="simlab...``, or a PNG whose ``Software``
    text chunk starts with ``simlab``."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(_SNIFF_BYTES)
    except OSError:
        return False
    if head.startswith(b"\x89PNG"):
        return b"Software\x00simlab" in head
    if head.startswith(b"# written by simlab") or b'<meta name="generator" content="simlab' in head:
        return True
    if head.lstrip().startswith(b"{"):
        try:
            doc = json.loads(head.decode("utf-8"))
        except ValueError:
            return False
        return isinstance(doc, dict) and str(doc.get("generator", "")).startswith("simlab")
    return b"generator: simlab" in head


def check_out_file(path: str | Path, *, field: str = "--out", inputs: Iterable[str | Path] = (),
                   recognise: Optional[Callable[[Path], bool]] = None) -> Path:
    """Check, before any work, that ``path`` may be written: absent, or a file simlab wrote (not one of the
    command's inputs). Returns it as given.

    ``recognise`` also accepts files a format leaves no room to mark (SGLang's SPS JSON): it returns True for a
    file this command would have written byte for byte."""
    raw = Path(path)
    target = raw.expanduser().absolute()
    for item in inputs:
        if os.path.realpath(Path(item).expanduser().absolute()) == os.path.realpath(target):
            raise InputError("is an input of this command; writing there would replace it", field=field,
                             value=str(raw), valid="another file name")
    if target.is_dir():
        raise InputError("is a folder", field=field, value=str(raw), valid="a file path")
    if target.is_symlink() or (target.exists() and not (is_simlab_file(target)
                                                         or (recognise is not None and recognise(target)))):
        raise InputError(f"is {_describe_existing(target)}; simlab replaces only files it wrote", field=field,
                         value=str(raw), valid="a path to a new file, or one simlab wrote")
    _check_writable_parent(target, raw, field)
    return raw


def write_file_atomic(path: str | Path, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder and ``os.replace``: a reader sees
    the old file or the whole new one. Creates missing parent folders. An ``OSError`` (a full disk, say) becomes
    an :class:`~simlab.common.errors.OutputError` and leaves the file as it was.

    Call :func:`check_out_file` first: this does not check what it replaces."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise OutputError.from_os_error(path, exc) from exc
    try:
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise OutputError.from_os_error(path, exc) from exc
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
