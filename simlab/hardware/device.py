"""Roofline parameters and the effective throughputs of one GPU of a tensor-parallel group.

Defaults are justified in docs/roofline.md ("Parameters"). With ``calibration: none`` a forward's time on one GPU
is ``max(bytes / (HBM bytes/s x bw_efficiency), FLOPs / (peak FLOP/s x flop_efficiency))`` plus the
tensor-parallel all-reduces (not overlapped) plus fixed overheads; a calibrated roofline prices the same parts with
the smooth knee of :mod:`simlab.hardware.knee` (:class:`simlab.hardware.calibrated.CalibratedDevice`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Optional

from simlab.hardware.precision import peak_flop_per_s
from simlab.hardware.specs import BF16_BYTES, GIB, GpuSpec, ModelConfig

# vLLM's memory profiling run: max_num_batched_tokens tokens through the model, max_num_seqs sampled rows
PROFILE_BATCH_TOKENS = 8192
PROFILE_SAMPLED_ROWS = 256
NON_TORCH_RESERVE_BYTES = 1 * GIB  # CUDA context, cuBLAS/NCCL workspaces, CUDA-graph pool (an estimate)
MOE_HIDDEN_UNIT = 1024  # moe_hidden_overhead_s is seconds per this many of the hidden size
KV_BLOCK_TOKENS = 16  # vLLM's default KV block size: capacity is a whole number of blocks


@dataclass(frozen=True)
class RooflineParams:
    """Every tunable number of the roofline, resolved (config values over these defaults).

    The defaults are ``calibration: none``'s constants. A calibrated roofline resolves the efficiencies and
    overheads from its GPU's fit instead (:func:`simlab.hardware.calibration.resolve_params`); the fields below
    ``eagle3_draft_vocab`` exist only there (a ``knee_width`` of None or 0 is a hard ``max``).
    """

    bw_efficiency: float = 0.80
    flop_efficiency: float = 0.50
    step_overhead_s: float = 5.0e-4
    link_efficiency: float = 0.70
    allreduce_latency_s: float = 1.0e-5
    kernel_launch_s: float = 4.0e-6
    gpu_memory_utilization: float = 0.90
    activation_reserve_bytes: Optional[int] = None  # None: estimated from the model (see below)
    draft_layers: int = 5
    eagle3_draft_vocab: int = 32000
    request_overhead_s: float = 0.0
    knee_width: Optional[float] = None
    elementwise_efficiency: Optional[float] = None
    attention_efficiency: Optional[float] = None
    precision: str = "bf16"  # the decoder layers' matmul weights (simlab.hardware.precision)
    kv_precision: str = "bf16"
    stack: str = "vllm"  # the serving stack (simlab.hardware.stacks)
    host_launch_s: float = 0.0  # a step outside a CUDA graph costs at least its kernels x this
    quantized_efficiency: float = 1.0  # FP8/FP4 GEMMs reach this fraction of the bf16 GEMMs' efficiencies
    prefill_efficiency: float = 1.0  # a prefill chunk's FLOPs run at this fraction of flop_efficiency
    draft_forward_overhead_s: float = 0.0  # host time per drafter forward
    spec_round_overhead_s: float = 0.0  # host time per speculative round (verify bookkeeping, the draft's setup)
    # an MoE layer's all-to-all with data-parallel attention (simlab.hardware.moe_layout): each of dispatch and
    # combine takes this latency, and its bytes move at alltoall_efficiency of the per-direction NVLink peak
    # (fitted to pplx-kernels' NVLink EP8 dispatch and combine on H100; docs/roofline.md, "Expert parallelism")
    alltoall_latency_s: float = 4.165e-05
    alltoall_efficiency: float = 0.42
    # the routed-expert kernels' fixed time per MoE layer and forward (routing, token sort, the grouped GEMMs'
    # launch and tail): moe_layer_overhead_s, plus moe_hidden_overhead_s per 1,024 of the hidden size (the fused
    # kernels' serial loop over the hidden dimension, which tensor parallelism does not split); the calibration
    # fits the second per stack on MoE engine measurements (docs/roofline.md, "Expert parallelism"); 0 when dense
    moe_layer_overhead_s: float = 0.0
    moe_hidden_overhead_s: float = 0.0
    expert_precision: Optional[str] = None  # the routed experts' weights (None: precision's)
    calibration: str = "none"

    @property
    def calibrated(self) -> bool:
        return self.calibration != "none"

    @property
    def expert_format(self) -> str:
        """The routed experts' weight format: ``expert_precision`` when given, else ``precision``."""
        return self.expert_precision or self.precision

    def moe_layer_s(self, hidden_size: int) -> float:
        """The routed-expert kernels' fixed seconds per MoE layer and forward of a model with ``hidden_size``."""
        return self.moe_layer_overhead_s + self.moe_hidden_overhead_s * hidden_size / MOE_HIDDEN_UNIT

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if out["expert_precision"] is None:  # the experts in ``precision``: as before the field existed
            del out["expert_precision"]
        return out


