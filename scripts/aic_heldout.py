"""Errors of the aiconfigurator cost model and of the calibrated roofline on held-out public engine runs.

For each held-out, non-speculative row of hw_profiles/calibration/engine_measurements.csv whose GPU, model and
engine the database covers, replay it (profile_check.simulate_record) with the roofline and with ``kind:
aiconfigurator`` (the database's release for that engine, not the row's), and print |simulated/measured - 1| of
TPOT and output throughput per concurrency band.
``PYTHONPATH=. python scripts/aic_heldout.py [max_rows] [--all]`` (``--all``: fitted rows too).
"""

from __future__ import annotations

import sys
from collections import defaultdict

import numpy as np

from simlab.config.hardware import AicHardware
from simlab.hardware.aiconfigurator import GPU_NAMES, MODEL_NAMES, build_aiconfigurator
from simlab.calibration.profile_check import fitted_ids, load_records, simulate_record, users_class

RELEASES = {"vllm": "0.24.0"}  # the database's release per engine used here (h100_sxm)
METRICS = ("mean_tpot_ms", "output_throughput_tok_s")


def main(max_rows: int = 1000, include_fitted: bool = False) -> None:
    """Print one line per row and a summary per band and cost model (``include_fitted``: the fitted rows too)."""
    used = set() if include_fitted else fitted_ids()
    errors: dict = defaultdict(list)
    rows = [r for r in load_records() if r.id not in used and not r.spec_method and r.gpu in GPU_NAMES
            and r.model in MODEL_NAMES and r.engine in RELEASES and r.precision == "bf16"][:max_rows]
    for record in rows:
        cfg = AicHardware(kind="aiconfigurator", gpu=record.gpu, model=record.model, stack=record.engine,
                          stack_version=RELEASES[record.engine], tensor_parallel=record.tensor_parallel)
        sims = {
            "roofline": simulate_record(record),
            "aiconfigurator": simulate_record(record, cost=build_aiconfigurator(cfg)),
        }
        band = users_class(record.concurrency)
        line = [record.id[:60], f"c={record.concurrency}"]
        for name, sim in sims.items():
            for metric in METRICS:
                measured = getattr(record, metric, None)
                if measured:
                    err = sim[metric] / measured - 1
                    errors[(name, band, metric)].append(abs(err))
                    line.append(f"{name[:4]}:{metric[:4]} {err:+.2f}")
        print(" ".join(line), flush=True)
    print("model band metric n median worst")
    for (name, band, metric), errs in sorted(errors.items()):
        print(name, band, metric, len(errs), f"{np.median(errs):.3f}", f"{max(errs):.3f}")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--all"]
    main(int(args[0]) if args else 1000, include_fitted="--all" in sys.argv)
