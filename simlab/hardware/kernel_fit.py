"""Fit the per-operation roofline's efficiency curves on aiconfigurator-core's silicon database (the aic extra) and
write hw_profiles/kernels/<gpu>.yaml, which simlab.hardware.kernel_curves reads (docs/operations.md).

    python scripts/fit_kernel_curves.py            # every GPU the database and simlab both know
    python scripts/fit_kernel_curves.py h100-sxm   # one

Each kernel family is priced as ``floor_s + ideal_s / efficiency``, ``ideal_s`` the datasheet roofline
``max(bytes / HBM bandwidth, FLOPs / dense bf16 peak)``:

- GEMM (bf16, ``torch.nn.functional.linear`` or vLLM 0.14's default; and fp8, vLLM's per-tensor CUTLASS kernel,
  against the fp8 peak, as ``gemm_fp8``): efficiency by M (log2 buckets of the token
  count), the median of ``ideal / (latency - floor)`` over the rows whose ideal time is at least 30 us; the floor
  the median latency of the rows whose ideal time is under 1 us;
- decode attention (FlashAttention, bf16 KV; and fp8 KV, one byte an element, as ``decode_fp8_kv``): efficiency
  of the KV read, the median over rows of at least 30 us;
- prefill attention: efficiency of the FLOPs, likewise;
- the fused MoE layer (vLLM's default kernel, bf16 and fp8, balanced routing): efficiency by tokens per touched
  expert, floor from the rows under 10 us; and SGLang's and TensorRT-LLM's own default kernels as ``moe_by_stack``;
- the custom all-reduce (graph-captured), per tensor-parallel size: a latency floor and a bandwidth;
- expert parallelism's all-to-all (DeepEP's low-latency dispatch and combine, SGLang's wide-EP, one node of 8 GPUs):
  a latency floor and a bandwidth each, over the bytes a GPU's tokens send to their experts.

The fit's error on every row of the database (median and 90th percentile of |predicted / measured - 1|) is written
beside the curves.
"""

from __future__ import annotations

import re
import sys
from datetime import date
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "hw_profiles" / "kernels"
SYSTEMS = {"a100-80g": "a100_sxm", "h100-sxm": "h100_sxm", "h200": "h200_sxm", "b200": "b200_sxm",
           "b300": "b300_sxm", "gb200": "gb200", "l40s": "l40s", "rtx-pro-6000": "rtx_pro_6000_server"}
BIG_S, SMALL_S = 30e-6, 1e-6


def _database(system: str, family: str, name: str):
    """The newest release's ``name`` rows of the first backend that has them (vLLM, SGLang, TensorRT-LLM)."""
    for backend in ("vllm", "sglang", "trtllm"):
        for found in _releases(system, family, backend, name):
            return found
    raise FileNotFoundError(f"no {name} for {system}")


def _releases(system: str, family: str, backend: str, name: str):
    """``backend``'s ``name`` rows per release, newest first (releases compared as versions): (rows, source)."""
    import aiconfigurator_core
    import pandas as pd

    root = Path(aiconfigurator_core.__file__).parent / "systems" / "data" / system / family
    for path in sorted(root.glob(f"{backend}/*/{name}"), key=_version_key, reverse=True):
        yield pd.read_parquet(path), f"{system}/{family}/{backend}/{path.parent.name}"


def _version_key(path: Path) -> tuple:
    """A release folder's name as numbers (0.5.12 after 0.5.6.post2, 1.3.0rc23 after 1.3.0rc10)."""
    return tuple(int(part) for part in re.findall(r"\d+", path.parent.name))


def _errors(predicted, measured) -> dict:
    err = np.abs(np.asarray(predicted) / np.asarray(measured) - 1.0)
    return {"rows": int(len(err)), "median_abs_error": round(float(np.median(err)), 4),
            "p90_abs_error": round(float(np.quantile(err, 0.9)), 4)}


FP8_KERNEL = "CutlassFP8ScaledMMLinearKernel"  # per-tensor scaled fp8 weights and activations, bf16 output


def gemm_rows(df, dtype: str):
    """The GEMM rows simlab reads of ``dtype``: vLLM's per-tensor fp8 kernel, or its default bf16 linear."""
    if dtype == "fp8":
        return df[(df.gemm_dtype == "fp8") & (df.kernel_source == FP8_KERNEL)]
    return df[(df.gemm_dtype == "bfloat16") & df.kernel_source.isin(["torch.nn.functional.linear", "vllm_default"])]


