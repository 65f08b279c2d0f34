#!/usr/bin/env python
"""Profile the real drafter and verifier on a GPU and compare with the shipped profile (docs/profiling.md).

The grid, the estimate, the check and the comparison are ``simlab.real.profiler.gpu_run``; this script runs them
(``python scripts/gpu_profile.py --help`` lists the options)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from simlab.real.profiler.gpu_run import (BUDGET_S, DEFAULT_OUT, DRY_RUN_OUT, check, comparison, dry_run_args, gpu_args,
                                          gpu_spec, print_estimate)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny model, quick grid")
    parser.add_argument("--estimate", action="store_true", help="only print the H200 time estimate")
    parser.add_argument("--out", type=Path, default=None, help=f"profile to write (default {DEFAULT_OUT.name}; "
                                                              f"dry run: {DRY_RUN_OUT})")
    parser.add_argument("--budget-s", type=float, default=BUDGET_S, help="measuring budget of the GPU run")
    parser.add_argument("--compare", type=Path, nargs="?", const=DEFAULT_OUT, default=None, metavar="PROFILE",
                        help="print the roofline-vs-measured Markdown table of docs/profiling.md (old constants, "
                             "calibrated, measured) and stop")
    args = parser.parse_args(argv)
    if args.compare is not None:
        print(comparison(args.compare if args.compare.exists() else None))
        return 0
    print_estimate(gpu_spec(args.budget_s))
    if args.estimate:
        return 0
    out = args.out or (DRY_RUN_OUT if args.dry_run else DEFAULT_OUT)
    command = dry_run_args(out) if args.dry_run else gpu_args(out, args.budget_s)
    print(f"writing {out} (rewritten after every phase): simlab profile {' '.join(command)}", flush=True)
    from simlab.real.profiler.cli import main as profile_main

    rc = profile_main(command)
    if rc != 0:
        return rc
    check(out, expect_device="cpu" if args.dry_run else "cuda")
    return 0


if __name__ == "__main__":
    sys.exit(main())
