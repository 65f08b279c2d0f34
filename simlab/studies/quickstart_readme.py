"""Run the quickstart and write the README's quickstart table, its wall-time range and the prose that reads the
table (each between its markers): every number in that prose comes from the same run as the table.

    python scripts/readme_quickstart.py             # 3 timed runs of `simlab run scenarios/quickstart.yaml`
    python scripts/readme_quickstart.py --runs 5    # more runs for the time range
    python scripts/readme_quickstart.py --check     # exit 1 if the README's table differs from a fresh run

The table is what `simlab run` prints, less the wall-time column (it varies between runs); the sentence after
it gives the range of wall times over the runs, the machine and its load average while measuring, so a number
measured on a busy machine says so. Re-measure on a quiet machine before publishing times.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
SCENARIO = REPO / "scenarios" / "quickstart.yaml"
BEGIN = "<!-- BEGIN quickstart table: written by scripts/readme_quickstart.py -->"
END = "<!-- END quickstart table -->"
PROSE_BEGIN = "<!-- BEGIN quickstart prose: written by scripts/readme_quickstart.py from the table's run -->"
PROSE_END = "<!-- END quickstart prose -->"
ADAPTIVE_ARMS = ("dspark-async", "dspark-goodput", "dspark-adaptive")
QUIET_LOAD = 0.5  # load average per core below which the machine counts as quiet



def _span(low: float, high: float) -> str:
    """``low-high`` rounded to whole numbers, or one number when they round alike."""
    a, b = f"{low:.0f}", f"{high:.0f}"
    return a if a == b else f"{a}-{b}"

def table_text(arms: dict[str, dict]) -> str:
    """The comparison table as plain text: `simlab run`'s columns without the wall time."""
    from simlab.results.table import COLUMNS

    columns = [c for c in COLUMNS if c[1] != "sim_wall_s"]
    rows = []
    for name, metrics in arms.items():
        row = [name + ("" if metrics.get("realisable", True) else " (bound)")]
        for _, key, fmt in columns[1:]:
            value = metrics.get(key)
            row.append("-" if value is None else fmt.format(value))
        rows.append(row)
    headers = [header.split("\n") + [""] * (2 - len(header.split("\n"))) for header, _, _ in columns]
    widths = [max(len(h) for h in [*head, *(r[i] for r in rows)]) for i, head in enumerate(headers)]

    def line(cells: list[str]) -> str:
        first = cells[0].ljust(widths[0])
        return "  ".join([first, *(c.rjust(w) for c, w in zip(cells[1:], widths[1:]))]).rstrip()

    return "\n".join([line([h[0] for h in headers]), line([h[1] for h in headers]), *map(line, rows)])


