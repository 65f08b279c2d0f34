"""What the calibrated roofline predicts for each kind of measurement (the fit's observation models).

- **operators** (one decoder layer's kernels, one at a time, over M tokens), as two totals per M: the four GEMMs
  cost ``gemm(weight bytes, FLOPs, M)`` of :mod:`simlab.hardware.knee` together (the knee is 1-homogeneous, and
  the four share their bytes-to-FLOPs ratio); the four elementwise kernels (two norms, rotary, activation) cost
  ``4 x kernel_launch_s + M x bytes per token / (BW x elementwise_efficiency)`` — exactly the per-layer parts of
  the cost model. The residual add (fused into the next norm in vLLM and SGLang) and the embedding are not used.
- **static_batch** (end-to-end latency of B requests of ``input_tokens`` prompt tokens that generate
  ``output_tokens`` each): the prompts run as prefill chunks of at most ``prefill_chunk_tokens``, then
  ``output_tokens - 1`` decode steps of B tokens, the average one at ``B x (input + output / 2)`` context tokens
  (a step is affine in its context, so the average step is exact).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from simlab.hardware.buckets import Buckets
from simlab.hardware.calibrated import CalibratedRooflineCostModel
from simlab.hardware.device import RooflineParams
from simlab.hardware.knee import gemm_array
from simlab.hardware.roofline import RooflineCostModel
from simlab.hardware.specs import BF16_BYTES, GpuSpec, ModelConfig

GEMM_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
ELEMENTWISE_OPS = ("input_layernorm", "post_attention_layernorm", "attn_rope", "mlp_act")


def gemm_params(model: ModelConfig, op: str) -> int:
    """Weight parameters of one decoder-layer GEMM (q/k/v fused, o, gate/up fused, down)."""
    h, q_dim, kv_dim = model.hidden_size, model.num_heads * model.head_dim, model.num_kv_heads * model.head_dim
    return {"attn_pre_proj": h * (q_dim + 2 * kv_dim), "attn_post_proj": q_dim * h,
            "mlp_up_proj": 2 * h * model.intermediate_size, "mlp_down_proj": model.intermediate_size * h}[op]


def elementwise_elements(model: ModelConfig, op: str) -> int:
    """Elements one token's elementwise kernel reads and writes (see calibrated.elementwise_bytes_per_token)."""
    q_dim, kv_dim = model.num_heads * model.head_dim, model.num_kv_heads * model.head_dim
    return {"input_layernorm": 4 * model.hidden_size, "post_attention_layernorm": 4 * model.hidden_size,
            "attn_rope": 2 * (q_dim + kv_dim), "mlp_act": 3 * model.intermediate_size}[op]


@dataclass(frozen=True)
class OperatorRows:
    """Operator measurements as one decoder layer's totals per token count: the four GEMMs together and the four
    elementwise kernels together (what the cost model prices per layer), two observations per row."""

    tokens: np.ndarray  # [2n]: each row's tokens twice (GEMMs, then elementwise)
    seconds: np.ndarray  # [2n]
    gemm_params: np.ndarray  # [2n]: the layer's GEMM parameters on GEMM rows, 0 on elementwise rows
    elem_bytes: np.ndarray  # [2n]: the elementwise kernels' bytes per token on elementwise rows, 0 on GEMM rows
    elem_kernels: np.ndarray  # [2n]: how many elementwise kernels were timed (0 on GEMM rows)

    @property
    def is_gemm(self) -> np.ndarray:
        return self.gemm_params > 0


def operator_rows(frame: Any, model: ModelConfig) -> OperatorRows:
    """A wide operators frame (medians in ms per operator and token count) as layer totals in seconds."""
    tokens, seconds, params, elem, kernels = [], [], [], [], []
    for _, row in frame.iterrows():
        m = float(row["num_tokens"])
        gemm_ops = [op for op in GEMM_OPS if op in row and np.isfinite(row[op])]
        elem_ops = [op for op in ELEMENTWISE_OPS if op in row and np.isfinite(row[op])]
        if gemm_ops:
            tokens.append(m)
            seconds.append(sum(float(row[op]) for op in gemm_ops) * 1e-3)
            params.append(sum(gemm_params(model, op) for op in gemm_ops))
            elem.append(0.0)
            kernels.append(0)
        if elem_ops:
            tokens.append(m)
            seconds.append(sum(float(row[op]) for op in elem_ops) * 1e-3)
            params.append(0)
            elem.append(sum(elementwise_elements(model, op) for op in elem_ops) * BF16_BYTES)
            kernels.append(len(elem_ops))
    return OperatorRows(np.asarray(tokens), np.asarray(seconds), np.asarray(params, dtype=float),
                        np.asarray(elem, dtype=float), np.asarray(kernels, dtype=float))


