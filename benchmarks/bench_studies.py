#!/usr/bin/env python
"""Studies benchmarks: the crossover study end to end, and the executors' overhead per point.

    python benchmarks/bench_studies.py crossover [--workers 2]
    python benchmarks/bench_studies.py overhead [--points 8] [--requests 600] [--repeats 3]

``crossover`` runs ``simlab sweep scenarios/studies/crossover.yaml`` (13 points x 8 arms) into a temporary
folder and reports the wall time of the sweep and of its report (target: <= 3 minutes together on a 2-core
machine).

``overhead`` runs the same points three ways, one worker each so that nothing runs in parallel: in this
process (``run_task`` in a loop: the work itself), through the local process pool, and through a Dask
LocalCluster (its start-up timed apart). The overhead per point is (sweep wall time - in-process wall time)
/ points, and also (sweep wall time - the workers' own time for their points) / points, which is less exposed
to other jobs on the machine; both relative to the mean point time (target: <= 5 % for points of >= 1 s).
Each mode is repeated and the medians are printed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent


def crossover(args) -> None:
    from simlab.studies.report_html import write_report
    from simlab.studies.sweep import run_sweep

    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        outcome = run_sweep(REPO / "scenarios/studies/crossover.yaml", Path(tmp) / "crossover",
                            workers=args.workers, report=False)
        sweep_s = time.perf_counter() - started
        started = time.perf_counter()
        write_report(outcome.out)
        report_s = time.perf_counter() - started
    print(f"crossover: {len(outcome.sweep.points)} points x {len(outcome.sweep.arm_labels)} arms, "
          f"{args.workers or 'all'} workers: sweep {sweep_s:.1f} s, report {report_s:.1f} s, "
          f"total {sweep_s + report_s:.1f} s")


def _scenario(points: int, requests: int) -> dict:
    return {
        "name": "overhead",
        "seed": 1,
        "workload": {"kind": "closed_loop", "concurrency": 32, "num_requests": requests, "prompt_tokens": 256,
                     "output_tokens": {"dist": "uniform", "low": 128, "high": 512}},
        "hardware": "h100-sxm_qwen3-8b",
        "acceptance": {"kind": "preset", "name": "qwen3-8b"},
        "arms": [{"name": "dspark-hw", "method": "dspark", "gamma": 7, "scheduler": {"kind": "hardware_aware"}}],
        "sweep": {"grid": {"seed": list(range(1, points + 1))}},
    }


def overhead(args) -> None:
    from simlab.studies.executors import make_executor
    from simlab.studies.grid import load_sweep
    from simlab.studies.sweep import run_sweep
    from simlab.studies.tasks import ScenarioTask, run_task

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        path = tmp / "overhead.yaml"
        path.write_text(yaml.safe_dump(_scenario(args.points, args.requests)))
        sweep = load_sweep(path)
        results: dict[str, list[tuple[float, float]]] = {"in-process": [], "local": [], "dask": []}
        startup: list[float] = []
        for repeat in range(args.repeats):
            out = tmp / f"direct{repeat}"
            started = time.perf_counter()
            walls = [run_task(ScenarioTask(p.data, str(path), str(out / p.id)))["wall_s"]
                     for p in sweep.points]
            results["in-process"].append((time.perf_counter() - started, sum(walls)))
            for name in ("local", "dask"):
                if name == "dask":
                    started = time.perf_counter()
                    make_executor("dask", workers=1).close()
                    startup.append(time.perf_counter() - started)
                started = time.perf_counter()
                outcome = run_sweep(path, tmp / f"{name}{repeat}", executor=name, workers=1, report=False)
                total = time.perf_counter() - started - (startup[-1] if name == "dask" else 0.0)
                timing = (outcome.out / "timing.csv").read_text().splitlines()[1:]
                worker_s = sum(float(line.split(",")[-1]) for line in timing)
                results[name].append((total, worker_s))
        direct = statistics.median(t for t, _ in results["in-process"])
        per_point = direct / args.points
        print(f"{args.points} points, {args.requests} requests each, 1 worker, median of {args.repeats}:")
        print(f"  in-process: {direct:.2f} s ({per_point:.2f} s per point)")
        for name in ("local", "dask"):
            total = statistics.median(t for t, _ in results[name])
            worker = statistics.median(w for _, w in results[name])
            vs_direct = (total - direct) / args.points
            vs_worker = (total - worker) / args.points
            print(f"  {name}: {total:.2f} s; overhead per point {vs_direct * 1e3:+.0f} ms "
                  f"({vs_direct / per_point:+.1%}) against in-process, {vs_worker * 1e3:+.0f} ms "
                  f"({vs_worker / per_point:+.1%}) against the workers' own time")
        print(f"  dask LocalCluster start and stop (not in the figures above): {statistics.median(startup):.1f} s")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="benchmark", required=True)
    cross = sub.add_parser("crossover")
    cross.add_argument("--workers", type=int, default=None)
    over = sub.add_parser("overhead")
    over.add_argument("--points", type=int, default=8)
    over.add_argument("--requests", type=int, default=600)
    over.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    {"crossover": crossover, "overhead": overhead}[args.benchmark](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
