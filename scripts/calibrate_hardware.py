#!/usr/bin/env python
"""Fit hw_profiles/calibration/fitted.yaml and state the error on engine measurements.

The code is ``simlab.calibration.refit``; ``python scripts/calibrate_hardware.py --help`` lists the options."""

import sys

from simlab.calibration.refit import main

if __name__ == "__main__":
    sys.exit(main())
