#!/usr/bin/env python
"""Write each shipped study's results paragraph in docs/shipped-studies.md from its committed report.

The code is ``simlab.studies.prose``; ``python scripts/study_prose.py --help`` lists the options."""

import sys

from simlab.studies.prose import main

if __name__ == "__main__":
    sys.exit(main())
