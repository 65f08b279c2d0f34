"""The operation model and the calibrated roofline on the public dense runs at 16-127 users that leave a field
unstated (hw_profiles/calibration/weak_engine_runs.csv): each replayed as `simlab profiles check` replays a run
(a closed loop at its concurrency, its mean lengths as constants), once under every reading of what is missing (the
A100's memory; the engine behind NIM), with |simulated / measured - 1| of mean TPOT (docs/operations.md).

    python scripts/operations_weak_runs.py     # a minute
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
RUNS = REPO / "hw_profiles" / "calibration" / "weak_engine_runs.csv"
READINGS = {"a100": ("a100-40g", "a100-80g")}  # an unstated A100: both memories
ENGINES = ("trtllm", "vllm")  # an unstated engine behind NIM: both it may run


def replay(row, gpu: str, stack: str, hardware_kind: str) -> float:
    from simlab.runner import run_scenario

    hardware = {"kind": hardware_kind, "gpu": gpu, "model": row.model, "tensor_parallel": int(row.tensor_parallel),
                "precision": row.precision, "stack": stack}
    prompts = int(row.num_prompts) if pd.notna(row.num_prompts) else 4 * int(row.concurrency)
    scenario = {"name": "weak", "seed": 0,
                "workload": {"kind": "closed_loop", "concurrency": int(row.concurrency), "num_requests": prompts,
                             "prompt_tokens": {"dist": "constant", "value": int(row.input_tokens)},
                             "output_tokens": {"dist": "constant", "value": int(row.output_tokens)}},
                "hardware": hardware, "engine": {"kv_policy": "paged"},
                "acceptance": {"kind": "iid", "alpha": 0.5}, "arms": [{"name": "no-spec", "method": "none"}]}
    return float(next(iter(run_scenario(scenario, plot=False).arms.values()))["mean_tpot_ms"])


def main() -> int:
    runs = pd.read_csv(RUNS, comment="#")
    print("| run | users | measured TPOT | reading | operations | roofline |")
    print("|---|---|---|---|---|---|")
    for row in runs.itertuples():
        gpus = READINGS.get(row.gpu, (row.gpu,))
        stacks = (row.engine,) if isinstance(row.engine, str) and row.engine else ENGINES
        for gpu in gpus:
            for stack in stacks:
                ops, roofline = (replay(row, gpu, stack, kind) for kind in ("operations", "roofline"))
                print(f"| {row.id} | {row.concurrency} | {row.mean_tpot_ms:.2f} | {gpu}, {stack} | "
                      f"{ops:.2f} ({ops / row.mean_tpot_ms - 1:+.0%}) | "
                      f"{roofline:.2f} ({roofline / row.mean_tpot_ms - 1:+.0%}) |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
