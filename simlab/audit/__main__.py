import sys

from simlab.audit.cli import main

sys.exit(main())
