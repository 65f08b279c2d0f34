#!/usr/bin/env python
"""simlab plan benchmark: a plan of more than 200 candidate deployments on 1,500 requests, timed end to end
(reading the plan, the search, every output file), on the local pool and on Dask LocalClusters of 1 and 2
workers, each into a fresh folder (nothing resumed).

    python benchmarks/bench_plan.py [--modes local:2,dask:1,dask:2] [--exhaustive]

The plan is the contract's example (tests/contract/plan.yaml: Poisson arrivals, 1,500 requests, three arms,
p90 TPOT <= 25 ms and p90 TTFT <= 2 s) at 120 requests/s instead of 30, over H100, H200 and B200 at the shipped
prices, bf16 and fp8, tensor parallel 1, 2 and 4, up to 32 GPUs. Target: <= 3 minutes on a 2-core machine.
``--exhaustive`` also times the same plan with every deployment simulated (no bounds), the count the bounds save.
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # this checkout's simlab, not an installed one


def bench_plan_file(folder: Path) -> Path:
    data = yaml.safe_load((REPO / "tests/contract/plan.yaml").read_text())
    data["name"] = "plan-bench"
    data["workload"]["rate"] = 120.0  # four times the example's load: deployments of 4 to 16 GPUs
    data["plan"].update(gpus=["h100-sxm", "h200", "b200"], precision=["bf16", "fp8"], tensor_parallel=[1, 2, 4],
                        max_gpus=32)
    path = folder / "plan-bench.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--modes", default="local:2,dask:1,dask:2")
    parser.add_argument("--exhaustive", action="store_true")
    args = parser.parse_args()
    from simlab.studies.plan import run_plan

    print(f"machine: {platform.node()}, {platform.processor() or platform.machine()}, "
          f"{len(__import__('os').sched_getaffinity(0))} CPUs; python {platform.python_version()}")
    with tempfile.TemporaryDirectory() as tmp:
        plan = bench_plan_file(Path(tmp))
        runs = [(m.split(":")[0], int(m.split(":")[1]), False) for m in args.modes.split(",")]
        if args.exhaustive:
            runs.append(("local", 2, True))
        for executor, workers, exhaustive in runs:
            out = Path(tmp) / f"out-{executor}-{workers}-{exhaustive}"
            started = time.perf_counter()
            doc = run_plan(plan, out, executor=executor, workers=workers, exhaustive=exhaustive).document
            wall = time.perf_counter() - started
            s, best = doc["search"], doc["best"]
            print(f"{executor} x{workers}{' exhaustive' if exhaustive else ''}: {s['num_candidate_deployments']} "
                  f"candidate deployments ({s['num_families']} families, {s['num_layouts']} layouts), "
                  f"{s['num_simulated']} simulated, search {s['wall_s']:.1f} s, total {wall:.1f} s; best: "
                  f"{best['replicas']} x {best['gpu']} {best['precision']} tp{best['tensor_parallel']} "
                  f"{best['arm']} ${best['usd_per_hour']:.2f}/h", flush=True)


if __name__ == "__main__":
    main()
