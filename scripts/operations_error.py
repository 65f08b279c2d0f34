"""The operation model's error on public engine runs (docs/operations.md): every non-speculative bf16 or fp8 run of
hw_profiles/calibration/engine_measurements.csv on a target the operation model prices (dense, hybrid, MoE and MLA,
with or without expert parallelism) whose GPU has kernel curves, by class, replayed as
``simlab profiles check`` replays it (closed loop at the run's concurrency and lengths, its engine limits), on
``kind: operations`` and on the calibrated roofline; |simulated / measured - 1| of TPOT and output throughput per
band of users. The runs the engine's time was fitted on (hw_profiles/calibration/engine_time.yaml: gpustack's Qwen3-8B
H100 runs, vLLM at 1-8 users, SGLang and TensorRT-LLM bf16 at 4) are "fitted".

    python scripts/operations_error.py          # prints the table (seconds)
    python scripts/operations_error.py --gain   # speculation's gain on the operation model (a few minutes)
    python scripts/operations_error.py --database  # the same table with the GEMMs from aiconfigurator-core's rows
                                                   # (kernels: database, the engine's time refitted over them)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def band(users: int) -> str:
    return "1" if users == 1 else "2-31" if users < 32 else "32-127" if users < 128 else "128+"


def by_band(rows: list[tuple]):
    """(role, users band, the rest of each row) per non-empty group of rows (role, band, ...)."""
    for role in ("fitted", "held out", "fitted, MoE", "held out, MoE", "held out, MoE, EP", "held out, hybrid"):
        for users in ("1", "2-31", "32-127", "128+"):
            group = [row[2:] for row in rows if row[0] == role and row[1] == users]
            if group:
                yield role, users, group


def main() -> int:
    from simlab.hardware.kernel_curves import curves_file
    from simlab.hardware.specs import get_model
    from simlab.calibration.profile_check import load_records, simulate_record

    from simlab.hardware.operations_table import ENGINE_TIME_FILE
    import yaml

    engine_fitted = {rid for entry in yaml.safe_load(ENGINE_TIME_FILE.read_text())["stacks"].values()
                     for rid in entry["fitted_on"]}
    if "--database" in sys.argv:  # the database's GEMMs, and the engine's time refitted over them
        from simlab.calibration.engine_time import fit

        fitted = fit(kernels="database")
        print({stack: (entry["step_overhead_s"], entry["request_overhead_s"]) for stack, entry in fitted.items()})

        def given_for(stack: str) -> dict:
            entry = fitted.get(stack, fitted["vllm"])
            return {"kernels": "database", "step_overhead_s": entry["step_overhead_s"],
                    "request_overhead_s": entry["request_overhead_s"]}
    rows = []
    for record in load_records():
        model = get_model(record.model)
        if (record.speculative or record.precision not in ("bf16", "fp8")
                or model.compressed is not None
                or not curves_file(record.gpu).is_file()):
            continue
        extra = given_for(record.engine) if "--database" in sys.argv else {}
        ops, roofline = simulate_record(record, record.operations_hardware(**extra)), simulate_record(record)
        role = "fitted" if record.id in engine_fitted else "held out"
        role += ", MoE" if model.is_moe else ", hybrid" if model.hybrid is not None else ""
        role += ", EP" if (record.expert_parallel or 1) > 1 else ""
        errors = {f"{name}_{metric}": abs(result[metric] / measured - 1.0)
                  for name, result in (("ops", ops), ("roofline", roofline))
                  for metric, measured in (("mean_tpot_ms", record.mean_tpot_ms),
                                           ("output_throughput_tok_s", record.output_throughput_tok_s))
                  if measured is not None}
        rows.append((role, band(record.concurrency), record, ops, errors))
        if record.mean_tpot_ms is None:  # a run that states its throughput alone
            print(f"{role:8} {record.id[:64]:64} users {record.concurrency:4} tok/s "
                  f"{record.output_throughput_tok_s:7.1f} ops {ops['output_throughput_tok_s']:7.1f} "
                  f"roofline {roofline['output_throughput_tok_s']:7.1f}", flush=True)
        else:
            print(f"{role:8} {record.id[:64]:64} users {record.concurrency:4} TPOT {record.mean_tpot_ms:7.2f} "
                  f"ops {ops['mean_tpot_ms']:7.2f} roofline {roofline['mean_tpot_ms']:7.2f}", flush=True)
    print("\n| role | users | runs | ops TPOT | roofline TPOT | ops throughput | roofline throughput |")
    print("|---|---|---|---|---|---|---|")
    for role, users, group in by_band(rows):
        def cell(key: str) -> str:
            values = [row[2][key] for row in group if key in row[2]]
            if not values:
                return "-"
            stated = f", {len(values)} runs" if len(values) < len(group) else ""
            return f"{np.median(values):.1%} ({max(values):.1%}){stated}"

        print(f"| {role} | {users} | {len(group)} | {cell('ops_mean_tpot_ms')} | {cell('roofline_mean_tpot_ms')} | "
              f"{cell('ops_output_throughput_tok_s')} | {cell('roofline_output_throughput_tok_s')} |")
    print_by_model([row for row in rows if row[0].endswith("MoE") and row[2].mean_tpot_ms is not None])
    return 0


def print_by_model(rows: list[tuple]) -> None:
    """The TPOT error by model and band: the operations' median (worst), how many runs it is fast on, and the
    roofline's median."""
    models = sorted({row[2].model for row in rows})
    print("\n| model | " + " | ".join(("1 user", "2-31", "32-127", "128+")) + " |\n|---|---|---|---|---|")
    for model in models:
        cells = []
        for users in ("1", "2-31", "32-127", "128+"):
            group = [row for row in rows if row[2].model == model and row[1] == users]
            if not group:
                cells.append("")
                continue
            signed = [row[3]["mean_tpot_ms"] / row[2].mean_tpot_ms - 1.0 for row in group]
            ops = [abs(x) for x in signed]
            roofline = [row[4]["roofline_mean_tpot_ms"] for row in group]
            cells.append(f"{np.median(ops):.1%} ({max(ops):.0%}), {sum(x < 0 for x in signed)} fast of "
                         f"{len(group)}; roofline {np.median(roofline):.1%}")
        print(f"| {model} | " + " | ".join(cells) + " |")


