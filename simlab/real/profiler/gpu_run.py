"""The profiling run behind scripts/gpu_profile.sh: its grid, a time estimate, the run and a check of the file.

    python scripts/gpu_profile.py                # bf16 random-weight Qwen3-8B + 5-layer DSpark drafter on CUDA
    python scripts/gpu_profile.py --dry-run      # the same pipeline on CPU with the tiny model (seconds)
    python scripts/gpu_profile.py --estimate     # only print the estimated H200 time of the GPU grid
    python scripts/gpu_profile.py --compare      # roofline (old constants, calibrated) vs the measured profile

The GPU grid: batch tokens 1..8192 (every power of two and every vLLM capture size up to 512: 55 sizes) x TOTAL
context tokens 512..8192 (doubling), then 32768, 131072 and 524288, so that the table also covers loaded steps
(e.g. 128 requests x 4096 tokens; an H200 holds about 800k tokens of Qwen3-8B KV); requests carry 1 + gamma = 8
tokens (see docs/profiling.md). The profiler's
time guard (``--time-budget-s``) stops adding points before the budget runs out and lists what it skipped.
"""

from __future__ import annotations

from pathlib import Path

from simlab.hardware.specs import GPUS
from simlab.real.config import TARGET_PRESETS
from simlab.real.profiler.spec import ProfileSpec, build_spec, place_verify

REPO = Path(__file__).resolve().parents[3]

DEFAULT_OUT = REPO / "hw_profiles" / "h200_qwen3-8b_measured.yaml"
DRY_RUN_OUT = Path("/tmp/simlab_gpu_profile_dry_run.yaml")
MODEL, DRAFTER, DTYPE, GAMMA = "qwen3-8b", "dspark:5", "bfloat16", 7
MAX_BATCH_TOKENS = 8192
CONTEXTS = (512, 1024, 2048, 4096, 8192, 32768, 131072, 524288)  # total KV tokens read by a step
REPLAYS, WARMUP = 5, 2
BUDGET_S = 360.0  # measuring; start-up (imports, CUDA, random weights) and the check come on top

# Assumptions of the estimate (an H200 with a fast host; the time guard enforces the budget whatever they are)
ROOFLINE_PROFILE = REPO / "hw_profiles" / "h200_qwen3-8b.yaml"
OPS_PER_TARGET_LAYER = 50        # aten ops one verify layer dispatches (counted on CPU with a dispatch mode)
HOST_US_PER_OP = 10.0            # eager dispatch + launch per op: eager runs (warm-ups, capture) are host-bound
GRAPH_US_PER_OP = 2.0            # floor per kernel inside a CUDA-graph replay
POINT_OVERHEAD_S = 0.08          # per point: build, gc + empty_cache around capture, graph instantiation
ATTENTION_TRAFFIC = 11.0         # context K/V bytes moved per step / bytes cached: gather (r+w), GQA x4 (r+w), read
BW_EFFICIENCY = 0.8
STARTUP_S = 25.0                 # python + torch import, CUDA context, random weights on the meta device -> GPU


def gpu_args(out: Path, budget_s: float) -> list[str]:
    """The profile command's arguments for the GPU run."""
    return ["--device", "cuda", "--model", MODEL, "--drafter", DRAFTER, "--dtype", DTYPE, "--gamma", str(GAMMA),
            "--max-batch-tokens", str(MAX_BATCH_TOKENS), "--contexts", ",".join(map(str, CONTEXTS)),
            "--replays", str(REPLAYS), "--warmup", str(WARMUP), "--time-budget-s", str(budget_s), "--out", str(out)]


def dry_run_args(out: Path) -> list[str]:
    """The same pipeline on CPU: tiny target, one-layer DSpark drafter, the quick grid, one thread."""
    return ["--device", "cpu", "--model", "tiny", "--drafter", "dspark:1", "--quick", "--threads", "1",
            "--time-budget-s", "60", "--out", str(out)]


def gpu_spec(budget_s: float = BUDGET_S) -> ProfileSpec:
    """The spec the GPU run measures (the same defaults the command applies to :func:`gpu_args`)."""
    return build_spec(device="cuda", dtype=DTYPE, gamma=GAMMA, max_batch_tokens=MAX_BATCH_TOKENS, contexts=CONTEXTS,
                      warmup=WARMUP, replays=REPLAYS, time_budget_s=budget_s)


def estimate_s(spec: ProfileSpec) -> dict[str, float]:
    """Seconds per phase of ``spec`` on an H200, from the roofline profile's step times and the assumptions above."""
    from simlab.hardware import load_profile

    roofline = load_profile(ROOFLINE_PROFILE)
    config = TARGET_PRESETS[MODEL]
    bandwidth = GPUS["h200"].hbm_bytes_per_s * BW_EFFICIENCY
    target_ops = OPS_PER_TARGET_LAYER * config.num_hidden_layers + 20
    draft_ops = OPS_PER_TARGET_LAYER * 5 + 20

    def point(step_s: float, ops: int) -> float:
        eager = max(step_s, ops * HOST_US_PER_OP * 1e-6)
        replay = max(step_s, ops * GRAPH_US_PER_OP * 1e-6)
        return POINT_OVERHEAD_S + (spec.warmup + 1) * eager + spec.replays * replay

    phases: dict[str, float] = {"start-up": STARTUP_S}
    for context in spec.context_tokens:
        total = 0.0
        for batch in spec.batch_tokens:
            queries, _ = place_verify(batch, context, spec.query_tokens_per_request)
            step = roofline.verify_s(batch, context, len(queries))
            step += context * config.kv_bytes_per_token() * ATTENTION_TRAFFIC / bandwidth
            total += point(step, target_ops)
        phases[f"verify C={context}"] = total
    ctx = spec.draft_context_per_request
    draft_kv_per_token = 5 * config.kv_bytes_per_token() / config.num_hidden_layers  # 5 draft layers' context K/V

    def context_s(requests: int, layers: int) -> float:  # the drafter's injected context, moved as in verify
        return requests * ctx * draft_kv_per_token * layers / 5 * ATTENTION_TRAFFIC / bandwidth

    phases["drafter"] = sum(point(roofline.draft_s("dflash", g, r) + context_s(r, 5), draft_ops)
                            for g in spec.draft_gammas for r in spec.draft_requests)
    phases["drafter"] += sum(point(roofline.draft_s("dspark", 1, r) - roofline.draft_s("dflash", 1, r), 6)
                             + point(roofline.draft_s("eagle3", 1, r) + context_s(r, 1), 70)
                             for r in spec.draft_requests)
    phases["prefill"] = sum(point(roofline.prefill_s(p), target_ops) for p in spec.prefill_chunks)
    return phases


