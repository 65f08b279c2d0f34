"""Engine benchmarks: simulation speed and memory. Not part of the test suite.

    python benchmarks/bench_engine.py              # all three
    python benchmarks/bench_engine.py throughput   # or: azure, memory

throughput  the dspark hardware_aware arm at 128 concurrent requests (closed loop), gamma 7: output tokens
            simulated per wall-second of the arm (target: >= 1,000,000 on one core)
operations  the same on kind: operations (the operation model's table; issue 47's target: >= 1,500,000)
azure       the Azure 2023 conversation trace (19,366 requests) at its recorded rate, every quickstart arm
            (target: <= 10 s per arm)
memory      1,000,000 requests through `simlab run` (two arms, results written): peak resident memory
            (target: < 2 GiB)
matrix      the throughput case across workloads: chat/math x short/long outputs x constant/varied lengths x
            closed/open loop (target: >= 1,000,000 output tokens per wall-second in every case)
disaggregation  8 GPUs co-located against 4:4 prefill/decode pools (scenarios/studies/disaggregation.yaml at
            gaps x 0.1): wall per arm of each
"""

from __future__ import annotations

import json
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PROFILE = "h100-sxm_qwen3-8b"
PRESET = {"kind": "preset", "name": "qwen3-8b"}


def _simulate(data: dict, jobs: int = 1) -> list:
    from simlab.config.loading import load_scenario
    from simlab.runner import build, simulate_all

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        built = build(load_scenario(path))
        return simulate_all(built, jobs=jobs)


def throughput(hardware=PROFILE) -> dict:
    data = {
        "name": "bench-throughput",
        "seed": 1,
        "workload": {"kind": "closed_loop", "concurrency": 128, "num_requests": 6000,
                     "prompt_tokens": {"dist": "uniform", "low": 256, "high": 2048},
                     "output_tokens": {"dist": "uniform", "low": 128, "high": 512},
                     "domains": {"math": 0.3, "code": 0.3, "chat": 0.4}},
        "hardware": hardware,
        "engine": {"max_num_seqs": 256, "max_batch_tokens": 8192},
        "acceptance": PRESET,
        "arms": [{"name": "dspark-hw", "method": "dspark", "gamma": 7, "scheduler": {"kind": "hardware_aware"}}],
    }
    (outcome,) = _simulate(data)
    m = outcome.metrics
    tokens = int(outcome.requests.output_tokens.sum())
    return {
        "output_tokens": tokens,
        "sim_wall_s": round(m["sim_wall_s"], 3),
        "output_tokens_per_wall_s": round(tokens / m["sim_wall_s"]),
        "mean_batch_requests": round(m["mean_batch_requests"], 1),
        "engine_steps": m["num_steps"],
        "tokens_per_round": round(m["spec_decode_acceptance_length"], 3),
    }


def operations() -> dict:
    """The throughput case on ``kind: operations`` (the model's operations tabulated for the engine)."""
    return throughput({"kind": "operations", "gpu": "h100-sxm", "model": "qwen3-8b"})


def azure() -> dict:
    quickstart = yaml.safe_load((ROOT / "scenarios" / "quickstart.yaml").read_text())
    data = {**quickstart, "name": "bench-azure",
            "workload": {"kind": "trace", "path": "azure-conv-2023", "domains": quickstart["workload"]["domains"]}}
    outcomes = _simulate(data)
    return {o.name: {"sim_wall_s": round(o.metrics["sim_wall_s"], 2), "requests": o.metrics["completed"],
                     "engine_steps": o.metrics["num_steps"]} for o in outcomes}


def memory() -> dict:
    data = {
        "name": "bench-memory",
        "seed": 3,
        "workload": {"kind": "poisson", "rate": 400.0, "num_requests": 1_000_000,
                     "prompt_tokens": {"dist": "uniform", "low": 32, "high": 512},
                     "output_tokens": {"dist": "uniform", "low": 1, "high": 32},
                     "domains": {"chat": 0.5, "code": 0.5}},
        "hardware": PROFILE,
        "engine": {"max_num_seqs": 256, "max_batch_tokens": 8192},
        "acceptance": PRESET,
        "arms": [{"name": "no-spec", "method": "none"},
                 {"name": "dspark-hw", "method": "dspark", "gamma": 7, "scheduler": {"kind": "hardware_aware"}}],
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "memory.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "simlab", "run", str(path), "--out", str(Path(tmp) / "out"),
                        "--quiet", "--jobs", "1"], check=True)
        wall_s = time.perf_counter() - started
        size_mb = sum(f.stat().st_size for f in (Path(tmp) / "out").iterdir()) / 2**20
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"requests": 1_000_000, "arms": 2, "peak_rss_mib": round(peak_kib / 1024, 1),
            "wall_s": round(wall_s, 1), "results_mib": round(size_mb, 1)}


