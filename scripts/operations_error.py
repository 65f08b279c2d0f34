"""The operation model's error on public engine runs (docs/operations.md): every non-speculative bf16 or fp8 run of
hw_profiles/calibration/engine_measurements.csv on a dense target whose GPU has kernel curves, replayed as
``simlab profiles check`` replays it (closed loop at the run's concurrency and lengths, its engine limits), on
``kind: operations`` and on the calibrated roofline; |simulated / measured - 1| of TPOT and output throughput per
band of users. The four gpustack vLLM Qwen3-8B H100 runs at 1-8 users are the ones the engine's time was fitted on.

    python scripts/operations_error.py          # prints the table (seconds)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
FITTED_PREFIX = "gpustack-qwen3-8b-h100-latency-vllm-qwen3-8b-bf16-kvbf16-233x221-c"


def band(users: int) -> str:
    return "1" if users == 1 else "2-31" if users < 32 else "32-127" if users < 128 else "128+"


def main() -> int:
    from simlab.hardware.kernel_curves import curves_file
    from simlab.hardware.specs import get_model
    from simlab.studies.profile_check import load_records, simulate_record

    rows = []
    for record in load_records():
        if (record.speculative or record.precision not in ("bf16", "fp8") or get_model(record.model).is_moe
                or not curves_file(record.gpu).is_file() or record.mean_tpot_ms is None):
            continue
        operations = {"kind": "operations", "gpu": record.gpu, "model": record.model,
                      "tensor_parallel": record.tensor_parallel, "precision": record.precision}
        ops, roofline = simulate_record(record, operations), simulate_record(record)
        role = "fitted" if record.id.startswith(FITTED_PREFIX) else "held out"
        errors = {f"{name}_{metric}": abs(result[metric] / measured - 1.0)
                  for name, result in (("ops", ops), ("roofline", roofline))
                  for metric, measured in (("mean_tpot_ms", record.mean_tpot_ms),
                                           ("output_throughput_tok_s", record.output_throughput_tok_s))}
        rows.append((role, band(record.concurrency), record, ops, errors))
        print(f"{role:8} {record.id[:64]:64} users {record.concurrency:4} TPOT {record.mean_tpot_ms:7.2f} "
              f"ops {ops['mean_tpot_ms']:7.2f} roofline {roofline['mean_tpot_ms']:7.2f}", flush=True)
    print("\n| role | users | runs | ops TPOT | roofline TPOT | ops throughput | roofline throughput |")
    print("|---|---|---|---|---|---|---|")
    for role in ("fitted", "held out"):
        for users in ("1", "2-31", "32-127", "128+"):
            group = [e for r, b, _, _, e in rows if r == role and b == users]
            if not group:
                continue

            def cell(key: str) -> str:
                values = [e[key] for e in group]
                return f"{np.median(values):.1%} ({max(values):.1%})"

            print(f"| {role} | {users} | {len(group)} | {cell('ops_mean_tpot_ms')} | {cell('roofline_mean_tpot_ms')} | "
                  f"{cell('ops_output_throughput_tok_s')} | {cell('roofline_output_throughput_tok_s')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
