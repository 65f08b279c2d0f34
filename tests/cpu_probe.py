"""Figures a seed must give identically on every CPU, printed as exact JSON (``repr`` of every float).

Run by tests/test_same_on_every_cpu.py twice: on this CPU as it is, and with numpy's SIMD dispatch held to its
baseline, numba compiling for a generic x86-64 (or arm64) and OpenBLAS on its oldest kernels. It covers what the
stored figures are made of: every kind of arm of the quickstart (chains, a draft tree, the seven schedulers) on a
trace, a mixture of experts on 2 GPUs, and the gain check's replay of tree runs (the fit behind their acceptance
once differed between CPUs in its last bits and chose other trees)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _numbers(value):
    """Every number of a result, floats as their exact repr."""
    if isinstance(value, dict):
        return {str(k): _numbers(v) for k, v in value.items() if "wall" not in str(k)}  # not the run's own time
    if isinstance(value, (list, tuple)):
        return [_numbers(v) for v in value]
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (int, str, bool)) or value is None:
        return value
    return repr(value)


def probe() -> dict:
    import yaml

    from simlab.runner import run_scenario
    from simlab.calibration.gain_check import read_load_records, simulate_load_record

    quickstart = yaml.safe_load((REPO / "scenarios" / "quickstart.yaml").read_text(encoding="utf-8"))
    quickstart["workload"]["max_requests"] = 400
    out = {"quickstart": {name: _numbers(m) for name, m in run_scenario(quickstart, plot=False).arms.items()}}
    moe = {"name": "moe", "seed": 3, "hardware": {"kind": "roofline", "gpu": "h100-sxm", "model": "qwen3-30b-a3b",
                                                  "tensor_parallel": 2, "stack": "sglang"},
           "workload": {"kind": "closed_loop", "concurrency": 16, "num_requests": 160,
                        "prompt_tokens": {"dist": "constant", "value": 512},
                        "output_tokens": {"dist": "constant", "value": 128}},
           "acceptance": {"kind": "preset", "name": "qwen3-8b"},
           "arms": [{"name": "no-spec", "method": "none"},
                    {"name": "tree", "method": "eagle3", "gamma": 4, "tree": {"topk": 4, "num_draft_tokens": 16}},
                    {"name": "adaptive", "method": "dspark", "gamma": 7, "scheduler": {"kind": "adaptive"}}]}
    out["moe"] = {name: _numbers(m) for name, m in run_scenario(moe, plot=False).arms.items()}
    records, _ = read_load_records(REPO / "hw_profiles" / "calibration" / "spec_load_measurements.csv")
    trees = [r for r in records if r.tree_topk and "qwen3-30b-a3b" in r.id and r.concurrency == 1]
    out["gain_check_trees"] = {r.id: repr(simulate_load_record(r)) for r in trees}
    return out


if __name__ == "__main__":
    json.dump(probe(), sys.stdout, sort_keys=True)
