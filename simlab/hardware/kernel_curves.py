"""The per-operation roofline: an operation's time is ``floor_s + ideal_s / efficiency``, ``ideal_s`` the datasheet
roofline ``max(bytes / HBM bandwidth, FLOPs / dense bf16 peak)``, the floor and efficiency fitted per kernel family
on measured kernels (aiconfigurator-core's database: scripts/fit_kernel_curves.py writes hw_profiles/kernels/) and
shipped as data, so a default install needs no database (docs/operations.md).

GEMMs take an efficiency by M (their token count; fp8 GEMMs their own curve against the fp8 peak); decode
attention and state updates the decode attention's (both read a cache once; over an fp8 KV cache its own curve),
prefill attention its own by FLOPs; a mixture of experts' routed experts the fused MoE kernel's curve (by tokens per
touched expert; its floor holds the routing and permutation kernels), else one grouped GEMM; all-reduces the custom
all-reduce's fitted floor and bandwidth for their tensor-parallel size, else the link bandwidth (a ring's two passes)
and a 10 us latency; expert parallelism's dispatch and combine DeepEP's fitted floor and bandwidth, else the
roofline's default all-to-all (its latency, its share of the link's bandwidth); elementwise kernels and the sampler
the GEMM floor and their bytes at the decode attention's efficiency.
A GPU without curves takes those of the GPU its file names (``calibrated_like``), else the H100's.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from simlab.common.resources import shipped_dir
from simlab.common.yaml_file import read_yaml

ALLREDUCE_LATENCY_S = 10e-6
ALLTOALL_FALLBACK = (4.165e-05, 0.42)  # RooflineParams' default all-to-all: latency, share of the link's bandwidth
DEFAULT_CURVES_GPU = "h100-sxm"


@dataclass(frozen=True)
class KernelCurves:
    """One GPU's fitted curves, applied to that GPU's datasheet figures."""

    gpu: str
    hbm_bytes_per_s: float
    bf16_flop_per_s: float
    link_bytes_per_s: float
    tensor_parallel: int
    gemm_floor_s: float
    gemm_log2_m: tuple[float, ...]
    gemm_efficiency: tuple[float, ...]
    decode_floor_s: float
    decode_efficiency: float
    prefill_floor_s: float
    prefill_efficiency: float
    source: str
    fp8_flop_per_s: Optional[float] = None
    fp8_floor_s: Optional[float] = None  # fp8 GEMMs (None: no fp8 curve for this GPU's file)
    fp8_log2_m: tuple[float, ...] = ()
    fp8_efficiency: tuple[float, ...] = ()
    moe: dict = field(default_factory=dict)  # by dtype: (floor_s, log2 tokens per expert, efficiency); none: GEMMs
    allreduce: dict = field(default_factory=dict)  # by tensor-parallel size: (floor_s, bytes_per_s)
    decode_fp8_kv: Optional[tuple[float, float]] = None  # decode attention over an fp8 KV cache: (floor_s, efficiency)
    alltoall: dict = field(default_factory=dict)  # expert parallelism's dispatch and combine: (floor_s, bytes_per_s)
    moe_kernels: dict = field(default_factory=dict)  # by dtype: the fused MoE kernel its curve was fitted on

    def decode_curve(self, kv_dtype: str = "bf16") -> tuple[float, float]:
        """(floor_s, efficiency) of decode attention over a KV cache of ``kv_dtype``: the fp8-KV curve where the
        GPU's file has one, else the bf16 one."""
        if kv_dtype == "fp8" and self.decode_fp8_kv is not None:
            return self.decode_fp8_kv
        return self.decode_floor_s, self.decode_efficiency

    def ideal_s(self, op) -> float:
        return max(op.bytes / self.hbm_bytes_per_s, op.flops / self.bf16_flop_per_s)

    def seconds(self, op) -> float:
        """One run of ``op`` (an :class:`~simlab.hardware.operations.Operation`)."""
        if op.kind == "moe":
            if op.dtype in self.moe:
                floor, grid, efficiency = self.moe[op.dtype]
                peak = self.fp8_flop_per_s if op.dtype == "fp8" else self.bf16_flop_per_s
                ideal = max(op.bytes / self.hbm_bytes_per_s, op.flops / peak)
                return floor + ideal / float(np.interp(math.log2(max(op.m, 1)), grid, efficiency))
            op = dataclasses.replace(op, kind="gemm")  # no fused-MoE curve: one grouped GEMM
        if op.kind == "gemm" and op.dtype == "fp8":
            if self.fp8_floor_s is None or not self.fp8_flop_per_s:
                raise ValueError(f"no fp8 GEMM curve for {self.gpu} ({self.source})")
            efficiency = float(np.interp(math.log2(max(op.m, 1)), self.fp8_log2_m, self.fp8_efficiency))
            ideal = max(op.bytes / self.hbm_bytes_per_s, op.flops / self.fp8_flop_per_s)
            return self.fp8_floor_s + ideal / efficiency
        if op.kind == "gemm":
            efficiency = float(np.interp(math.log2(max(op.m, 1)), self.gemm_log2_m, self.gemm_efficiency))
            return self.gemm_floor_s + self.ideal_s(op) / efficiency
        if op.kind == "prefill_attention":
            return self.prefill_floor_s + self.ideal_s(op) / self.prefill_efficiency
        if op.kind in ("attention", "state"):
            floor, efficiency = self.decode_curve(op.dtype if op.kind == "attention" else "bf16")
            return floor + self.ideal_s(op) / efficiency
        if op.kind == "allreduce":
            tp = self.tensor_parallel
            if tp in self.allreduce:
                floor, bandwidth = self.allreduce[tp]
                return floor + op.bytes / bandwidth
            return ALLREDUCE_LATENCY_S + 2.0 * (tp - 1) / tp * op.bytes / self.link_bytes_per_s
        if op.kind == "alltoall":
            if op.name in self.alltoall:
                floor, bandwidth = self.alltoall[op.name]
                return floor + op.bytes / bandwidth
            latency, share = ALLTOALL_FALLBACK
            return latency + op.bytes / (self.link_bytes_per_s * share)
        return self.gemm_floor_s + op.bytes / self.hbm_bytes_per_s / self.decode_efficiency


