#!/usr/bin/env python
"""Regenerate the shipped studies' reports in reports/<study>/ (the list: simlab/studies/shipped.py).

    python scripts/make_reports.py                  # every study (minutes each on a 2-core machine)
    python scripts/make_reports.py crossover gpus   # some of them
    python scripts/make_reports.py --check          # exit 1 if a report is stale (scenario changed, or one
                                                    # point simulated again gives other numbers)
    python scripts/make_reports.py --workers 8 --executor dask

Rerun it whenever a change alters results (profiles, presets, schedulers, the engine) and commit reports/.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from simlab.studies.progress import default_progress
from simlab.studies.shipped import STUDIES, check_report, make_report, study

REPO = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = ", ".join(s.name for s in STUDIES)
    parser.add_argument("studies", nargs="*", help=f"studies to make (default: all of {names})")
    parser.add_argument("--check", action="store_true", help="only check that the reports are current")
    parser.add_argument("--workers", type=int, default=None, help="parallel workers (default: CPUs)")
    parser.add_argument("--executor", default="local", choices=["local", "dask"])
    args = parser.parse_args(argv)
    chosen = [study(name) for name in args.studies] if args.studies else list(STUDIES)
    if args.check:
        stale = {item.name: check_report(item, REPO) for item in chosen}
        for name, problems in stale.items():
            for problem in problems:
                print(f"{name}: {problem}", file=sys.stderr)
        if any(stale.values()):
            print("stale: run python scripts/make_reports.py " + " ".join(n for n, p in stale.items() if p),
                  file=sys.stderr)
            return 1
        print(f"all {len(chosen)} reports are current")
        return 0
    for item in chosen:
        print(f"{item.name}: {item.command}", flush=True)
        target = make_report(item, REPO, workers=args.workers, executor=args.executor, progress=default_progress())
        print(f"wrote {target.relative_to(REPO)}/", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
