#!/usr/bin/env python
"""Regenerate the tables in docs/ that are generated from code (tests fail when they are stale)."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from simlab.common.doc_tables import replace_between  # noqa: E402
from simlab.hardware.release_table import markdown_table as releases_table  # noqa: E402
from simlab.schedulers.registry import write_docs_table  # noqa: E402


if __name__ == "__main__":
    changed = write_docs_table(str(REPO / "docs" / "schedulers.md"))
    print("docs/schedulers.md " + ("updated" if changed else "up to date"))
    changed = replace_between(REPO / "docs" / "serving-stacks.md", "releases table", releases_table())
    print("docs/serving-stacks.md " + ("updated" if changed else "up to date"))