def measured_families(curves: KernelCurves, precision: str = "bf16", kv_precision: str = "bf16",
                      alltoall: bool = False) -> dict[str, str]:
    """Each kernel family a step of ``precision`` runs, and what prices it: the curve fitted on measured kernels
    (its file), or the fallback where the database held none for that GPU."""
    out = {"gemm": curves.source if precision == "bf16" or curves.fp8_floor_s is not None else "none",
           "decode and prefill attention": curves.source}
    if kv_precision == "fp8":
        out["decode attention over an fp8 KV cache"] = (
            curves.source if curves.decode_fp8_kv is not None
            else "the bf16 KV cache's curve (no fp8 KV rows for this GPU), reading one byte an element")
    out["fused MoE"] = (f"{curves.source} ({curves.moe_kernels.get(precision, '')})" if precision in curves.moe
                        else "grouped GEMM (no fused-MoE rows for this GPU)")
    tp = curves.tensor_parallel
    if tp > 1:
        fallback = f"link bandwidth and {ALLREDUCE_LATENCY_S * 1e6:.0f} us (no all-reduce rows for TP {tp})"
        out["all-reduce"] = curves.source if tp in curves.allreduce else fallback
    if alltoall:
        latency, share = ALLTOALL_FALLBACK
        out["all-to-all"] = (curves.source if curves.alltoall else f"{share:.0%} of the link bandwidth and "
                             f"{latency * 1e6:.1f} us (no wide-EP rows for this GPU)")
    out["elementwise and sampler"] = "the GEMM floor and the decode attention's efficiency"
    return out


def curves_file(gpu_name: str) -> Path:
    return shipped_dir("hw_profiles") / "kernels" / f"{gpu_name}.yaml"


def load_curves(gpu, tensor_parallel: int = 1, stack: str = "vllm") -> KernelCurves:
    """The curves for ``gpu`` (a :class:`~simlab.hardware.gpu_files.GpuSpec`): its own file, else its
    ``calibrated_like`` GPU's, else the H100's, applied to its own datasheet figures; the fused MoE kernel
    ``stack``'s own (``moe_by_stack``) where the file has it, else vLLM's."""
    name = next(n for n in (gpu.name, gpu.calibrated_like, DEFAULT_CURVES_GPU) if n and curves_file(n).is_file())
    data = read_yaml(curves_file(name), what="kernel curves")
    gemm, decode, prefill = data["gemm"], data["attention"]["decode"], data["attention"]["prefill"]
    fp8_kv = data["attention"].get("decode_fp8_kv")
    fp8 = data.get("gemm_fp8") or {}
    own = (data.get("moe_by_stack") or {}).get(stack) or {}
    moe_fits = {dtype: fit for dtype, fit in (("bf16", own.get("bf16") or data.get("moe")),
                                              ("fp8", own.get("fp8") or data.get("moe_fp8"))) if fit}
    moe = {dtype: (float(fit["floor_s"]), tuple(fit["log2_tokens_per_expert"]), tuple(fit["efficiency"]))
           for dtype, fit in moe_fits.items()}
    moe_kernels = {dtype: fit.get("kernel", "") for dtype, fit in moe_fits.items()}
    allreduce = {int(tp): (float(fit["floor_s"]), float(fit["bytes_per_s"]))
                 for tp, fit in (data.get("allreduce") or {}).items() if str(tp).isdigit()}
    alltoall = {name: (float(fit["floor_s"]), float(fit["bytes_per_s"]))
                for name, fit in (data.get("alltoall") or {}).items() if name in ("dispatch", "combine")}
    return KernelCurves(
        gpu=gpu.name, hbm_bytes_per_s=gpu.hbm_bytes_per_s, bf16_flop_per_s=gpu.bf16_flop_per_s,
        link_bytes_per_s=gpu.nvlink_bytes_per_s, tensor_parallel=tensor_parallel,
        gemm_floor_s=float(gemm["floor_s"]), gemm_log2_m=tuple(gemm["log2_m"]),
        gemm_efficiency=tuple(gemm["efficiency"]), decode_floor_s=float(decode["floor_s"]),
        decode_efficiency=float(decode["efficiency"]), prefill_floor_s=float(prefill["floor_s"]),
        prefill_efficiency=float(prefill["efficiency"]), source=f"hw_profiles/kernels/{data['gpu']}.yaml",
        fp8_flop_per_s=gpu.fp8_flop_per_s, fp8_floor_s=float(fp8["floor_s"]) if fp8 else None,
        fp8_log2_m=tuple(fp8.get("log2_m", ())), fp8_efficiency=tuple(fp8.get("efficiency", ())), moe=moe,
        allreduce=allreduce, alltoall=alltoall, moe_kernels=moe_kernels,
        decode_fp8_kv=(float(fp8_kv["floor_s"]), float(fp8_kv["efficiency"])) if fp8_kv else None)