def prose_text(arms: dict[str, dict], staircase: dict, slo_tpot_ms: float = 25.0) -> str:
    """What the table shows, in words, every number read from ``arms`` (the same run as the table) and from
    ``staircase``, the hardware-aware arm reading the steps' own CUDA-graph staircase (``sps: staircase``)."""
    none, fixed, hw, oracle = (arms[k] for k in ("no-spec", "dspark-fixed", "dspark-hw", "dspark-oracle"))
    best_name = max(ADAPTIVE_ARMS, key=lambda k: arms[k]["median_user_tok_s"])
    best = arms[best_name]
    lo = min(arms[k]["median_user_tok_s"] for k in ADAPTIVE_ARMS)
    hi = max(arms[k]["median_user_tok_s"] for k in ADAPTIVE_ARMS)
    gap = 1.0 - best["median_user_tok_s"] / oracle["median_user_tok_s"]
    slow = "above" if none["median_tpot_ms"] > slo_tpot_ms else "within"
    overloaded = " and the queue grows" if any("overloaded" in w for w in none.get("warnings") or ()) else ""
    lines = [
        f"Without speculation the median user gets {none['median_user_tok_s']:.0f} tokens/s: the median TPOT of "
        f"{none['median_tpot_ms']:.1f} ms is {slow} the 25 ms SLO{overloaded}, so {none['request_goodput']:.2f} "
        "requests/s meet both SLOs.",
        f"DSpark at fixed γ = 7 gives the median user {fixed['median_user_tok_s']:.0f} tokens/s (verifying "
        f"{fixed['mean_verify_tokens_per_request_step']:.2f} drafts per request and step). The schedulers that verify "
        f"fewer drafts as the batch grows, `async_topk`, `goodput` and `adaptive`, give {_span(lo, hi)} tokens/s "
        f"and {best['request_goodput']:.2f} requests/s of goodput ({best_name} is highest), "
        f"{gap:.0%} below the oracle that knows which drafts will be accepted ({oracle['median_user_tok_s']:.0f}).",
        f"The hardware-aware scheduler (Algorithm 1) reads the step-cost curve vLLM hands its adaptive verification "
        f"(`sps`, docs/schedulers.md): it verifies {hw['mean_verify_tokens_per_request_step']:.2f} drafts per "
        f"request and step and the median user gets {hw['median_user_tok_s']:.0f} tokens/s. Reading the steps' own "
        "CUDA-graph staircase instead (`sps: staircase`, a what-if), it collapses: the step cost jumps at every "
        "bucket edge, so at an edge the next token looks like a loss and the walk stops; it then verifies "
        f"{staircase['mean_verify_tokens_per_request_step']:.2f} drafts and gives "
        f"{staircase['median_user_tok_s']:.0f} tokens/s. `async_topk` and `goodput` take the best point of the "
        "whole path and step past the edges either way; `adaptive` plans the draft length over the same path.",
    ]
    tree, chain = arms.get("eagle3-tree"), arms.get("eagle3-fixed")
    if tree is not None and chain is not None:
        lines.append(
            f"EAGLE-3 with SGLang's example tree (topk 4, 16 tokens, depth 3) accepts more per round than its chain "
            f"({tree['spec_decode_acceptance_length']:.2f} tokens against "
            f"{chain['spec_decode_acceptance_length']:.2f}) "
            f"but verifies 16 tokens per request: at this load the steps grow (median TPOT "
            f"{tree['median_tpot_ms']:.1f} ms against {chain['median_tpot_ms']:.1f}), the queue builds and the median "
            f"user gets {tree['median_user_tok_s']:.0f} tokens/s against {chain['median_user_tok_s']:.0f}. "
            "Trees pay at "
            "small batches (a lone user), not here (docs/acceptance.md section 8)."
        )
    ngram, small = arms.get("ngram"), arms.get("draft-model")
    if ngram is not None and small is not None:
        lines.append(
            f"The drafters people run today: prompt lookup (vLLM's n-gram, 5 drafts) emits "
            f"{ngram['spec_decode_acceptance_length']:.2f} tokens a round on this mostly-chat traffic and gives the "
            f"median user {ngram['median_user_tok_s']:.0f} tokens/s; Qwen3-0.6B drafting 4 emits "
            f"{small['spec_decode_acceptance_length']:.2f} but gives {small['median_user_tok_s']:.0f}: its four "
            "forwards a round are paid on every step, and its weights and its own KV take room from the target's KV "
            "cache, so more requests wait (docs/acceptance.md section 9; where outputs copy their prompts, n-gram "
            "wins: docs/shipped-studies.md, lookup-code-editing)."
        )
    return "\n\n".join(textwrap.fill(line, width=116) for line in lines)


def staircase_hardware_aware(jobs: int | None = None) -> dict:
    """The quickstart's hardware-aware arm reading the steps' own CUDA-graph staircase (``sps: staircase``)."""
    import yaml

    from simlab.runner import run_scenario

    data = yaml.safe_load(SCENARIO.read_text(encoding="utf-8"))
    data["arms"] = [{**arm, "scheduler": {**arm["scheduler"], "sps": "staircase"}}
                    for arm in data["arms"] if arm["name"] == "dspark-hw"]
    return next(iter(run_scenario(data, plot=False).arms.values()))


