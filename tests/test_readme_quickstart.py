"""The README's quickstart table is what the quickstart prints now (scripts/readme_quickstart.py writes it)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("readme_quickstart", REPO / "scripts" / "readme_quickstart.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_quickstart_table_is_current():
    script = _script()
    fresh = script.table_text(script.quickstart_arms())
    written = script.readme_table((REPO / "README.md").read_text(encoding="utf-8"))
    assert written == fresh, "README.md's quickstart table is stale: run python scripts/readme_quickstart.py"


def test_the_timing_sentence_states_runs_machine_and_load():
    script = _script()
    text = script.timing_sentence([21.4, 25.0, 33.6], [0.2, 0.4, 0.3])
    assert "took 21-34 s of wall time over 3 runs on a " in text and "-core " in text
    assert "load average 0.2 before the first run: a quiet machine" in text
    # the load after the first run includes the script's own runs: it does not make the machine busy
    assert "a quiet machine" in script.timing_sentence([30.0, 31.0], [0.3, 1.9])
    busy = script.timing_sentence([60.0], [100.0])
    assert "other jobs were running" in busy