def print_estimate(spec: ProfileSpec) -> float:
    phases = estimate_s(spec)
    total = sum(phases.values())
    print(f"estimated H200 time of the GPU grid ({len(spec.batch_tokens)} batch sizes x {len(spec.context_tokens)} "
          f"contexts + drafter + prefill):", flush=True)
    for name, seconds in phases.items():
        print(f"  {name:18s} {seconds:7.1f} s", flush=True)
    print(f"  {'total':18s} {total:7.1f} s (measuring budget {spec.time_budget_s:.0f} s; the time guard skips what "
          "does not fit)", flush=True)
    return total


def check(out: Path, *, expect_device: str) -> None:
    """Load the written profile as the simulator would and print its headline numbers."""
    from simlab.hardware import build_cost_model

    cm = build_cost_model(str(out.resolve()), base_dir=REPO, file=None)
    provenance = cm.config.provenance
    if not provenance.get("measured") or provenance["device"]["type"] != expect_device:
        raise SystemExit(f"gpu_profile: {out} does not look like a {expect_device} measurement")
    verify = cm.config.verify
    first, last = verify.context_tokens[0], verify.context_tokens[-1]
    print(f"check: {out} loads as a simulator profile ({len(verify.batch_tokens)} batch sizes x "
          f"{len(verify.context_tokens)} contexts, complete: {provenance['complete']}, "
          f"{len(provenance.get('skipped', []))} skipped)")
    for b in sorted({b for b in (1, 64, 512, 8192) if b <= verify.batch_tokens[-1]} | {verify.batch_tokens[-1]}):
        print(f"  verify B={b}: {cm.verify_s(b, first) * 1e3:.3f} ms at C={first}, "
              f"{cm.verify_s(b, last) * 1e3:.3f} ms at C={last}")
    print(f"  dspark gamma=7 draft R=1: {cm.draft_s('dspark', 7, 1) * 1e3:.3f} ms; prefill "
          f"{cm.prefill_s(1000) * 1e3:.3f} ms per 1000 tokens")


COMPARE_POINTS = ((1, 512), (64, 512), (512, 512), (8192, 512), (64, 131072), (512, 131072))


def uncalibrated_profile():
    """The H200 Qwen3-8B roofline with ``calibration: none`` (the old constants), as the same kind of table."""
    from simlab.config.hardware import RooflineHardware, TableHardware
    from simlab.hardware.export import table_dict
    from simlab.hardware.roofline_build import build_roofline
    from simlab.hardware.table import TableCostModel

    cm = build_roofline(RooflineHardware(kind="roofline", gpu="h200", model=MODEL, calibration="none"))
    return TableCostModel(TableHardware.model_validate(table_dict(cm, generator="scripts/gpu_profile.py")))


def comparison(measured: Path | None) -> str:
    """A Markdown table: the H200 roofline with the old constants and calibrated (the shipped profile) against a
    measured profile (or a placeholder column)."""
    from simlab.hardware import load_profile

    columns = [uncalibrated_profile(), load_profile(ROOFLINE_PROFILE)]
    other = load_profile(measured) if measured is not None else None

    def cell(value_s: float | None, scale: float = 1e3, digits: int = 3) -> str:
        return "not yet measured" if value_s is None else f"{value_s * scale:.{digits}f}"

    def row(label: str, value, scale: float = 1e3, digits: int = 3) -> str:
        cells = [cell(value(cm), scale, digits) for cm in columns] + [cell(value(other) if other else None, scale,
                                                                          digits)]
        return f"| {label} | " + " | ".join(cells) + " |"

    rows = ["| quantity | roofline, `calibration: none` | calibrated (`h200_qwen3-8b`) | measured |",
            "|---|---|---|---|"]
    for b, c in COMPARE_POINTS:
        rows.append(row(f"verify ms, B={b}, total context {c}", lambda cm, b=b, c=c: cm.verify_s(b, c)))
    for method, r in (("dflash", 1), ("dspark", 1), ("dspark", 128), ("eagle3", 1)):
        name = "autoregressive (eagle3/mtp), 7 steps" if method == "eagle3" else f"{method}, gamma 7"
        rows.append(row(f"draft ms, {name}, R={r}", lambda cm, m=method, r=r: cm.draft_s(m, 7, r)))
    rows.append(row("prefill us/token", lambda cm: cm.prefill_s(1), 1e6, 2))
    kv = other.kv_cache_tokens() if other else None
    measured_kv = "not yet measured" if other is None else (kv if kv is not None else "not recorded")
    rows.append(
        f"| kv_cache_tokens | {columns[0].kv_cache_tokens()} | {columns[1].kv_cache_tokens()} | {measured_kv} |"
    )
    return "\n".join(rows)
