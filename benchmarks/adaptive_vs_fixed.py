#!/usr/bin/env python
"""Issue 11's comparison: adaptive against no-spec, MTP-1, DSpark fixed gamma 1..5 and hardware_aware gamma 5.

Qwen3-14B on one H200 (the shipped roofline profile), the qwen3-14b acceptance preset, a closed loop with
lognormal prompts (mean 1,500) and outputs (mean 400), at concurrency 1, 8, 32, 128 and 256. Prints a Markdown
table of output tokens/s per arm and adaptive's ratio to the best other arm (docs/schedulers.md quotes it).

    python benchmarks/adaptive_vs_fixed.py [--concurrency 1,8,32,128,256] [--jobs 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import simlab  # noqa: E402

ARMS = ([{"name": "no-spec", "method": "none"}, {"name": "mtp-1", "method": "mtp", "gamma": 1}]
        + [{"name": f"dspark-fixed-{g}", "method": "dspark", "gamma": g} for g in range(1, 6)]
        + [{"name": "dspark-hw-5", "method": "dspark", "gamma": 5, "scheduler": {"kind": "hardware_aware"}},
           {"name": "dspark-adaptive-5", "method": "dspark", "gamma": 5, "scheduler": {"kind": "adaptive"}}])


def scenario(concurrency: int) -> dict:
    return {"name": f"adaptive-load-{concurrency}", "seed": 1,
            "workload": {"kind": "closed_loop", "concurrency": concurrency, "num_requests": max(6 * concurrency, 300),
                         "prompt_tokens": {"dist": "lognormal", "mean": 1500, "sigma": 0.6, "max": 8000},
                         "output_tokens": {"dist": "lognormal", "mean": 400, "sigma": 0.6, "max": 2000}},
            "hardware": "h200_qwen3-14b", "acceptance": {"kind": "preset", "name": "qwen3-14b"}, "arms": ARMS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="1,8,32,128,256")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    loads = [int(c) for c in args.concurrency.split(",")]
    names = [arm["name"] for arm in ARMS]
    print("| concurrency | " + " | ".join(names) + " | adaptive ÷ best other |")
    print("|---" * (len(names) + 2) + "|")
    for concurrency in loads:
        started = time.perf_counter()
        results = simlab.run_scenario(scenario(concurrency), jobs=args.jobs, plot=False)
        throughput = results.table().output_throughput
        ratio = throughput["dspark-adaptive-5"] / throughput.drop("dspark-adaptive-5").max()
        cells = " | ".join(f"{throughput[n]:,.0f}" for n in names)
        print(f"| {concurrency} | {cells} | {ratio:.3f} |", flush=True)
        walls = results.table().sim_wall_s
        print(f"<!-- {concurrency}: {time.perf_counter() - started:.1f} s; sim_wall_s hw {walls['dspark-hw-5']:.1f}, "
              f"adaptive {walls['dspark-adaptive-5']:.1f} -->", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
