"""Number formats of a served model: bytes per weight and per KV element, and the tensor-core peak they run at.

``precision`` is the format of the decoder layers' matmul weights (and, as engines serve FP8 and FP4
checkpoints, of their activations: W8A8 / W4A4 GEMMs run at that format's tensor-core peak). The embedding, the
LM head, the norms and the activations between kernels stay bf16: FP8 and NVFP4 checkpoints (ModelOpt,
llm-compressor's FP8-dynamic) leave ``lm_head`` unquantised, and engines keep the residual stream in bf16.
``kv_precision`` is the KV cache's element format; attention's FLOPs run at the bf16 peak either way.

- ``bf16``: 2 bytes a weight.
- ``fp8`` (E4M3, per-channel or per-block scales, whose bytes are negligible): 1 byte a weight.
- ``fp4`` (NVFP4: E2M1 values with one E4M3 scale per block of 16): 0.5 + 1/16 = 0.5625 bytes a weight.
  Blackwell (B200) only: Hopper and Ampere have no FP4 tensor cores.
- ``mxfp4`` (E2M1 values with one E8M0 scale per block of 32): 0.5 + 1/32 = 0.53125 bytes a weight; only as
  ``expert_precision``, the format DeepSeek-V4 ships its routed experts in.

``expert_precision`` sets the routed experts' bytes only: their GEMMs run at ``precision``'s peak (the
activations' format sets the tensor-core rate; on Hopper FP4 experts are dequantised in the kernel, as vLLM's
MXFP4 MoE kernels do), so on any GPU it is a weight-only format.
"""

from __future__ import annotations

from typing import Optional

from simlab.common.errors import InputError
from simlab.hardware.specs import GpuSpec

NVFP4_BLOCK = 16  # values sharing one 1-byte scale
MXFP4_BLOCK = 32
WEIGHT_BYTES = {"bf16": 2, "fp8": 1, "fp4": 0.5 + 1.0 / NVFP4_BLOCK, "mxfp4": 0.5 + 1.0 / MXFP4_BLOCK}
KV_BYTES = {"bf16": 2, "fp8": 1}
PRECISIONS = ("bf16", "fp8", "fp4")
EXPERT_PRECISIONS = tuple(WEIGHT_BYTES)
KV_PRECISIONS = tuple(KV_BYTES)


def peak_flop_per_s(gpu: GpuSpec, precision: str) -> Optional[float]:
    """Dense tensor-core FLOP/s of ``gpu`` in ``precision``; None where the GPU has no such tensor cores."""
    return {"bf16": gpu.bf16_flop_per_s, "fp8": gpu.fp8_flop_per_s, "fp4": gpu.fp4_flop_per_s}[precision]


def supported_precisions(gpu: GpuSpec) -> list[str]:
    """The weight precisions ``gpu`` has tensor cores for."""
    return [p for p in PRECISIONS if peak_flop_per_s(gpu, p) is not None]


def check_precision(gpu: GpuSpec, precision: str, *, file: Optional[str] = None,
                    field: str = "hardware.precision") -> None:
    """Raise :class:`InputError` when ``gpu`` cannot run ``precision`` (FP4 on a Hopper, FP8 on an A100)."""
    if peak_flop_per_s(gpu, precision) is None:
        raise InputError(f"{gpu.name} has no {precision.upper()} tensor cores", file=file, field=field,
                         value=precision, valid=", ".join(supported_precisions(gpu)))