class Device:
    """One GPU of a ``tensor_parallel`` group: effective bytes/s, FLOP/s and all-reduce cost."""

    def __init__(self, gpu: GpuSpec, tensor_parallel: int, params: RooflineParams) -> None:
        self.gpu = gpu
        self.tp = tensor_parallel
        self.params = params
        self.bytes_per_s = gpu.hbm_bytes_per_s * params.bw_efficiency
        self.flop_per_s = gpu.bf16_flop_per_s * params.flop_efficiency
        # the target's decoder-layer GEMMs run at their precision's tensor-core peak (W8A8, W4A4), and quantised
        # kernels (scales, activation quantisation) reach a fraction of bf16's efficiencies
        quantized = params.quantized_efficiency if params.precision != "bf16" else 1.0
        self.matmul_flop_per_s = ((peak_flop_per_s(gpu, params.precision) or gpu.bf16_flop_per_s)
                                  * params.flop_efficiency * quantized)
        self.matmul_bytes_per_s = self.bytes_per_s * quantized
        if tensor_parallel > 1:
            # ring all-reduce: each GPU sends and receives 2 (tp - 1) / tp of the buffer over its links
            ring_factor = 2.0 * (tensor_parallel - 1) / tensor_parallel
            self.allreduce_s_per_byte = ring_factor / (gpu.nvlink_bytes_per_s * params.link_efficiency)
            self.allreduce_latency_s = params.allreduce_latency_s
        else:
            self.allreduce_s_per_byte = 0.0
            self.allreduce_latency_s = 0.0

    def allreduce_coefficients(self, num_allreduces: int, hidden_size: int) -> tuple[float, float]:
        """(fixed seconds, seconds per token) of ``num_allreduces`` all-reduces of a bf16 hidden state."""
        fixed = num_allreduces * self.allreduce_latency_s
        per_token = num_allreduces * hidden_size * BF16_BYTES * self.allreduce_s_per_byte
        return fixed, per_token

    def forward_s(self, read_bytes: float, flops: float, tokens: float, num_allreduces: int, hidden_size: int,
                  kernels: int) -> float:
        """One forward on this GPU (bytes and FLOPs already divided by the group): roofline + all-reduce + launches."""
        fixed, per_token = self.allreduce_coefficients(num_allreduces, hidden_size)
        compute = max(read_bytes / self.bytes_per_s, flops / self.flop_per_s)
        return compute + fixed + per_token * tokens + kernels * self.params.kernel_launch_s

    def forward_parts_s(self, weight_bytes: float, kv_bytes: float, other_bytes: float, matmul_flops: float,
                        attn_flops: float, tokens: float, num_allreduces: int, hidden_size: int,
                        kernels: int) -> float:
        """:meth:`forward_s` with the reads and FLOPs given by part (weights, KV, other; GEMMs, attention)."""
        return self.forward_s(weight_bytes + kv_bytes + other_bytes, matmul_flops + attn_flops, tokens,
                              num_allreduces, hidden_size, kernels)


def kv_heads_per_gpu(model: ModelConfig, tensor_parallel: int) -> int:
    """KV heads each GPU holds: split when tp divides them, replicated (one each) when tp exceeds them."""
    return max(1, -(-model.num_kv_heads // tensor_parallel))


def default_activation_reserve_bytes(model: ModelConfig, tensor_parallel: int) -> int:
    """Per-GPU memory kept out of the KV cache besides weights: activations of vLLM's profiling run
    (8192 tokens through the widest layer), fp32 logits for 256 sampled rows, and 1 GiB outside torch."""
    tp = tensor_parallel
    q_kv_dim = (model.num_heads + 2 * model.num_kv_heads) * model.head_dim
    per_token = (2 * model.intermediate_size / tp + 4 * model.hidden_size + q_kv_dim / tp) * BF16_BYTES
    sampler = PROFILE_SAMPLED_ROWS * model.vocab_size * 4 / tp
    return int(NON_TORCH_RESERVE_BYTES + PROFILE_BATCH_TOKENS * per_token + sampler)
