"""The write rule for the torch commands: ``simlab profile``, ``simlab real train`` and ``simlab real eval --out``
refuse a user's file, a folder of the user's files and ``.`` with one line and every byte in place, and replace
their own earlier output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from helpers import run_cli, tree_digest, user_project  # noqa: E402

from simlab.common.outputs import read_manifest, staged_dir  # noqa: E402
from simlab.real.pair import default_pair_dir  # noqa: E402

HAS_PAIR = (default_pair_dir() / "target" / "config.json").exists()
PROFILE = ["profile", "--device", "cpu", "--model", "tiny", "--quick", "--threads", "1", "--quiet", "--out"]
TRAIN = ["real", "train", "--preset", "tiny", "--target-steps", "1", "--drafter-steps", "1", "--minutes", "1",
         "--threads", "1", "--out"]
EVAL = ["real", "eval", "--num-prompts", "2", "--max-new-tokens", "8", "--max-num-seqs", "2", "--threads", "1",
        "--out"]


@pytest.fixture
def project(tmp_path, monkeypatch):
    paths = user_project(tmp_path / "proj")
    monkeypatch.chdir(paths["folder"])
    return paths


@pytest.mark.parametrize("target", ["notes.txt", "mine.yaml", "sub", ".", "../proj"])
@pytest.mark.parametrize("command", ["profile", "train", "eval"])
def test_refused_with_one_line_and_every_byte_in_place(project, command, target):
    args = {"profile": PROFILE, "train": TRAIN, "eval": EVAL}[command]
    before = tree_digest(project["folder"].parent)
    code, out, err = run_cli(*args, target)
    assert code == 2, (out, err)
    assert err.startswith("error: ") and err.count("\n") == 1 and "--out" in err and "Traceback" not in err, err
    assert tree_digest(project["folder"].parent) == before


def test_profile_replaces_a_profile_simlab_wrote(project):
    code, _, err = run_cli("profiles", "export", "h100-sxm_qwen3-8b", "--out", "measured.yaml")
    assert code == 0, err
    code, _, err = run_cli(*PROFILE, "measured.yaml")
    assert code == 0, err
    text = Path("measured.yaml").read_text()
    assert text.startswith("# written by simlab profile\n") and "measured: true" in text
    assert sorted(p.name for p in project["folder"].iterdir() if p.name.startswith(".")) == []


def test_train_replaces_a_pair_folder_simlab_wrote(project):
    with staged_dir(project["folder"] / "pair", kind="pair") as staging:
        (staging / "earlier.txt").write_text("an earlier pair")
    code, out, err = run_cli(*TRAIN, "pair")
    assert code == 0, (out, err)
    pair = project["folder"] / "pair"
    assert not (pair / "earlier.txt").exists()
    assert read_manifest(pair)["kind"] == "pair"
    assert (pair / "target" / "config.json").is_file() and (pair / "drafter" / "model.safetensors").is_file()
    assert json.loads((pair / "metrics.json").read_text())["preset"] == "tiny"
    assert sorted(p.name for p in project["folder"].iterdir() if p.name.startswith(".")) == []


@pytest.mark.skipif(not HAS_PAIR, reason="no shipped pair")
def test_eval_replaces_its_own_records(project):
    for _ in range(2):
        code, out, err = run_cli(*EVAL, "records")
        assert code == 0, (out, err)
    records = project["folder"] / "records"
    assert sorted(p.name for p in records.iterdir()) == ["manifest.json", "report.png", "requests.csv",
                                                          "rounds.csv.gz", "steps.csv.gz", "summary.json"]


def test_the_shipped_pair_is_a_pair_folder_simlab_wrote():
    assert read_manifest(default_pair_dir())["kind"] == "pair"


def test_measure_refuses_a_folder_simlab_did_not_write(project):
    (project["folder"] / "metrics.json").write_text("{}")
    before = tree_digest(project["folder"])
    code, _, err = run_cli("real", "measure", "--pair", ".")
    assert code == 2 and "manifest" in err
    assert tree_digest(project["folder"]) == before
