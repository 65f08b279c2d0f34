"""Compare the engine's speed in two checkouts on the same inputs: alternating runs in fresh processes.

    python benchmarks/compare_engines.py OLD_CHECKOUT NEW_CHECKOUT --arm dspark-hw --pairs 8
    python benchmarks/compare_engines.py OLD NEW --arm dspark-hw --max-requests 3000 --instructions

Each checkout is a folder holding ``simlab/`` (e.g. ``git worktree add /tmp/old 6501444``). Both simulate one
arm of ``scenarios/quickstart.yaml`` (from NEW) on the Azure conversation trace, with the cost profile given by
``--hardware`` (default: the quickstart's); use a profile both checkouts can read. A run times the arm's CPU
seconds (``time.process_time``), not the start-up. The order within each pair is random; the script prints each
pair, the ratio of the fastest runs and the median of the pair ratios (new / old) with a bootstrap 90 % interval.

On a machine whose speed drifts between runs, ``--instructions`` counts instructions instead (valgrind's
callgrind, about 60x slower): a run minus the same run stopped before simulating. It is deterministic, and it
tells apart a change in the work done from a change in how fast the machine did it.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "traces" / "AzureLLMInferenceTrace_conv.csv"


def _child(arm: str, max_requests: int, hardware: str, skip: bool) -> None:
    """One measurement, in the checkout on PYTHONPATH: prints the arm's CPU seconds and step count."""
    import simlab
    from simlab.config.loading import load_scenario
    from simlab.runner import build, simulate_all

    checkout = Path(os.environ["PYTHONPATH"]).resolve()
    if checkout not in Path(simlab.__file__).resolve().parents:
        sys.exit(f"simlab was imported from {simlab.__file__}, not from {checkout}")

    quickstart = yaml.safe_load((ROOT / "scenarios" / "quickstart.yaml").read_text(encoding="utf-8"))
    arms = [a for a in quickstart["arms"] if a["name"] == arm]
    if not arms:
        sys.exit(f"no arm {arm!r} in scenarios/quickstart.yaml")
    workload = {"kind": "trace", "path": str(TRACE), "domains": quickstart["workload"]["domains"]}
    if max_requests:
        workload["max_requests"] = max_requests
    data = {**quickstart, "name": "compare", "workload": workload, "arms": arms,
            "hardware": hardware or quickstart["hardware"]}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "compare.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        built = build(load_scenario(path))
        if skip:
            return
        started = time.process_time()
        (outcome,) = simulate_all(built, jobs=1)
        cpu_s = time.process_time() - started
    print(f"cpu_s {cpu_s:.4f} steps {outcome.metrics['num_steps']}")


def _run(checkout: str, args, *, skip: bool = False, instructions: bool = False) -> float:
    command = [sys.executable, __file__, "--child", "--arm", args.arm, "--max-requests", str(args.max_requests),
               "--hardware", args.hardware] + (["--skip"] if skip else [])
    if instructions:
        command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"] + command
    env = {**os.environ, "PYTHONPATH": str(Path(checkout).resolve()), "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
    if done.returncode != 0:
        sys.exit(f"run in {checkout} failed:\n{done.stderr[-2000:]}")
    if instructions:
        return float(re.search(r"Collected : (\d+)", done.stderr).group(1))
    return float(re.search(r"cpu_s ([0-9.]+)", done.stdout).group(1))


def _instructions(args) -> None:
    if shutil.which("valgrind") is None:
        sys.exit("--instructions needs valgrind")
    counts = {}
    for name, checkout in (("old", args.old), ("new", args.new)):
        counts[name] = _run(checkout, args, instructions=True) - _run(checkout, args, skip=True, instructions=True)
        print(f"{name}: {counts[name] / 1e9:.3f} G instructions simulating", flush=True)
    print(f"new / old = {counts['new'] / counts['old']:.4f}")


def _timed(args) -> None:
    rng = random.Random(args.seed)
    ratios, olds, news = [], [], []
    for _ in range(args.pairs):
        order = ["old", "new"] if rng.random() < 0.5 else ["new", "old"]
        seconds = {name: _run(getattr(args, name), args) for name in order}
        olds.append(seconds["old"])
        news.append(seconds["new"])
        ratios.append(seconds["new"] / seconds["old"])
        print(f"old {seconds['old']:.2f} s  new {seconds['new']:.2f} s  ratio {ratios[-1]:.3f}", flush=True)
    medians = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(2000))
    print(f"ratio of the fastest runs {min(news) / min(olds):.3f} (old {min(olds):.2f} s, new {min(news):.2f} s)")
    print(f"median pair ratio {statistics.median(ratios):.3f} (bootstrap 90 % interval {medians[100]:.3f}-"
          f"{medians[1899]:.3f}); median old {statistics.median(olds):.2f} s, new {statistics.median(news):.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", nargs="?")
    parser.add_argument("new", nargs="?")
    parser.add_argument("--arm", default="dspark-hw", help="an arm of scenarios/quickstart.yaml")
    parser.add_argument("--max-requests", type=int, default=0, help="the first N requests of the trace (0: all)")
    parser.add_argument("--hardware", default="", help="cost profile both checkouts read (default: quickstart's)")
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--instructions", action="store_true", help="count instructions with callgrind")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--skip", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.arm, args.max_requests, args.hardware, args.skip)
        return
    if not args.old or not args.new:
        parser.error("give the OLD and NEW checkouts")
    for checkout in (args.old, args.new):
        if not (Path(checkout) / "simlab").is_dir():
            parser.error(f"{checkout} holds no simlab/ package")
    if args.hardware:
        args.hardware = str(Path(args.hardware).resolve())
    (_instructions if args.instructions else _timed)(args)


if __name__ == "__main__":
    main()
