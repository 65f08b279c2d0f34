"""The compiled-code cache folder is keyed by the compiled modules' sources (simlab/common/jit.py): numba checks a
cached function against its own file only, so an edit to a module it calls must move the cache."""

from __future__ import annotations

from pathlib import Path

from simlab.common import jit


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_key_changes_with_any_compiled_module_and_only_with_them(tmp_path, monkeypatch):
    compiled = "from simlab.common.jit import njit\n"
    root = _package(tmp_path / "pkg", {"engine/block.py": compiled + "A = 1\n", "hardware/cost.py": compiled,
                                       "config/plain.py": "B = 1\n"})
    monkeypatch.setattr(jit, "_PACKAGE", root)
    key = jit.sources_key()
    (root / "config/plain.py").write_text("B = 2\n")  # not compiled: the cache stays
    assert jit.sources_key() == key
    (root / "hardware/cost.py").write_text(compiled + "# a callee edited\n")
    edited = jit.sources_key()
    assert edited != key
    (root / "hardware/cost.py").write_text(compiled)
    assert jit.sources_key() == key  # the same sources, the same folder


def test_the_cache_folder_is_under_the_users_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert Path(jit.cache_dir()) == tmp_path / "simlab" / "numba" / jit.sources_key()
