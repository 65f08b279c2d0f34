"""read_yaml: libyaml's parse, kept per process, one copy per caller, re-read when the file changes."""

from __future__ import annotations

import os

import pytest
import yaml

from simlab.common.errors import InputError
from simlab.common.yaml_file import read_yaml


def test_same_content_as_the_pure_python_loader(tmp_path):
    text = "a: [1, 2.5, null, true]\nb: {c: '0x10', d: 1e-3, e: 2026-12-03}\nf: |\n  two\n  lines\n"
    path = tmp_path / "x.yaml"
    path.write_text(text)
    assert read_yaml(path) == yaml.safe_load(text)


def test_each_caller_gets_its_own_copy(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("a: {b: [1, 2]}\n")
    first = read_yaml(path)
    first["a"]["b"].append(3)
    first["new"] = 1
    assert read_yaml(path) == {"a": {"b": [1, 2]}}


def test_an_edited_file_is_read_again(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("a: 1\n")
    assert read_yaml(path) == {"a": 1}
    stat = path.stat()
    path.write_text("a: 2\n")  # same size: the modification time tells them apart
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert read_yaml(path) == {"a": 2}


def test_a_syntax_error_names_the_line_and_the_character(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("a: 1\n\tb: 2\n")
    with pytest.raises(InputError) as err:
        read_yaml(path, what="scenario file")
    assert "line 2, column 1" in str(err.value) and "'\\t'" in str(err.value)
