"""The README's quickstart table is what the quickstart prints now (scripts/readme_quickstart.py writes it)."""

from __future__ import annotations

from pathlib import Path


REPO = Path(__file__).resolve().parents[1]


def _script():
    from simlab.studies import quickstart_readme

    return quickstart_readme


def test_readme_quickstart_table_and_its_prose_are_current():
    script = _script()
    arms = script.quickstart_arms()
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert script.readme_table(readme) == script.table_text(arms), \
        "README.md's quickstart table is stale: run python scripts/readme_quickstart.py"
    # every number the prose gives comes from the same run as the table
    assert script.readme_prose(readme) == script.prose_text(arms, script.staircase_hardware_aware()), \
        "README.md's quickstart prose is stale: run python scripts/readme_quickstart.py"


def test_the_prose_reads_its_numbers_from_the_arms():
    script = _script()
    arm = {"median_user_tok_s": 50.0, "median_tpot_ms": 30.0, "request_goodput": 1.5,
           "mean_verify_tokens_per_request_step": 4.0, "warnings": []}
    arms = {name: dict(arm) for name in ("no-spec", "dspark-fixed", "dspark-hw", "dspark-oracle",
                                         *script.ADAPTIVE_ARMS)}
    arms["dspark-goodput"]["median_user_tok_s"] = 90.0
    arms["dspark-oracle"]["median_user_tok_s"] = 100.0
    arms["dspark-hw"]["mean_verify_tokens_per_request_step"] = 4.4
    text = " ".join(script.prose_text(arms, {"mean_verify_tokens_per_request_step": 0.04, "median_user_tok_s": 20.0})
                    .split())
    assert "median TPOT of 30.0 ms is above the 25 ms SLO" in text
    assert "give 50-90 tokens/s" in text and "dspark-goodput is highest" in text and "10% below the oracle" in text
    assert "it verifies 4.40 drafts per request and step and the median user gets 50 tokens/s" in text
    assert "it then verifies 0.04 drafts and gives 20 tokens/s" in text


def test_the_timing_sentence_states_runs_machine_and_load():
    script = _script()
    text = script.timing_sentence([21.4, 25.0, 33.6], [0.2, 0.4, 0.3])
    assert "took 21-34 s of wall time over 3 runs on a " in text and "-core " in text
    assert "load average 0.2 before the first run: a quiet machine" in text
    # the load after the first run includes the script's own runs: it does not make the machine busy
    assert "a quiet machine" in script.timing_sentence([30.0, 31.0], [0.3, 1.9])
    busy = script.timing_sentence([60.0], [100.0])
    assert "other jobs were running" in busy
