#!/usr/bin/env python
"""Run the quickstart and write the README's quickstart table and its wall-time range (between the markers).

    python scripts/readme_quickstart.py             # 3 timed runs of `simlab run scenarios/quickstart.yaml`
    python scripts/readme_quickstart.py --runs 5    # more runs for the time range
    python scripts/readme_quickstart.py --check     # exit 1 if the README's table differs from a fresh run

The table is what `simlab run` prints, less the wall-time column (it varies between runs); the sentence after
it gives the range of wall times over the runs, the machine and its load average while measuring, so a number
measured on a busy machine says so. Re-measure on a quiet machine before publishing times.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
SCENARIO = REPO / "scenarios" / "quickstart.yaml"
BEGIN = "<!-- BEGIN quickstart table: written by scripts/readme_quickstart.py -->"
END = "<!-- END quickstart table -->"
QUIET_LOAD = 0.5  # load average per core below which the machine counts as quiet


def table_text(arms: dict[str, dict]) -> str:
    """The comparison table as plain text: `simlab run`'s columns without the wall time."""
    from simlab.results.table import COLUMNS

    columns = [c for c in COLUMNS if c[1] != "sim_wall_s"]
    rows = []
    for name, metrics in arms.items():
        row = [name + ("" if metrics.get("realisable", True) else " (bound)")]
        for _, key, fmt in columns[1:]:
            value = metrics.get(key)
            row.append("-" if value is None else fmt.format(value))
        rows.append(row)
    headers = [header.split("\n") + [""] * (2 - len(header.split("\n"))) for header, _, _ in columns]
    widths = [max(len(h) for h in [*head, *(r[i] for r in rows)]) for i, head in enumerate(headers)]

    def line(cells: list[str]) -> str:
        first = cells[0].ljust(widths[0])
        return "  ".join([first, *(c.rjust(w) for c, w in zip(cells[1:], widths[1:]))]).rstrip()

    return "\n".join([line([h[0] for h in headers]), line([h[1] for h in headers]), *map(line, rows)])


def quickstart_arms(jobs: int | None = None) -> dict[str, dict]:
    """Run the quickstart in this process and return its arms' METRICS."""
    from simlab.runner import default_jobs, run_scenario

    return run_scenario(SCENARIO, jobs=jobs or default_jobs(), plot=False).arms


def machine() -> str:
    """The CPU count and model, and whether a hypervisor is reported."""
    model, virtual = platform.processor() or platform.machine(), False
    try:
        info = Path("/proc/cpuinfo").read_text()
        model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")),
                     model)
        virtual = " hypervisor" in info
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{cores}-core {model}{' VM' if virtual else ''}, Python {platform.python_version()}"


def timed_runs(runs: int) -> tuple[list[float], list[float], dict]:
    """Wall seconds of `simlab run` on the quickstart (a fresh process each), the 1-minute load average before
    each, and the last run's arms."""
    simlab = shutil.which("simlab", path=str(Path(sys.executable).parent)) or "simlab"
    seconds, loads, arms = [], [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs):
            loads.append(os.getloadavg()[0])
            out = Path(tmp) / f"run{i}"
            start = time.perf_counter()
            subprocess.run([simlab, "run", str(SCENARIO), "--out", str(out), "-q", "--no-plot"], check=True,
                           cwd=REPO)
            seconds.append(time.perf_counter() - start)
            arms = json.loads((out / "summary.json").read_text())["arms"]
    return seconds, loads, arms


def timing_sentence(seconds: list[float], loads: list[float]) -> str:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    quiet = loads[0] / cores < QUIET_LOAD  # later loads include this script's own earlier runs
    load = f"load average {loads[0]:.1f} before the first run"
    state = f"{load}: a quiet machine" if quiet else f"{load}: other jobs were running, so these times are high"
    return (f"`simlab run scenarios/quickstart.yaml` took {min(seconds):.0f}-{max(seconds):.0f} s of wall time over "
            f"{len(seconds)} runs on a {machine()} ({state}).")


def block(table: str, timing: str) -> str:
    return f"{BEGIN}\n```\n{table}\n```\n\n{timing}\n{END}"


def readme_table(text: str) -> str:
    """The table between the README's markers."""
    inside = text.split(BEGIN, 1)[1].split(END, 1)[0]
    return inside.split("```\n", 1)[1].split("\n```", 1)[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="timed runs (default 3)")
    parser.add_argument("--check", action="store_true", help="only compare the README's table with a fresh run")
    args = parser.parse_args(argv)
    text = README.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        print(f"{README}: no {BEGIN} ... {END} block", file=sys.stderr)
        return 1
    if args.check:
        fresh = table_text(quickstart_arms())
        if readme_table(text) != fresh:
            print("README.md's quickstart table is stale; run scripts/readme_quickstart.py. Fresh table:\n" + fresh,
                  file=sys.stderr)
            return 1
        print("README.md's quickstart table matches a fresh run")
        return 0
    seconds, loads, arms = timed_runs(max(1, args.runs))
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    from simlab.common.outputs import write_file_atomic

    write_file_atomic(README, head + block(table_text(arms), timing_sentence(seconds, loads)) + tail)
    print(f"wrote {README}: {timing_sentence(seconds, loads)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
