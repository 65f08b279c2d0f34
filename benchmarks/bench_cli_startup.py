"""Start-up time of the command line. Not part of the test suite.

    python benchmarks/bench_cli_startup.py [--runs N]

import    ``python -X importtime -c "import simlab.cli"``: the cumulative microseconds of ``simlab.cli``
help      wall seconds of ``simlab --help`` (a fresh interpreter each run; the mounted sub-commands included)
modules   the heavy modules ``simlab --help`` imports (none is the goal)

Each is run N times (default 15) and the median printed with the min and max, because a shared machine's
other jobs make single runs noisy.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

HEAVY = ("pandas", "numpy", "scipy", "matplotlib", "torch", "simpy", "pydantic", "yaml")


def import_us() -> int:
    """Cumulative import time of simlab.cli in microseconds, as -X importtime reports it."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", "import simlab.cli"], capture_output=True,
                          text=True, check=True)
    line = [ln for ln in done.stderr.splitlines() if ln.rstrip().endswith("| simlab.cli")][-1]
    return int(line.split("|")[1])


def help_s() -> float:
    """Wall seconds of ``simlab --help`` in a fresh interpreter."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "simlab", "--help"], capture_output=True, check=True)
    return time.perf_counter() - start


def heavy_modules() -> list[str]:
    """The heavy modules loaded once ``simlab --help``'s sub-commands are mounted."""
    code = ("import sys, simlab.cli as c; c._mount_subcommands(); "
            f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.split()


def _line(name: str, values: list[float], unit: str) -> str:
    return (f"{name:8s} median {statistics.median(values):9.3f} {unit}  (min {min(values):.3f}, "
            f"max {max(values):.3f}, {len(values)} runs)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    imports = [import_us() / 1e3 for _ in range(args.runs)]
    helps = [help_s() for _ in range(args.runs)]
    print(f"python {sys.version.split()[0]}, {Path(sys.executable)}")
    print(_line("import", imports, "ms"))
    print(_line("help", helps, "s "))
    print(f"modules  {' '.join(heavy_modules()) or '(none)'}")


if __name__ == "__main__":
    main()
