#!/usr/bin/env python
"""Fit the kernel curves of hw_profiles/kernels/ on aiconfigurator-core's database (the aic extra).

The code is ``simlab.hardware.kernel_fit``; ``python scripts/fit_kernel_curves.py --help`` lists the options."""

import sys

from simlab.hardware.kernel_fit import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
