#!/usr/bin/env python
"""Simulate every pair of public engine runs with and without speculation and write
hw_profiles/calibration/gain_error.yaml (the gain's stated error; docs/calibration.md shows its summary).

    python scripts/gain_error.py            # rewrite gain_error.yaml and the docs table
    python scripts/gain_error.py --check    # exit 1 if either is stale
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from simlab.common.doc_tables import replace_between, table_between  # noqa: E402
from simlab.calibration.gain_check import GAIN_FILE, check_gains, gain_document, markdown_table  # noqa: E402

TARGET = REPO / "hw_profiles" / "calibration" / GAIN_FILE
DOCS = REPO / "docs" / "calibration.md"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    document = gain_document(check_gains())
    text = yaml.safe_dump(document, sort_keys=False, width=120)
    stale = not TARGET.is_file() or TARGET.read_text(encoding="utf-8") != text
    stale |= table_between(DOCS.read_text(encoding="utf-8"), "gain table").strip() != markdown_table(document)
    if args.check:
        print("stale" if stale else "current")
        return int(stale)
    TARGET.write_text(text, encoding="utf-8")
    replace_between(DOCS, "gain table", markdown_table(document))
    print(markdown_table(document))
    return 0


if __name__ == "__main__":
    sys.exit(main())