MATRIX_OUTPUT_TOKENS = {"short": 128, "long": 1000}
MATRIX_TOTAL_OUTPUT_TOKENS = 1_500_000


def _matrix_case(domain: str, output: str, lengths: str, loop: str, rate: float | None = None) -> dict:
    mean_out = MATRIX_OUTPUT_TOKENS[output]
    if lengths == "constant":
        prompt = {"dist": "constant", "value": 256}
        out = {"dist": "constant", "value": mean_out}
    else:
        prompt = {"dist": "uniform", "low": 128, "high": 384}
        out = {"dist": "uniform", "low": mean_out // 2, "high": mean_out * 3 // 2}
    num_requests = MATRIX_TOTAL_OUTPUT_TOKENS // mean_out
    if loop == "closed":
        workload = {"kind": "closed_loop", "concurrency": 128}
    else:
        workload = {"kind": "poisson", "rate": rate}
    workload.update({"num_requests": num_requests, "prompt_tokens": prompt, "output_tokens": out,
                     "domains": {domain: 1.0}})
    return {
        "name": "bench-matrix", "seed": 1, "workload": workload, "hardware": PROFILE,
        "engine": {"max_num_seqs": 256, "max_batch_tokens": 16384}, "acceptance": PRESET,
        "arms": [{"name": "dspark-hw", "method": "dspark", "gamma": 7, "scheduler": {"kind": "hardware_aware"}}],
    }


def matrix() -> dict:
    """Every case of the matrix; an open loop arrives at 80 % of the rate its closed-loop twin completed."""
    rows = {}
    for domain in ("chat", "math"):
        for output in ("short", "long"):
            for lengths in ("constant", "varied"):
                closed_rate = None
                for loop in ("closed", "open"):
                    (outcome,) = _simulate(_matrix_case(domain, output, lengths, loop, closed_rate))
                    m = outcome.metrics
                    if loop == "closed":
                        closed_rate = round(0.8 * m["request_throughput"], 3)
                    tokens = int(outcome.requests.output_tokens.sum())
                    name = f"{domain}/{output}/{lengths}/{loop}"
                    rows[name] = {
                        "output_tokens": tokens, "sim_wall_s": round(m["sim_wall_s"], 3),
                        "output_tokens_per_wall_s": round(tokens / m["sim_wall_s"]),
                        "engine_steps": m["num_steps"],
                        "us_per_step": round(1e6 * m["sim_wall_s"] / m["num_steps"], 1),
                        "mean_batch_requests": round(m["mean_batch_requests"], 1),
                    }
                    print(name, rows[name], flush=True)
    return rows


def disaggregation() -> dict:
    """The same 8 GPUs co-located and as 4:4 prefill/decode pools, on 3,000 Azure requests at 47 requests/s: the
    wall per arm of each (the pools' blocks stop at every prefill iteration's end, so they are shorter)."""
    study = yaml.safe_load((ROOT / "scenarios" / "studies" / "disaggregation.yaml").read_text())
    split = study["sweep"]["zip"]["engine.disaggregation"][3]
    rows = {}
    for label, engine in (("co-located-8", {}), ("pools-4-4", {"replicas": 1, "disaggregation": split})):
        data = {key: value for key, value in study.items() if key != "sweep"}
        data = {**data, "name": f"bench-{label}", "engine": {**study["engine"], **engine}}
        for o in _simulate(data):
            rows[f"{label}/{o.name}"] = {"sim_wall_s": round(o.metrics["sim_wall_s"], 2),
                                         "engine_steps": o.metrics["num_steps"]}
    return rows


BENCHMARKS = {"throughput": throughput, "operations": operations, "azure": azure, "memory": memory, "matrix": matrix,
              "disaggregation": disaggregation}


def main(names: list[str]) -> None:
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        sys.exit(f"unknown benchmark {unknown[0]!r}; valid: {', '.join(BENCHMARKS)}")
    results = {"machine": {"cpu": _cpu_name(), "cores": _cores(), "python": platform.python_version()}}
    for name in names or list(BENCHMARKS):
        started = time.perf_counter()
        results[name] = BENCHMARKS[name]()
        results[name]["benchmark_wall_s"] = round(time.perf_counter() - started, 1)
        print(name, json.dumps(results[name], indent=1), flush=True)
    print(json.dumps(results, indent=1))


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


if __name__ == "__main__":
    main(sys.argv[1:])