def fit_gemm(system: str, bw: float, peak: float, dtype: str = "bf16") -> dict:
    df, source = _database(system, "gemm", "gemm_perf.parquet")
    d = gemm_rows(df, dtype)
    if d.empty:
        return {}
    t = d.latency.to_numpy() * 1e-3
    m, n, k = (d[c].to_numpy().astype(float) for c in ("m", "n", "k"))
    element = 1.0 if dtype == "fp8" else 2.0  # weights and activations in; the output is bf16
    ideal = np.maximum((element * (m * k + k * n) + 2.0 * m * n) / bw, 2.0 * m * n * k / peak)
    floor = float(np.median(t[ideal < SMALL_S]))
    bucket = np.round(np.log2(m) * 2.0) / 2.0
    grid = sorted(set(bucket[ideal >= BIG_S]))
    eff = [float(np.median(ideal[(bucket == b) & (ideal >= BIG_S)] / (t[(bucket == b) & (ideal >= BIG_S)] - floor)))
           for b in grid]
    predicted = floor + ideal / np.interp(bucket, grid, eff)
    llm = (n >= 1024) & (k >= 1024) & (m <= 4096)
    return {"source": source, "floor_s": round(floor, 9), "log2_m": [float(b) for b in grid],
            "efficiency": [round(e, 4) for e in eff], "error_all_rows": _errors(predicted, t),
            "error_llm_shapes": _errors(predicted[llm], t[llm])}


def fit_attention(system: str, bw: float, peak: float) -> dict:
    out = {}
    for phase, name, kv_dtype in (("decode", "generation_attention_perf.parquet", "bfloat16"),
                                  ("prefill", "context_attention_perf.parquet", "bfloat16"),
                                  ("decode_fp8_kv", "generation_attention_perf.parquet", "fp8")):
        df, source = _database(system, "attention", name)
        d = df[df.kv_cache_dtype == kv_dtype]
        if d.empty:
            continue
        element = 1.0 if kv_dtype == "fp8" else 2.0
        if "window_size" in d:
            d = d[d.window_size == 0]
        if "step" not in d:
            d = d.assign(step=0)
        t = d.latency.to_numpy() * 1e-3
        b, heads, kv_heads, dim = (d[c].to_numpy().astype(float) for c in
                                   ("batch_size", "num_heads", "num_key_value_heads", "head_dim"))
        if phase.startswith("decode"):
            context = (d.isl + d.step).to_numpy().astype(float)
            ideal = np.maximum(b * context * 2 * kv_heads * dim * element / bw, b * context * 4 * heads * dim / peak)
        else:
            isl = d.isl.to_numpy().astype(float)
            ideal = b * isl * isl / 2 * 4 * heads * dim / peak  # causal: half the pairs
        floor = float(np.median(t[ideal < SMALL_S])) if (ideal < SMALL_S).any() else float(t.min())
        big = ideal >= BIG_S
        eff = float(np.median(ideal[big] / (t[big] - floor)))
        out[phase] = {"source": source, "floor_s": round(floor, 9), "efficiency": round(eff, 4),
                      "error_all_rows": _errors(floor + ideal / eff, t)}
    return out


# the fused MoE kernels read, first found first (vLLM's default per release and GPU; SGLang's Triton kernel after)
MOE_KERNELS = {"bf16": ("vllm_unquantizedfusedmoe_triton_tritonexperts",
                        "vllm_unquantizedfusedmoe_flashinfer_trtllm_trtllmbf16experts", "vllm_fused_moe",
                        "sglang_fused_moe_triton"),
               "fp8": ("vllm_fp8moe_triton_tritonexperts", "vllm_fp8moe_flashinfer_trtllm_trtllmfp8expertsmonolithic",
                       "vllm_fused_moe", "sglang_fused_moe_triton")}
MOE_DTYPES = {"bf16": ("bfloat16",), "fp8": ("fp8_block", "fp8")}
# SGLang's and TensorRT-LLM's default MoE runners, as aiconfigurator collects them: SGLang's Triton fused MoE (its
# `auto` runner), except fp8 experts on Blackwell (SM100), where its server arguments pick FlashInfer's TensorRT-LLM
# MoE (server_args.py: DeepseekV3ForCausalLM with fp8 and no all-to-all; Qwen3 MoE in fp8 since sgl-project/sglang
# PR 13489); TensorRT-LLM's CUTLASS MoE
STACK_MOE_KERNELS = {"sglang": {"bf16": ("sglang_fused_moe_triton",), "fp8": ("sglang_fused_moe_triton",)},
                     "trtllm": {"bf16": ("moe_torch_flow_cutlass",), "fp8": ("moe_torch_flow_cutlass",)}}
