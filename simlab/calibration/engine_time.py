"""The engine's own time on top of the operation model, per serving stack: what the operations' GPU time does not
explain on a stack's public runs at low load (docs/operations.md, "The engine's own time").

For each stack, its fitted runs (:data:`FITTED_ON`) are replayed on ``kind: operations`` with the step time at zero;
a run's mean TPOT then grows one for one with the time added to each step, so the step time is the measured TPOT
less the replayed one (a least-squares line over the stack's runs when they span several concurrencies: a time a
step plus a time a request). The result ships as ``hw_profiles/calibration/engine_time.yaml``, which
``kind: operations`` reads (:func:`simlab.hardware.operations_table.engine_time`).

    python -m simlab.calibration.engine_time    # refit and rewrite the file (a few seconds)
"""

from __future__ import annotations

import sys
from datetime import date

import numpy as np
import yaml

from simlab.calibration.profile_check import load_records, simulate_record
from simlab.hardware.operations_table import ENGINE_TIME_FILE

# gpustack's Performance Lab, Qwen3-8B on one H100 (ShareGPT, 233/221 tokens): vLLM v0.11.0 at 1, 2, 4 and 8 users;
# SGLang and TensorRT-LLM (releases not stated) in bf16 at 4 users. The SGLang fp8 run at 4 users stays held out.
GPUSTACK = "gpustack-qwen3-8b-h100-latency-{engine}-qwen3-8b-bf16-kvbf16-233x221-c{users}"
FITTED_ON = {
    "vllm": [GPUSTACK.format(engine="vllm", users=u) for u in (1, 2, 4, 8)],
    "sglang": [GPUSTACK.format(engine="sglang", users=4)],
    "trtllm": [GPUSTACK.format(engine="trtllm", users=4)],
}
REQUEST_S_FROM = "vllm"  # a stack fitted at one concurrency takes the time a request of this one's fit


def _replayed_tpot_ms(record, request_s: float, **given) -> float:
    hardware = record.operations_hardware(step_overhead_s=0.0, request_overhead_s=request_s, **given)
    return simulate_record(record, hardware)["mean_tpot_ms"]


def fit(**given) -> dict:
    """Each stack's ``step_overhead_s`` and ``request_overhead_s``, with the runs and residuals (ms); ``given``
    fields of the ``kind: operations`` config replayed (``kernels="database"``: fitted over the database's GEMMs)."""
    records = {r.id: r for r in load_records()}
    out: dict = {}
    for stack in (REQUEST_S_FROM, *[s for s in FITTED_ON if s != REQUEST_S_FROM]):
        runs = [records[rid] for rid in FITTED_ON[stack]]
        users = np.array([r.concurrency for r in runs], dtype=float)
        measured = np.array([r.mean_tpot_ms for r in runs])
        if len(set(users)) > 1:
            gap = measured - np.array([_replayed_tpot_ms(r, 0.0, **given) for r in runs])
            slope, step_ms = np.polyfit(users, gap, 1)
            request_s = max(float(slope), 0.0) * 1e-3
        else:
            request_s = out[REQUEST_S_FROM]["request_overhead_s"]
        gap = measured - np.array([_replayed_tpot_ms(r, request_s, **given) for r in runs])
        step_s = float(np.mean(gap)) * 1e-3
        out[stack] = {"step_overhead_s": round(step_s, 7), "request_overhead_s": round(request_s, 8),
                      "fitted_on": [r.id for r in runs],
                      "residual_ms": [round(float(g) - step_s * 1e3, 3) for g in gap]}
    return out


def main() -> int:
    stacks = fit()
    text = yaml.safe_dump({"generator": "python -m simlab.calibration.engine_time",
                           "date": date.today().isoformat(), "stacks": stacks}, sort_keys=False, width=120)
    ENGINE_TIME_FILE.write_text("# The engine's own time on top of the operation model, per stack "
                                "(docs/operations.md)\n" + text, encoding="utf-8")
    for stack, entry in stacks.items():
        print(f"{stack}: {entry['step_overhead_s'] * 1e3:.3f} ms a step, {entry['request_overhead_s'] * 1e3:.4f} ms "
              f"a request ({len(entry['fitted_on'])} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
