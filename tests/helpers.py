"""Shared helpers for the engine and CLI tests."""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

import yaml

from simlab.config.loading import load_scenario
from simlab.runner import build, simulate_all

CONTRACT_DIR = Path(__file__).parent / "contract"


def write_scenario(tmp_path: Path, data: dict, name: str = "scenario.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def simulate(path: Path, jobs: int = 1):
    """Build and simulate a scenario file in-process; returns {arm name: ArmOutcome}."""
    built = build(load_scenario(path))
    return {o.name: o for o in simulate_all(built, jobs=jobs)}


def flat_table(verify_s: float, *, autoregressive_s: float = 0.0, parallel_s: float = 0.0,
               head_s: float = 0.0, prefill_per_token_s: float = 0.0) -> dict:
    """A table profile whose verify cost is the same at every batch size."""
    return {
        "kind": "table",
        "verify": {"batch_tokens": [1, 8192], "step_s": [verify_s, verify_s]},
        "draft": {
            "autoregressive": {"step_s": autoregressive_s},
            "parallel": {"step_s": parallel_s},
            "sequential_head": {"step_s": head_s},
        },
        "prefill": {"per_token_s": prefill_per_token_s},
        "kv_cache_tokens": 10_000_000,
    }


def run_cli(*args: str) -> tuple[int, str, str]:
    """Run ``simlab ARGS`` in-process; returns (exit status, stdout, stderr)."""
    from simlab.cli import main

    out, err = io.StringIO(), io.StringIO()
    argv = sys.argv
    sys.argv = ["simlab", *args]
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main()
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = argv
    return code, out.getvalue(), err.getvalue()


def tree_digest(root: Path) -> dict[str, str]:
    """Every file and folder below ``root`` (hidden ones too) with its content hash and mode: equal digests
    mean nothing was added, removed or changed."""
    import hashlib
    import os

    digest = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                digest[rel] = "link:" + os.readlink(path)
            elif path.is_dir():
                digest[rel] = f"dir:{path.stat().st_mode:o}"
            else:
                digest[rel] = hashlib.sha256(path.read_bytes()).hexdigest() + f":{path.stat().st_mode:o}"
    return digest


def user_project(root: Path, scenario: dict | None = None) -> dict[str, Path]:
    """A folder of a user's work, as a newcomer has it: a scenario (optional), notes, a sub-folder with data,
    a user's PNG, JSON and YAML. Returns the paths by role."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "notes.txt").write_text("my notes\n")
    (root / "sub").mkdir(exist_ok=True)
    (root / "sub" / "data.txt").write_text("1,2,3\n")
    (root / "figure.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64)
    (root / "mine.json").write_text('{"owner": "me"}\n')
    (root / "mine.yaml").write_text("owner: me\n")
    paths = {"folder": root, "notes": root / "notes.txt", "sub": root / "sub", "png": root / "figure.png",
             "json": root / "mine.json", "yaml": root / "mine.yaml"}
    if scenario is not None:
        paths["scenario"] = write_scenario(root, scenario, name="tiny.yaml")
    return paths