BLACKWELL_MOE_KERNELS = {"sglang": {"fp8": ("sglang_flashinfer_trtllm_moe", "sglang_fused_moe_triton")}}
BLACKWELL = ("b200_sxm", "b300_sxm", "gb200")


def fit_allreduce(system: str) -> dict:
    """Per tensor-parallel size, the graph-captured custom all-reduce's latency floor and its algorithmic bandwidth
    (bytes of the message per second, the message counted in bf16 elements as the database queries it: tokens x
    hidden): the floor the median of messages up to 16 KiB, the bandwidth the median over messages of 1-64 MiB."""
    df, source = _database(system, "comm", "custom_allreduce_perf.parquet")
    d = df[df.kernel_source.str.endswith("graph") & (df.allreduce_dtype == "bfloat16")]
    out = {"source": source}
    for tp, rows in d.groupby("num_gpus"):
        message = rows.message_size.to_numpy().astype(float) * 2.0
        t = rows.latency.to_numpy() * 1e-3
        floor = float(np.median(t[message <= 16384]))
        big = (message >= 1 << 20) & (message <= 1 << 26)
        bandwidth = float(np.median(message[big] / (t[big] - floor)))
        out[int(tp)] = {"floor_s": round(floor, 9), "bytes_per_s": round(bandwidth, -6),
                        "error_all_rows": _errors(floor + message / bandwidth, t)}
    return out


def fit_alltoall(system: str) -> dict:
    """Expert parallelism's dispatch and combine: DeepEP's low-latency kernels as SGLang's newest wide-EP rows
    measure them on one node: per operation a latency floor (the median over 1-2 tokens a GPU) and a bandwidth
    (the median over rows of at least 8 MiB) of the bytes a GPU's tokens send, ``tokens x top-k`` copies of
    :func:`~simlab.hardware.moe_layout.dispatch_bytes_per_copy` (fp8 with its scales and routing metadata, as DeepEP
    dispatches) and of a bf16 hidden state (the combine)."""
    from simlab.hardware.moe_layout import dispatch_bytes_per_copy

    newest = next(_releases(system, "comm", "sglang", "wideep_deepep_ll_perf.parquet"), None)
    if newest is None:
        raise FileNotFoundError(f"no wide-EP rows for {system}")
    df, source = newest
    df = df[df.node_num == 1]
    out = {"source": source, "kernel": "deepep low-latency"}
    hidden = df.hidden_size.to_numpy().astype(float)
    copies = (df.num_token * df.num_topk).to_numpy().astype(float)
    per_copy = {"dispatch": np.array([dispatch_bytes_per_copy(h, "fp8") for h in hidden]), "combine": 2.0 * hidden}
    for op in ("dispatch", "combine"):
        t = df[f"{op}_avg_t_us"].to_numpy() * 1e-6
        nbytes = copies * per_copy[op]
        floor = float(np.median(t[df.num_token.to_numpy() <= 2]))
        big = nbytes >= 8 * 2 ** 20
        bandwidth = float(np.median(nbytes[big] / (t[big] - floor)))
        out[op] = {"floor_s": round(floor, 9), "bytes_per_s": round(bandwidth, -6),
                   "error_all_rows": _errors(floor + nbytes / bandwidth, t)}
    return out


