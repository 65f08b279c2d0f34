"""The calibrated roofline: the same parts as the plain roofline, priced with fitted, smooth efficiencies.

Per GPU of a tensor-parallel group, a target forward over B decode tokens (padded to Bp) whose R requests hold C
context tokens in total (docs/roofline.md, "Calibrated roofline"):

    step = gemm(body, Bp) + gemm(LM head, Bp)                       weights read / FLOPs, joined by the knee
         + Bp x elementwise bytes / (BW x elementwise_efficiency)   norms, rotary, activation, residual adds
         + layers x 5 x kernel_launch_s                             4 elementwise kernels + attention, per layer
         + C x knee(KV bytes / (BW x attention_efficiency), (B/R) x attention FLOPs / (peak x flop_efficiency))
         + all-reduce(Bp) + Bp x sampler + step_overhead_s + request_overhead_s x R

with ``gemm`` and ``knee`` from :mod:`simlab.hardware.knee`. Every term is non-decreasing in B and in C, smooth in
B (no corner), never below the plain roofline's physics bounds (efficiencies are at most 1), and affine in C.
Drafter forwards use the same parts (:class:`CalibratedDevice`), without the target's step overheads.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from simlab.hardware.buckets import Buckets
from simlab.hardware.cost_spec import CALIBRATED
from simlab.hardware.device import Device, RooflineParams, kv_heads_per_gpu
from simlab.hardware.knee import gemm_array, gemm_s, knee, knee_array
from simlab.hardware.roofline import RooflineCostModel
from simlab.hardware.specs import BF16_BYTES, GpuSpec, ModelConfig

ELEMENTWISE_KERNELS_PER_LAYER = 4  # norm, q/k-norm + rotary, add + norm, activation (drafters.LAYER_KERNELS - 5)
ATTENTION_KERNELS_PER_LAYER = 1


def elementwise_bytes_per_token(model: ModelConfig, tensor_parallel: int) -> float:
    """Bytes one token's elementwise kernels move in one layer on one GPU: two fused add+norms (read x and the
    residual, write both: 4h each), rotary on q and k (read and write), the gated activation (read gate and up,
    write one), all bf16 (with mHC's residual streams, the adds and norms move every stream)."""
    tp = tensor_parallel
    q_dim = model.num_heads * model.head_dim / tp
    kv_dim = kv_heads_per_gpu(model, tp) * model.head_dim
    streams = model.compressed.hc_mult if model.compressed is not None else 1  # mHC: residual streams to mix
    return BF16_BYTES * (8 * model.hidden_size * streams + 2 * (q_dim + kv_dim)
                         + 3 * model.active_intermediate_size / tp)


class CalibratedDevice(Device):
    """A :class:`Device` that prices a forward's parts with the calibrated knee instead of one ``max``."""

    def __init__(self, gpu: GpuSpec, tensor_parallel: int, params: RooflineParams) -> None:
        super().__init__(gpu, tensor_parallel, params)
        self.attn_bytes_per_s = gpu.hbm_bytes_per_s * float(params.attention_efficiency or params.bw_efficiency)
        self.elem_bytes_per_s = gpu.hbm_bytes_per_s * float(params.elementwise_efficiency or params.bw_efficiency)
        self.width = float(params.knee_width or 0.0)

    def forward_parts_s(self, weight_bytes: float, kv_bytes: float, other_bytes: float, matmul_flops: float,
                        attn_flops: float, tokens: float, num_allreduces: int, hidden_size: int,
                        kernels: int) -> float:
        fixed, per_token = self.allreduce_coefficients(num_allreduces, hidden_size)
        cost = gemm_s(weight_bytes / self.bytes_per_s, matmul_flops / self.flop_per_s, tokens, self.width)
        if kv_bytes > 0.0 or attn_flops > 0.0:
            cost += knee(kv_bytes / self.attn_bytes_per_s, attn_flops / self.flop_per_s, self.width)
        return (cost + other_bytes / self.elem_bytes_per_s + fixed + per_token * tokens
                + kernels * self.params.kernel_launch_s)


class CalibratedRooflineCostModel(RooflineCostModel):
    """A :class:`RooflineCostModel` whose efficiencies and overheads come from a fit (see the module docstring)."""

    device_class = CalibratedDevice
    kernel_arithmetic = CALIBRATED  # the arithmetic simlab.hardware.cost_kernel repeats for this class

    def __init__(self, gpu: GpuSpec, model: ModelConfig, *, tensor_parallel: int = 1, expert_parallel: int = 1,
                 params: RooflineParams = RooflineParams(), buckets: Buckets = Buckets(None)) -> None:
        super().__init__(gpu, model, tensor_parallel=tensor_parallel, expert_parallel=expert_parallel, params=params,
                         buckets=buckets)
        device: CalibratedDevice = self.device  # type: ignore[assignment]
        tp = tensor_parallel
        head_bytes = model.lm_head_params * BF16_BYTES / tp
        self._body_weight_s = (self.weight_read_bytes - head_bytes) / device.matmul_bytes_per_s
        self._head_weight_s = head_bytes / device.bytes_per_s
        self._body_flop_token_s = 2.0 * model.always_read_matmul_params / tp / device.matmul_flop_per_s
        self._head_flop_token_s = 2.0 * model.lm_head_params / tp / device.flop_per_s
        self._elem_token_s = (model.num_layers * elementwise_bytes_per_token(model, tp) / device.elem_bytes_per_s)
        kernels = model.num_layers * (ELEMENTWISE_KERNELS_PER_LAYER + ATTENTION_KERNELS_PER_LAYER)
        self._fixed_s = self._ar_fixed_s + params.step_overhead_s + kernels * params.kernel_launch_s + self._moe_fixed_s
        self._kv_token_s = self.kv_read_bytes_per_token / device.attn_bytes_per_s
        if self.compressed is not None:
            self._capped_entry_s = self._capped_entry_bytes / device.attn_bytes_per_s
        self._request_s = params.request_overhead_s
        self._width = device.width

    def _sampler_bytes_per_s(self) -> float:
        return self.device.elem_bytes_per_s

    # ----------------------------------------------------------------------------------------- target forward
    def _linear_s(self, tokens: float, head_tokens: float, flop_tokens: Optional[float] = None,
                  routed_tokens: Optional[float] = None, routed_flop_tokens: Optional[float] = None) -> float:
        """Decoder-layer GEMMs over ``tokens`` (their FLOPs those of ``flop_tokens``, default ``tokens``), the LM
        head and the sampler over ``head_tokens``, the routed experts over the ``routed_tokens`` of every attention
        group (default ``tokens``; FLOPs those of ``routed_flop_tokens``), and the per-token elementwise and
        communication time."""
        flop_tokens = tokens if flop_tokens is None else flop_tokens
        body = gemm_s(self._body_weight_s, self._body_flop_token_s * flop_tokens, tokens, self._width)
        head = gemm_s(self._head_weight_s, self._head_flop_token_s * head_tokens, head_tokens, self._width)
        if self._routed:
            routed = tokens if routed_tokens is None else routed_tokens
            routed_flops = flop_tokens if routed_flop_tokens is None else routed_flop_tokens
            body += gemm_s(self._routed_read_s * float(self.routed_share(routed)),
                           self._routed_token_s * routed_flops, routed, self._width)
        return body + head + (self._elem_token_s + self._ar_token_s) * tokens + self._sample_token_s * head_tokens

    def _attention_s(self, queries_per_request: float, context_tokens: float) -> float:
        if context_tokens <= 0.0:
            return 0.0
        return context_tokens * knee(self._kv_token_s, self._attn_pair_s * queries_per_request, self._width)

    def _compressed_attention_s(self, b: Any, c: Any, requests: Any) -> Any:
        """Compressed attention over ``b`` queries of ``requests`` requests holding ``c`` context: the linear part
        and the capped entries at the mean context, one knee (scalars or arrays)."""
        entries = self._capped_entries(c / requests)
        kv_s = self._kv_token_s * c + self._capped_entry_s * entries * requests
        flop_s = self._attn_pair_s * (b / requests) * c + self._capped_flop_s * entries * b
        if self._state_entries:  # a hybrid model's states (RooflineCostModel._state_s)
            state_kv_s, state_flop_s = self._state_s(b, requests)
            kv_s = kv_s + state_kv_s
            flop_s = flop_s + state_flop_s
        if isinstance(kv_s, np.ndarray):
            return np.where(c > 0.0, knee_array(kv_s, flop_s, self._width), 0.0)
        return knee(kv_s, flop_s, self._width) if c > 0.0 else 0.0

    def _verify_one(self, b: float, padded: float, c: float, requests: float, routed_tokens: float) -> float:
        attention = (self._attention_s(b / requests, c) if self.compressed is None
                     else self._compressed_attention_s(b, c, requests))
        gpu = self._linear_s(padded, padded, None, routed_tokens, routed_tokens) + attention
        return self._floored(gpu, padded) + self._fixed_s + self._request_s * requests

    def _verify_array(self, batch_tokens: Any, context_tokens: Any, num_requests: Any) -> np.ndarray:
        b0 = np.asarray(batch_tokens, dtype=float)
        b, padded, c, requests, routed = self._grouped_array(
            b0, np.asarray(context_tokens, dtype=float), np.maximum(np.asarray(num_requests, dtype=float), 1.0))
        body = gemm_array(self._body_weight_s, self._body_flop_token_s * padded, padded, self._width)
        if self._routed:  # added in _linear_s's order, so that a step costs the same bits either way
            body = body + gemm_array(self._routed_read_s * self.routed_share(routed),
                                     self._routed_token_s * routed, routed, self._width)
        linear = (body + gemm_array(self._head_weight_s, self._head_flop_token_s * padded, padded, self._width)
                  + (self._elem_token_s + self._ar_token_s) * padded + self._sample_token_s * padded)
        if self.compressed is None:
            attention = np.maximum(c, 0.0) * knee_array(self._kv_token_s, self._attn_pair_s * (b / requests),
                                                        self._width)
        else:
            attention = self._compressed_attention_s(b, np.maximum(c, 0.0), requests)
        cost = self._floored_array(linear + attention, padded) + self._fixed_s + self._request_s * requests
        return np.where(b0 > 0, cost, 0.0)

    def step_s(self, decode_tokens: int, context_tokens: float, num_requests: int, prefill_tokens: int = 0,
               prefill_attn_pairs: float = 0.0) -> float:
        if prefill_tokens <= 0:
            return self.verify_s(decode_tokens, context_tokens, num_requests)  # type: ignore[return-value]
        d, c, r, p, pairs, routed = self._mixed_group(decode_tokens, context_tokens, num_requests, prefill_tokens,
                                                      prefill_attn_pairs)
        requests = max(r, 1.0) if d > 0 else 0.0
        if d <= 0:
            attention = 0.0
        elif self.compressed is None:
            attention = self._attention_s(d / requests, c)
        else:
            attention = self._compressed_attention_s(d, c, requests)
        # logits only for the decode tokens and, of a prefill chunk, its last token
        head_tokens = d if d > 0 else 1.0
        # a prefill chunk's FLOPs (GEMMs and causal attention) run at prefill_efficiency of the decode GEMMs' rate
        scale = 1.0 / self.params.prefill_efficiency
        gpu = (self._linear_s(d + p, head_tokens, d + p * scale,
                              routed, routed - prefill_tokens + prefill_tokens * scale) + attention
               + self._prefill_pair_s * pairs * scale)
        if self.compressed is not None:
            gpu += self._capped_flop_s * self._prefill_capped_entries(p, pairs) * p * scale
        return max(gpu, self._launch_floor_s) + self._fixed_s + self._request_s * (requests + 1.0)

    # ----------------------------------------------------------------------------------------- provenance
    def describe(self) -> dict[str, Any]:
        """The plain roofline's description plus ``calibration``: which fit, on what, and its stated error."""
        from simlab.common.errors import InputError
        from simlab.hardware.calibration import calibration_entry, fitted_values

        out = super().describe()
        gpu, _, stack = self.params.calibration.partition("/")
        entry = calibration_entry(gpu) or {}
        error = dict(entry.get("error") or {})
        if "excluded" in error:  # listed row by row in hw_profiles/calibration/fitted.yaml
            error["excluded"] = len(error["excluded"])
        stack_fit = dict((entry.get("stacks") or {}).get(stack) or {})
        calibration: dict[str, Any] = {"name": self.params.calibration, "stack": stack,
                                       "fitted_on": entry.get("fitted_on"), "stack_fit": stack_fit}
        if entry.get("note"):
            calibration["note"] = entry["note"]
        if gpu != self.gpu.name:
            calibration["note"] = (f"No engine run on a {self.gpu.name} was fitted: {gpu}'s fit is taken "
                                   f"(calibrated_like in its GPU file), and the stated error is {gpu}'s, not "
                                   f"measured on this GPU. " + calibration.get("note", "")).strip()
        try:
            fitted = fitted_values(gpu, stack)
        except InputError:
            fitted = {}
        overridden = sorted(k for k, v in fitted.items() if k != "calibration" and getattr(self.params, k) != v)
        if overridden:
            calibration["overridden"] = overridden
            calibration["note"] = (calibration.get("note", "") + " The stated error is the fit's; parameters "
                                   "given in the config replace fitted ones: " + ", ".join(overridden)).strip()
        out["calibration"] = {**calibration, "error": error, "derived": entry.get("derived")}
        return out

    @property
    def crossover_tokens(self) -> float:
        """Batch tokens where the decoder layers' weight-read time equals their GEMM time at the saturated FLOP
        rate (the corner the knee smooths; 0 context)."""
        return self._body_weight_s / self._body_flop_token_s
