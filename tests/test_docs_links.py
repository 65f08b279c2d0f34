"""No dangling references: every relative link in the README and the docs points at a file of the project, and
every #anchor at a heading of the page it names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted({*REPO.glob("*.md"), *(REPO / "docs").glob("*.md"), *REPO.glob("*/README.md")}
               - set(REPO.glob(".*/**/*.md")))
LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)|!\[[^\]\n]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for line in FENCE.sub("", page.read_text(encoding="utf-8")).splitlines():
        if line.startswith("#"):
            base = slug(line.lstrip("#"))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return [a or b for a, b in LINK.findall(text)]


def test_pages_are_found():
    names = {str(p.relative_to(REPO)) for p in PAGES}
    assert {"README.md", "docs/metrics.md", "docs/domain.md", "docs/outputs.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page):
    broken = []
    for target in links(page):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path_text, _, anchor = target.partition("#")
        path = (page.parent / path_text).resolve() if path_text else page
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{page.relative_to(REPO)}: " + "; ".join(broken)


def test_no_page_cites_a_file_outside_the_project():
    for page in PAGES:
        assert "DOMAIN.md" not in page.read_text(encoding="utf-8"), page  # it lives in docs/domain.md


def test_slug_matches_github():
    assert (
        slug("3. Verify-length schedulers (the heart of the lab)") == "3-verify-length-schedulers-the-heart-of-the-lab"
    )
    assert slug("`simlab run` and the `--out` rule") == "simlab-run-and-the---out-rule"