def fit_moe(system: str, bw: float, peak: float, dtype: str = "bf16", stack: str = "vllm") -> dict:
    """The fused MoE layer (routing, the touched experts' grouped GEMMs, the activation and the combine) of the
    stack's default kernel (:data:`MOE_KERNELS`; vLLM's from the first backend with rows, another stack's from its
    own newest release), balanced routing, no expert parallelism: efficiency by tokens per touched expert (log2
    buckets), floor the median latency of rows whose ideal time is under 10 us."""
    if stack == "vllm":
        found = [_database(system, "moe", "moe_perf.parquet")]
        kernels = MOE_KERNELS[dtype]
    else:  # the newest release with rows of the stack's kernel
        kernels = STACK_MOE_KERNELS[stack][dtype]
        if system in BLACKWELL:
            kernels = BLACKWELL_MOE_KERNELS.get(stack, {}).get(dtype, kernels)
        found = _releases(system, "moe", stack, "moe_perf.parquet")
    d = None
    for df, source in found:
        for kernel in kernels:
            d = df[(df.kernel_source == kernel) & df.moe_dtype.isin(MOE_DTYPES[dtype])
                   & df.distribution.isin(["balanced", "uniform"]) & (df.moe_ep_size == 1)]
            if not d.empty:
                break
        if not d.empty:
            break
    if d is None or d.empty:
        return {}
    t = d.latency.to_numpy() * 1e-3
    tokens, hidden, inter, topk, experts, tp = (d[c].to_numpy().astype(float) for c in
                                                ("num_tokens", "hidden_size", "inter_size", "topk", "num_experts",
                                                 "moe_tp_size"))
    element = 1.0 if dtype == "fp8" else 2.0
    touched = np.minimum(experts, tokens * topk)  # balanced: the tokens' choices spread over distinct experts
    width = inter / tp
    nbytes = element * touched * 3.0 * hidden * width + 2.0 * tokens * hidden * (1.0 + topk)
    ideal = np.maximum(nbytes / bw, 2.0 * tokens * topk * 3.0 * hidden * width / peak)
    floor = float(np.median(t[ideal < 10e-6]))
    bucket = np.round(np.log2(tokens * topk / touched) * 2.0) / 2.0
    grid = sorted(set(bucket[ideal >= BIG_S]))
    eff = [float(np.median(ideal[(bucket == b) & (ideal >= BIG_S)] / (t[(bucket == b) & (ideal >= BIG_S)] - floor)))
           for b in grid]
    predicted = floor + ideal / np.interp(bucket, grid, eff)
    return {"source": source, "kernel": kernel, "floor_s": round(floor, 9),
            "log2_tokens_per_expert": [float(b) for b in grid], "efficiency": [round(e, 4) for e in eff],
            "error_all_rows": _errors(predicted, t)}


def main(argv: list[str]) -> int:
    from simlab.hardware.specs import get_gpu

    for gpu_name in argv or list(SYSTEMS):
        gpu = get_gpu(gpu_name)
        system = SYSTEMS[gpu.name]
        bw, peak = gpu.hbm_bytes_per_s, gpu.bf16_flop_per_s
        doc = {"gpu": gpu.name, "generator": "scripts/fit_kernel_curves.py", "date": date.today().isoformat(),
               "database": "aiconfigurator-core " + __import__("importlib.metadata").metadata.version(
                   "aiconfigurator-core"),
               "datasheet": {"hbm_bytes_per_s": bw, "bf16_flop_per_s": peak},
               "gemm": fit_gemm(system, bw, peak), "attention": fit_attention(system, bw, peak)}
        if gpu.fp8_flop_per_s:
            fp8 = fit_gemm(system, bw, gpu.fp8_flop_per_s, "fp8")
            if fp8:
                doc["gemm_fp8"] = fp8
        by_stack = {}
        for stack in STACK_MOE_KERNELS:
            fits = {dtype: fit_moe(system, bw, gpu.fp8_flop_per_s if dtype == "fp8" else peak, dtype, stack)
                    for dtype in ("bf16", "fp8") if dtype == "bf16" or gpu.fp8_flop_per_s}
            if any(fits.values()):
                by_stack[stack] = {dtype: fit for dtype, fit in fits.items() if fit}
        for key, fit in (("moe", lambda: fit_moe(system, bw, peak)),
                         ("moe_fp8", lambda: fit_moe(system, bw, gpu.fp8_flop_per_s, "fp8")
                          if gpu.fp8_flop_per_s else {}),
                         ("moe_by_stack", lambda: by_stack),
                         ("allreduce", lambda: fit_allreduce(system)),
                         ("alltoall", lambda: fit_alltoall(system))):
            try:
                found = fit()
            except FileNotFoundError:
                found = {}
            if found:
                doc[key] = found
        path = OUT / f"{gpu.name}.yaml"
        text = yaml.safe_dump(doc, sort_keys=False, width=120, default_flow_style=None)
        path.write_text("# Per-operation efficiency curves fitted on aiconfigurator-core's kernel timings "
                        "(docs/operations.md)\n" + text, encoding="utf-8")
        print(f"wrote {path.relative_to(REPO)}: gemm median |err| {doc['gemm']['error_llm_shapes']['median_abs_error']}"
              f", decode attention {doc['attention']['decode']['error_all_rows']['median_abs_error']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