if __name__ == "__main__" and "--gain" not in sys.argv:
    sys.exit(main())


def gain_rows():
    """Speculation's gain (output throughput with / without) on the operation model, for every chain pair of
    gain_check.py on a target it prices (dense, MoE and MLA, with or without expert parallelism) whose GPU has curves:
    (role, users band, measured, operations, roofline)."""
    from simlab.hardware.kernel_curves import curves_file
    from simlab.hardware.specs import get_model
    from simlab.runner import run_scenario
    from simlab.calibration.gain_check import (LoadRecord, load_scenario, pairs, read_load_records,
                                           simulate_load_record)
    from simlab.calibration.profile_check import fitted_ids, load_records, simulate_record

    def on_operations(record) -> float:
        hardware = record.operations_hardware(
            precision=record.precision if record.precision in ("bf16", "fp8") else "bf16")
        if isinstance(record, LoadRecord):
            scenario = {**load_scenario(record), "hardware": hardware}
            return float(next(iter(run_scenario(scenario, plot=False).arms.values()))["output_throughput"])
        return float(simulate_record(record, hardware)["output_throughput_tok_s"])

    used = fitted_ids()
    rows = []
    for _, spec, base in pairs(load_records() + read_load_records()[0]):
        model = get_model(spec.model)
        if (model.compressed is not None
                or not curves_file(spec.gpu).is_file() or spec.precision not in ("bf16", "fp8")
                or getattr(spec, "tree_topk", None)):
            continue
        measured = spec.output_throughput_tok_s / base.output_throughput_tok_s
        ops = on_operations(spec) / on_operations(base)
        roofline = simulate_load_record(spec) / simulate_load_record(base)
        role = "fitted" if spec.id in used or base.id in used else "held out"
        role += ", MoE" if model.is_moe else ""
        role += ", EP" if (getattr(spec, "expert_parallel", 1) or 1) > 1 else ""
        rows.append((role, band(spec.concurrency), measured, ops, roofline))
        print(f"{role:8} {spec.id[:60]:60} users {spec.concurrency:4} gain {measured:5.2f} ops {ops:5.2f} "
              f"roofline {roofline:5.2f}", flush=True)
    print("\n| role | users | pairs | operations gain error | signs agree | roofline gain error | signs agree |")
    print("|---|---|---|---|---|---|---|")
    for role, users, group in by_band(rows):
        def gain_cell(i: int) -> str:
            errors = [abs(g[i] / g[0] - 1.0) for g in group]
            decided = [g for g in group if g[0] < 0.9 or g[0] > 1.1]
            agree = sum((g[i] > 1.0) == (g[0] > 1.0) for g in decided)
            return f"{np.median(errors):.1%} ({max(errors):.1%}) | {agree} of {len(decided)}"

        print(f"| {role} | {users} | {len(group)} | {gain_cell(1)} | {gain_cell(2)} |")


if __name__ == "__main__" and "--gain" in sys.argv:
    gain_rows()
