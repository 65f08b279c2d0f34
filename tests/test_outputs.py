"""simlab/common/outputs.py: what a results folder or output file may replace, atomic swaps, and write failures as one
line."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

import pytest
from helpers import tree_digest, user_project

from simlab.common import outputs
from simlab.common.errors import InputError, OutputError
from simlab.common.outputs import (
    check_out_dir,
    check_out_file,
    is_simlab_file,
    open_resumable_dir,
    read_manifest,
    staged_dir,
    write_file_atomic,
)


def write_run_folder(path: Path, marker: str = "first") -> Path:
    with staged_dir(path, kind="run") as staging:
        (staging / "summary.json").write_text(json.dumps({"marker": marker}))
    return path


# ------------------------------------------------------------------------------------------------- check_out_dir
def test_new_empty_and_same_kind_folders_are_allowed(tmp_path):
    assert check_out_dir(tmp_path / "new" / "deeper", kind="run") == tmp_path / "new" / "deeper"
    (tmp_path / "empty").mkdir()
    check_out_dir(tmp_path / "empty", kind="run")
    check_out_dir(write_run_folder(tmp_path / "earlier"), kind="run")


@pytest.mark.parametrize("role", ["notes", "folder", "sub", "png"])
def test_user_files_and_folders_are_refused_and_untouched(tmp_path, role):
    paths = user_project(tmp_path / "proj")
    before = tree_digest(tmp_path)
    with pytest.raises(InputError) as err:
        check_out_dir(paths[role], kind="run")
    assert "simlab" in err.value.message and "\n" not in err.value.message
    assert tree_digest(tmp_path) == before


def test_the_current_folder_and_its_ancestors_are_refused(tmp_path, monkeypatch):
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    for target in (".", "..", str(tmp_path / "a"), str(work), "./"):
        with pytest.raises(InputError, match="current folder"):
            check_out_dir(target, kind="run")


def test_a_folder_holding_an_input_is_refused(tmp_path):
    (tmp_path / "proj").mkdir()
    scenario = tmp_path / "proj" / "tiny.yaml"
    scenario.write_text("name: x\n")
    for target in (tmp_path / "proj", tmp_path):
        with pytest.raises(InputError, match="tiny.yaml"):
            check_out_dir(target, kind="run", inputs=[scenario])


def test_another_kind_of_simlab_folder_is_refused(tmp_path):
    write_run_folder(tmp_path / "earlier")
    with pytest.raises(InputError, match="run results, not sweep"):
        check_out_dir(tmp_path / "earlier", kind="sweep")


def test_a_link_is_refused(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(InputError, match="symbolic link"):
        check_out_dir(tmp_path / "link", kind="run")


@pytest.mark.parametrize("target", ["/proc/simlab-xyz", "/proc/simlab-xyz/deeper"])
def test_an_unwritable_place_is_one_line(target):
    with pytest.raises(InputError) as err:
        check_out_dir(target, kind="run")
    assert "cannot be created" in err.value.message and "\n" not in err.value.message


def test_below_a_file_is_refused(tmp_path):
    (tmp_path / "notes").write_text("mine")
    with pytest.raises(InputError, match="not a folder"):
        check_out_dir(tmp_path / "notes" / "out", kind="run")


# ------------------------------------------------------------------------------------------------- staged_dir
def test_staged_dir_replaces_an_earlier_folder_and_leaves_nothing_beside(tmp_path):
    write_run_folder(tmp_path / "out", "first")
    write_run_folder(tmp_path / "out", "second")
    assert json.loads((tmp_path / "out" / "summary.json").read_text()) == {"marker": "second"}
    assert read_manifest(tmp_path / "out")["kind"] == "run"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_failure_while_writing_keeps_the_earlier_folder(tmp_path):
    write_run_folder(tmp_path / "out", "first")
    before = tree_digest(tmp_path)
    with pytest.raises(ValueError):
        with staged_dir(tmp_path / "out", kind="run") as staging:
            (staging / "summary.json").write_text("half")
            raise ValueError("simulation failed")
    assert tree_digest(tmp_path) == before


def test_a_disk_error_is_an_output_error_and_keeps_the_earlier_folder(tmp_path):
    write_run_folder(tmp_path / "out", "first")
    before = tree_digest(tmp_path)
    with pytest.raises(OutputError) as err:
        with staged_dir(tmp_path / "out", kind="run"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "requests.csv")
    assert "No space left on device" in err.value.message and str(tmp_path / "out") in err.value.message
    assert "\n" not in err.value.message
    assert tree_digest(tmp_path) == before


def test_a_failed_swap_puts_the_earlier_folder_back(tmp_path, monkeypatch):
    write_run_folder(tmp_path / "out", "first")
    before = tree_digest(tmp_path)
    real_replace = os.replace
    calls = []

    def failing_second_move(src, dst):
        calls.append((src, dst))
        if len(calls) == 2:  # the move of the new folder into place
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))
        return real_replace(src, dst)

    monkeypatch.setattr(outputs.os, "replace", failing_second_move)
    with pytest.raises(OutputError):
        write_run_folder(tmp_path / "out", "second")
    monkeypatch.undo()
    assert tree_digest(tmp_path) == before


def test_results_folders_get_the_umask_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        write_run_folder(tmp_path / "out")
        write_file_atomic(tmp_path / "file.yaml", "# written by simlab test\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "out" / "manifest.json").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "file.yaml").stat().st_mode) == 0o644


def test_resumable_folder_is_created_once_and_kept(tmp_path):
    folder = open_resumable_dir(tmp_path / "sweep", kind="sweep")
    (folder / "points").mkdir()
    written = read_manifest(folder)["written"]
    open_resumable_dir(tmp_path / "sweep", kind="sweep")
    assert (folder / "points").is_dir() and read_manifest(folder)["written"] == written


# ------------------------------------------------------------------------------------------------- single files
def test_is_simlab_file_recognises_what_simlab_writes_and_nothing_else(tmp_path):
    samples = {
        "profile.yaml": b"# written by simlab profile\nkind: table\n",
        "export.yaml": b"kind: table\nprovenance:\n  generator: simlab profiles export\n",
        "audit.json": b'{"generator": "simlab audit", "schedulers": {}}\n',
        "page.html": b'<html><head><meta name="generator" content="simlab report"></head></html>',
    }
    for name, data in samples.items():
        (tmp_path / name).write_bytes(data)
        assert is_simlab_file(tmp_path / name), name
    paths = user_project(tmp_path / "user")
    for role in ("notes", "png", "json", "yaml", "sub"):
        assert not is_simlab_file(paths[role]), role
    assert not is_simlab_file(tmp_path / "absent.yaml")


def test_a_simlab_png_is_recognised(tmp_path):
    from test_out_safety import TINY

    from simlab.results.figure import render_png
    from simlab.runner import run_scenario

    results = run_scenario(TINY, plot=False)
    (tmp_path / "report.png").write_bytes(render_png(results.summary, results.requests, results.steps))
    assert is_simlab_file(tmp_path / "report.png")


@pytest.mark.parametrize("role", ["notes", "png", "json", "yaml", "sub", "folder"])
def test_check_out_file_refuses_user_files_and_folders(tmp_path, role):
    paths = user_project(tmp_path / "proj")
    before = tree_digest(tmp_path)
    with pytest.raises(InputError) as err:
        check_out_file(paths[role])
    assert "\n" not in err.value.message
    assert tree_digest(tmp_path) == before


def test_check_out_file_refuses_an_input_and_accepts_a_recognised_file(tmp_path):
    source = tmp_path / "in.yaml"
    source.write_text("# written by simlab profiles export\nkind: table\n")
    with pytest.raises(InputError, match="input of this command"):
        check_out_file(source, inputs=[source])
    plain = tmp_path / "table.json"
    plain.write_text('{"a": 1}\n')
    with pytest.raises(InputError):
        check_out_file(plain)
    assert check_out_file(plain, recognise=lambda p: p.read_text() == '{"a": 1}\n') == plain


def test_write_file_atomic_replaces_and_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "sub" / "out.yaml"
    write_file_atomic(target, "first\n")
    write_file_atomic(target, b"second\n")
    assert target.read_text() == "second\n"
    assert [p.name for p in target.parent.iterdir()] == ["out.yaml"]


def test_write_file_atomic_failure_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "out.yaml"
    write_file_atomic(target, "first\n")
    with pytest.raises(TypeError):
        write_file_atomic(target, 12345)  # type: ignore[arg-type]  # fails while writing
    monkeypatch.setattr(
        outputs.os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space left on device"))
    )
    with pytest.raises(OutputError, match="No space left on device"):
        write_file_atomic(target, "second\n")
    monkeypatch.undo()
    assert target.read_text() == "first\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.yaml"]
