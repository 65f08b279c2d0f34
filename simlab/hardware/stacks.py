"""Serving stacks: what an engine adds to the GPU's kernels (docs/serving-stacks.md, "Serving stacks").

A roofline's ``stack:`` names the engine it stands for. The stack decides:

- **fitted, per GPU** (hw_profiles/calibration/fitted.yaml, ``stacks:``): the host time of an engine step
  (``step_overhead_s``: scheduling, input preparation, sampling hand-off), the host time per request in a step
  (``request_overhead_s``), and how close its decode-attention kernel comes to the HBM bandwidth over context
  (``attention_efficiency``: FlashAttention / FlashInfer in vLLM and SGLang, XQA in TensorRT-LLM);
- **from the engine's source, here**: the batch sizes it captures CUDA graphs for by default, and whether a step
  outside those graphs is bound by launching its kernels from the host (``host_launch_s`` a kernel: the step
  then costs at least its kernels x that);
- the drafter's host time per draft forward (``draft_forward_overhead_s``), where the fit has one.

Each :class:`StackSpec` says where its numbers come from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from simlab.common.errors import InputError
from simlab.hardware.buckets import vllm_default_capture_sizes

DEFAULT_STACK = "vllm"


def sglang_default_capture_sizes(max_bs: int = 256) -> list[int]:
    """SGLang's default ``cuda_graph_bs`` without speculation: 1, 2, 4, 8, 12, then steps of 8 to 256, steps of 16
    to 512, steps of 32 beyond, up to ``cuda_graph_max_bs`` (256 taken here; the engine picks it by GPU memory)."""
    sizes = [1, 2, 4, 8, 12] + list(range(16, 257, 8)) + list(range(272, 512, 16)) + list(range(512, max_bs + 1, 32))
    return [s for s in sizes if s <= max_bs]


def trtllm_default_capture_sizes(max_batch_size: int = 128) -> list[int]:
    """TensorRT-LLM's (PyTorch backend) ``cuda_graph_config`` sizes with ``enable_padding: true``, as its serving
    recipes set it: 1, 2, 4, then multiples of 8 to 128, up to ``max_batch_size`` (128 by default)."""
    return [s for s in [1, 2, 4] + [8 * i for i in range(1, 17)] if s <= max_batch_size]


@dataclass(frozen=True)
class StackSpec:
    """One serving stack's fixed behaviour and where it was read."""

    name: str
    engine: str
    capture_sizes: tuple[int, ...]
    capture_source: str
    host_launch_s: float  # a step outside a CUDA graph costs at least its kernels x this (0: not launch-bound)
    launch_source: str

    def describe(self) -> dict:
        return {"name": self.name, "engine": self.engine, "cuda_graph_capture_sizes": list(self.capture_sizes),
                "capture_source": self.capture_source, "host_launch_s": self.host_launch_s,
                "launch_source": self.launch_source}


_GRAPHED = ("0: with CUDA graphs a step's kernels are launched as one graph; above the largest captured size the "
            "step's kernels are long enough that launching them from the host overlaps their execution")

STACKS: dict[str, StackSpec] = {
    spec.name: spec
    for spec in (
        StackSpec(
            "vllm", "vLLM (V1 engine, CUDA graphs, FlashAttention)", tuple(vllm_default_capture_sizes()),
            "vLLM's default cudagraph_capture_sizes with max_cudagraph_capture_size 512 (docs.vllm.ai engine "
            "arguments, vllm/config/compilation.py)", 0.0, _GRAPHED),
        StackSpec(
            "sglang", "SGLang (CUDA graphs, FlashInfer / FlashAttention-3)", tuple(sglang_default_capture_sizes()),
            "SGLang server_args._generate_cuda_graph_batch_sizes (no speculation), cuda_graph_max_bs 256 (the "
            "engine sets 160-512 by GPU memory; give cuda_graph_buckets to match a server)", 0.0, _GRAPHED),
        StackSpec(
            "trtllm", "TensorRT-LLM (PyTorch backend, CUDA graphs, XQA / TRT-LLM attention)",
            tuple(trtllm_default_capture_sizes()),
            "tensorrt_llm CudaGraphConfig._generate_cuda_graph_batch_sizes with enable_padding true and "
            "max_batch_size 128", 0.0, _GRAPHED),
        StackSpec(
            "eager", "simlab real mode (unfused PyTorch, no CUDA graphs)", (),
            "simlab's real engine captures no graphs while serving (simlab profile may time steps in graphs)",
            6.0e-6, "assumed, not fitted: the host cost of one PyTorch eager kernel launch (dispatch + "
            "cudaLaunchKernel, 5-10 us on a server CPU); no public measurement was used"),
    )
}


def get_stack(name: str, *, file: Optional[str] = None, field: str = "hardware.stack") -> StackSpec:
    """The :class:`StackSpec` of ``name``, or an :class:`InputError` listing the stacks."""
    spec = STACKS.get(name)
    if spec is None:
        raise InputError("unknown serving stack", file=file, field=field, value=name, valid=", ".join(STACKS))
    return spec
