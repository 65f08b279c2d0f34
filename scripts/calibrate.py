#!/usr/bin/env python
"""Fit the calibrated roofline to the measurements in hw_profiles/calibration/ and write its fitted.yaml.

    python scripts/calibrate.py            # refit; rewrite fitted.yaml if anything changed
    python scripts/calibrate.py --check    # exit 1 if fitted.yaml is missing or stale
    python scripts/calibrate.py --summary  # also print each GPU's parameters and stated error

``scripts/make_profiles.py`` runs this first, then regenerates the shipped profiles from the fit.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from simlab.hardware.calfit import calibrate, dump_fitted  # noqa: E402

FOLDER = REPO / "hw_profiles" / "calibration"
FITTED = FOLDER / "fitted.yaml"


def refit(folder: Path = FOLDER, fitted: Path = FITTED, *, check: bool = False) -> tuple[dict, bool]:
    """Fit; write ``fitted`` unless ``check`` or unchanged. Returns the fit and whether the file was stale."""
    data = calibrate(folder)
    old = yaml.safe_load(fitted.read_text(encoding="utf-8")) if fitted.is_file() else None
    stale = old != yaml.safe_load(dump_fitted(data))
    if stale and not check:
        from simlab.hardware.export import write_text_atomic

        from simlab.hardware.calibration import forget_fitted

        write_text_atomic(fitted, dump_fitted(data))
        forget_fitted()
    return data, stale


def summary(data: dict) -> str:
    lines = []
    for gpu, entry in data["gpus"].items():
        params = ", ".join(f"{k} {v:g}" for k, v in entry["parameters"].items())
        engines = "; ".join(f"{e}: overhead {v['step_overhead_s'] * 1e3:.3g} ms + {v['request_overhead_s'] * 1e6:.3g} us"
                            "/request" for e, v in entry["engines"].items())
        lines.append(f"{gpu}: {params}\n  {engines}")
        for part in ("fitted", "held_out"):
            for item in entry["error"][part]:
                lines.append(f"  {part:8s} {item['subset']:55s} n={item['points']:3d} median "
                             f"{item['median_abs_rel_error']:.1%} max {item['max_abs_rel_error']:.1%}")
        for item in entry["error"].get("reference_checks", []):
            lines.append(f"  check    {item['id']:55s} n={item['points']:3d} median "
                         f"{item['median_abs_rel_error']:.1%} max {item['max_abs_rel_error']:.1%}")
        for what in entry["error"].get("not_measured_on_this_gpu", []):
            lines.append(f"  unknown  {what} (not measured on this GPU)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report a stale fit; exit 1 if stale")
    parser.add_argument("--summary", action="store_true", help="print the fitted parameters and errors")
    args = parser.parse_args(argv)
    data, stale = refit(check=args.check)
    if args.summary:
        print(summary(data))
    if stale and args.check:
        print(f"stale or missing: {FITTED} (run scripts/calibrate.py)", file=sys.stderr)
        return 1
    print(f"wrote {FITTED}" if stale else f"{FITTED} is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
