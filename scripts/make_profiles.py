#!/usr/bin/env python
"""Refit the calibration and regenerate the roofline tables in hw_profiles/ (simlab/hardware/catalog.py lists them).

    python scripts/make_profiles.py            # refit hw_profiles/calibration/fitted.yaml, write hw_profiles/*.yaml
    python scripts/make_profiles.py --check    # exit 1 if the fit or any shipped file is missing or stale
    python scripts/make_profiles.py --keep-fit # the profiles only, from the shipped fit
    python scripts/make_profiles.py --out DIR  # write the profiles somewhere else

The fit comes from the measurements in hw_profiles/calibration/ (scripts/calibrate_hardware.py), the profiles from
the fit.
A file whose content is unchanged apart from its date and simlab version is not rewritten, so regenerating
leaves git clean unless the data, the model or its parameters changed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from simlab.hardware.catalog import comparable, generate_profile, profile_name, shipped_specs
from simlab.hardware.export import write_table

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "hw_profiles", help="folder to write (default hw_profiles/)")
    parser.add_argument("--check", action="store_true", help="only report missing or stale files; exit 1 if any")
    parser.add_argument("--keep-fit", action="store_true",
                        help="regenerate the profiles from the shipped fit without refitting (a refit's last "
                             "digits depend on the machine's SciPy and BLAS)")
    args = parser.parse_args(argv)
    from calibrate_hardware import FITTED, refit

    fit_stale = False if args.keep_fit else refit(check=args.check)[1]
    stale = [str(FITTED.relative_to(REPO))] if fit_stale else []
    if fit_stale and not args.check:
        print(f"wrote {FITTED}")
    for spec in shipped_specs():
        name = profile_name(*spec)
        path = args.out / f"{name}.yaml"
        data = generate_profile(*spec)
        old = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None
        if old is not None and comparable(old) == comparable(yaml.safe_load(yaml.safe_dump(data))):
            continue
        stale.append(name)
        if not args.check:
            write_table(path, data, written_by="simlab scripts/make_profiles.py")
            print(f"wrote {path}")
    if args.check and stale:
        print("stale or missing: " + ", ".join(stale) + " (run scripts/make_profiles.py)", file=sys.stderr)
        return 1
    if not stale:
        print(f"the fit and all {len(shipped_specs())} profiles are up to date in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
