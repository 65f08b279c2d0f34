"""docs/shipped-studies.md's results paragraphs are what scripts/study_prose.py writes from the committed reports."""

from __future__ import annotations

from pathlib import Path


REPO = Path(__file__).resolve().parents[1]


def _script():
    from simlab.studies import prose

    return prose


def test_every_study_paragraph_is_written_from_its_report():
    script = _script()
    doc = (REPO / "docs" / "shipped-studies.md").read_text(encoding="utf-8")
    for name in script.STUDIES:
        assert script.written(doc, name) == script.paragraph(name), \
            f"docs/shipped-studies.md's {name} results are stale: run python scripts/study_prose.py"


def test_the_paragraphs_read_the_numbers_of_the_report():
    script = _script()
    text = " ".join(script.paragraph("capacity").split())
    import json

    doc = json.loads((REPO / "reports" / "capacity" / "whatif.json").read_text(encoding="utf-8"))
    for arm, entry in doc["arms"].items():
        assert f"`{arm}` {entry['load']:g}" in text
