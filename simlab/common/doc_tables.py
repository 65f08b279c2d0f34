"""Tables in docs/ generated from code: each lies between ``<!-- NAME ... -->`` and ``<!-- end NAME -->``
(``scripts/update_docs_tables.py`` rewrites them; tests fail when one is stale)."""

from __future__ import annotations

from pathlib import Path


def _span(text: str, marker: str) -> tuple[int, int]:
    start = text.index("-->\n", text.index(f"<!-- {marker}")) + len("-->\n")
    return start, text.index(f"<!-- end {marker} -->", start)


def table_between(text: str, marker: str) -> str:
    """What ``text`` holds between its ``<!-- MARKER ...-->`` line and ``<!-- end MARKER -->``."""
    start, end = _span(text, marker)
    return text[start:end]


def replace_between(path: str | Path, marker: str, table: str) -> bool:
    """Write ``table`` between the markers of ``path``; True when the file changed."""
    doc = Path(path)
    text = doc.read_text(encoding="utf-8")
    start, end = _span(text, marker)
    new = text[:start] + table + "\n" + text[end:]
    if new != text:
        doc.write_text(new, encoding="utf-8")
    return new != text
