import sys

from simlab.real.profiler.cli import main

sys.exit(main())
