#!/usr/bin/env python
"""Run the quickstart and write the README's quickstart table and the prose that reads it.

The code is ``simlab.studies.quickstart_readme``; ``python scripts/readme_quickstart.py --help`` lists the options."""

import sys

from simlab.studies.quickstart_readme import main

if __name__ == "__main__":
    sys.exit(main())