def prose_block(prose: str) -> str:
    return f"{PROSE_BEGIN}\n{prose}\n{PROSE_END}"


def readme_prose(text: str) -> str:
    """The prose between the README's prose markers."""
    return text.split(PROSE_BEGIN, 1)[1].split(PROSE_END, 1)[0].strip("\n")


def quickstart_arms(jobs: int | None = None) -> dict[str, dict]:
    """Run the quickstart in this process and return its arms' METRICS."""
    from simlab.runner import default_jobs, run_scenario

    return run_scenario(SCENARIO, jobs=jobs or default_jobs(), plot=False).arms


def machine() -> str:
    """The CPU count and model, and whether a hypervisor is reported."""
    model, virtual = platform.processor() or platform.machine(), False
    try:
        info = Path("/proc/cpuinfo").read_text()
        model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")),
                     model)
        virtual = " hypervisor" in info
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{cores}-core {model}{' VM' if virtual else ''}, Python {platform.python_version()}"


def timed_runs(runs: int) -> tuple[list[float], list[float], dict]:
    """Wall seconds of `simlab run` on the quickstart (a fresh process each), the 1-minute load average before
    each, and the last run's arms."""
    simlab = shutil.which("simlab", path=str(Path(sys.executable).parent)) or "simlab"
    seconds, loads, arms = [], [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs):
            loads.append(os.getloadavg()[0])
            out = Path(tmp) / f"run{i}"
            start = time.perf_counter()
            subprocess.run([simlab, "run", str(SCENARIO), "--out", str(out), "-q", "--no-plot"], check=True,
                           cwd=REPO)
            seconds.append(time.perf_counter() - start)
            arms = json.loads((out / "summary.json").read_text())["arms"]
    return seconds, loads, arms


def timing_sentence(seconds: list[float], loads: list[float]) -> str:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    quiet = loads[0] / cores < QUIET_LOAD  # later loads include this script's own earlier runs
    load = f"load average {loads[0]:.1f} before the first run"
    state = f"{load}: a quiet machine" if quiet else f"{load}: other jobs were running, so these times are high"
    return (f"`simlab run scenarios/quickstart.yaml` took {_span(min(seconds), max(seconds))} s of wall time over "
            f"{len(seconds)} runs on a {machine()} ({state}).")


def block(table: str, timing: str) -> str:
    return f"{BEGIN}\n```\n{table}\n```\n\n{timing}\n{END}"


def readme_table(text: str) -> str:
    """The table between the README's markers."""
    inside = text.split(BEGIN, 1)[1].split(END, 1)[0]
    return inside.split("```\n", 1)[1].split("\n```", 1)[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="timed runs (default 3)")
    parser.add_argument("--check", action="store_true", help="only compare the README's table with a fresh run")
    args = parser.parse_args(argv)
    text = README.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        print(f"{README}: no {BEGIN} ... {END} block", file=sys.stderr)
        return 1
    if PROSE_BEGIN not in text or PROSE_END not in text:
        print(f"{README}: no {PROSE_BEGIN} ... {PROSE_END} block", file=sys.stderr)
        return 1
    if args.check:
        arms = quickstart_arms()
        fresh = table_text(arms)
        if readme_table(text) != fresh or readme_prose(text) != prose_text(arms, staircase_hardware_aware()):
            print("README.md's quickstart table or prose is stale; run scripts/readme_quickstart.py. Fresh table:\n"
                  + fresh, file=sys.stderr)
            return 1
        print("README.md's quickstart table and prose match a fresh run")
        return 0
    seconds, loads, arms = timed_runs(max(1, args.runs))
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    before, after = tail.split(PROSE_BEGIN, 1)
    after = after.split(PROSE_END, 1)[1]
    from simlab.common.outputs import write_file_atomic

    write_file_atomic(README, head + block(table_text(arms), timing_sentence(seconds, loads)) + before
                      + prose_block(prose_text(arms, staircase_hardware_aware())) + after)
    print(f"wrote {README}: {timing_sentence(seconds, loads)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