def predict_operators(rows: OperatorRows, gpu: GpuSpec, params: RooflineParams) -> np.ndarray:
    """Seconds the calibrated parts predict for each layer total."""
    bw, peak = gpu.hbm_bytes_per_s, gpu.bf16_flop_per_s
    weight_s = rows.gemm_params * BF16_BYTES / (bw * params.bw_efficiency)
    flop_s = 2.0 * rows.gemm_params * rows.tokens / (peak * params.flop_efficiency)
    gemm = gemm_array(weight_s, flop_s, rows.tokens, float(params.knee_width or 0.0))
    elem = (rows.elem_kernels * params.kernel_launch_s
            + rows.tokens * rows.elem_bytes / (bw * float(params.elementwise_efficiency or 1.0)))
    return np.where(rows.is_gemm, gemm, elem)


@dataclass(frozen=True)
class StaticBatch:
    """One end-to-end measurement of a static batch."""

    engine: str
    model: ModelConfig
    tensor_parallel: int
    batch_size: int
    input_tokens: int
    output_tokens: int
    seconds: float

    @property
    def label(self) -> str:
        return (f"{self.engine} {self.model.name} tp{self.tensor_parallel} B={self.batch_size} "
                f"in/out={self.input_tokens}/{self.output_tokens}")


def static_batch_rows(frame: Any, models: Any) -> list[StaticBatch]:
    """The rows of a static_batch frame (``models``: name -> ModelConfig lookup)."""
    return [StaticBatch(str(r["engine"]), models(str(r["model"])), int(r["tensor_parallel"]), int(r["batch_size"]),
                        int(r["input_tokens"]), int(r["output_tokens"]), float(r["latency_s"]))
            for _, r in frame.iterrows()]


def static_batch_exclusion(row: StaticBatch, gpu: GpuSpec) -> Optional[str]:
    """Why a measurement cannot be used, or None: its KV would not fit (the engine preempts and recomputes), or it
    is faster than reading the weights once per decode step at the datasheet bandwidth."""
    plain = RooflineCostModel(gpu, row.model, tensor_parallel=row.tensor_parallel)
    need = row.batch_size * (row.input_tokens + row.output_tokens)
    if need > (plain.kv_cache_tokens() or 0):
        return "KV of the batch exceeds the cache (the engine preempts)"
    floor = (row.output_tokens - 1) * plain.weight_read_bytes / gpu.hbm_bytes_per_s
    if row.seconds < floor:
        return "faster than one weight read per decode step at peak bandwidth"
    return None


def predict_static_batch(row: StaticBatch, gpu: GpuSpec, params: RooflineParams, chunk_tokens: int,
                         cache: Optional[dict] = None) -> float:
    """Seconds the calibrated roofline predicts for one static batch (see the module docstring). ``cache`` (one
    per set of parameters) keeps the cost models built for each model, tensor parallelism and engine."""
    key = (row.model.name, row.tensor_parallel, row.engine)
    cm = cache.get(key) if cache is not None else None
    if cm is None:
        cm = CalibratedRooflineCostModel(gpu, row.model, tensor_parallel=row.tensor_parallel, params=params,
                                         buckets=Buckets(None))
        if cache is not None:
            cache[key] = cm
    b, lin, lout = row.batch_size, row.input_tokens, row.output_tokens
    chunks = max(1, math.ceil(b * lin / chunk_tokens))
    prefill = chunks * cm.step_s(0, 0.0, 0, int(round(b * lin / chunks)), (b / chunks) * lin * lin / 2.0)
    decode = (lout - 1) * float(cm.verify_s(b, b * (lin + lout / 2.0), b))
    return prefill + decode
