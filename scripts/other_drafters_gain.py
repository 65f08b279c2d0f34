"""Speculation's gain of the other drafters (ngram, suffix, draft_model) on simlab against public measurements
(issue 49; docs/hardware.md, "The other drafters against public runs"). Each row: a public run as stated by its
source, simlab's closed loop of the same users, lengths, GPU and engine release where the source names them (the
reading where it does not, said in the row), and |simulated / measured - 1| of the gain (throughput or TPOT ratio
against no speculation).

Usage: python scripts/other_drafters_gain.py [--quick]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import yaml

# (label, source, hardware, users, prompt, output, domain, arm, measured gain, what is compared)
RUNS = [
    ("n-gram, ShareGPT, low load", "Arctic Inference docs (vLLM 0.8.4; decode tok/s 76.0 -> 91.2; model and GPU not "
     "stated: read as Llama-3.1-8B on one H100, vLLM 0.13.0, 1 user, 5 drafts)",
     {"gpu": "h100-sxm", "model": "llama-3.1-8b", "stack_version": "0.13.0"}, 1, 600, 300, "chat",
     {"method": "ngram", "gamma": 5}, 91.2 / 76.0),
    ("suffix, ShareGPT, low load", "Arctic Inference docs (76.0 -> 113 tok/s; read as above)",
     {"gpu": "h100-sxm", "model": "llama-3.1-8b", "stack_version": "0.13.0"}, 1, 600, 300, "chat",
     {"method": "suffix", "gamma": 5}, 113.0 / 76.0),
    ("n-gram, summarization, 256 running", "AgentSpec (Qwen3-8B, vLLM 0.12.0, A100 80 GB, max_num_seqs 256, "
     "5 drafts, lookup_max 4: goodput 0.85x; read as a closed loop of 256 users, vLLM 0.13.0, 1,500/250 tokens)",
     {"gpu": "a100-80g", "model": "qwen3-8b", "stack_version": "0.13.0"}, 256, 1500, 250, "summarization",
     {"method": "ngram", "gamma": 5}, 0.85),
    ("n-gram, math, 256 running", "AgentSpec (as above: 0.90x; 300/250 tokens)",
     {"gpu": "a100-80g", "model": "qwen3-8b", "stack_version": "0.13.0"}, 256, 300, 250, "math",
     {"method": "ngram", "gamma": 5}, 0.90),
    ("n-gram, chat, 256 running", "AgentSpec (as above, multi-turn conversation: 0.62x; 600/250 tokens)",
     {"gpu": "a100-80g", "model": "qwen3-8b", "stack_version": "0.13.0"}, 256, 600, 250, "chat",
     {"method": "ngram", "gamma": 5}, 0.62),
    ("suffix, chat, 256 running", "AgentSpec (Qwen3-8B, suffix, 32 drafts: 1.07x; read at 16 drafts, simlab's most)",
     {"gpu": "a100-80g", "model": "qwen3-8b", "stack_version": "0.13.0"}, 256, 600, 250, "chat",
     {"method": "suffix", "gamma": 16}, 1.07),
    ("draft model, ShareGPT, QPS 1", "vLLM blog 2024-10-17 (Llama-3-70B on 4 H100s, Qwama-0.5B drafting: up to 1.5x "
     "at QPS 1; read as 1 user, Llama-3.2-1B drafting 4, vLLM 0.34.0)",
     {"gpu": "h100-sxm", "model": "llama-3-70b", "tensor_parallel": 4}, 1, 600, 300, "chat",
     {"method": "draft_model", "gamma": 4, "draft_model": "llama-3.2-1b"}, 1.5),
]


def simulate_gain(hardware: dict, users: int, prompt: int, output: int, domain: str, arm: dict, requests: int):
    from simlab.config.loading import load_scenario
    from simlab.runner import build, simulate_all

    data = {"name": "gain", "seed": 7,
            "workload": {"kind": "closed_loop", "concurrency": users, "num_requests": requests,
                         "prompt_tokens": {"dist": "constant", "value": prompt},
                         "output_tokens": {"dist": "constant", "value": output}, "domains": {domain: 1.0}},
            "hardware": {"kind": "roofline", **hardware}, "acceptance": {"kind": "preset", "name": "qwen3-8b"},
            "arms": [{"name": "base", "method": "none"}, {"name": "spec", **arm}]}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "scenario.yaml"
        path.write_text(yaml.safe_dump(data))
        outcomes = {o.name: o.metrics for o in simulate_all(build(load_scenario(path)), jobs=1)}
    return outcomes["spec"]["output_throughput"] / outcomes["base"]["output_throughput"]


def main(quick: bool) -> None:
    print("| run | measured gain | simulated | error | source, and how simlab reads it |")
    print("|---|---|---|---|---|")
    for label, source, hardware, users, prompt, output, domain, arm, measured in RUNS:
        requests = max(4 * users, 40 if quick else 120)
        gain = simulate_gain(hardware, users, prompt, output, domain, arm, requests)
        print(f"| {label} | {measured:.2f}x | {gain:.2f}x | {gain / measured - 1:+.0%} | {source} |", flush=True)


if __name__ == "__main__":
    main("--quick" in sys.argv)
