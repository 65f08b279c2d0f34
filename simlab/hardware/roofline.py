"""The roofline cost model: a GPU spec x a model config (docs/roofline.md has the formulas and defaults).

Per GPU of a tensor-parallel group of ``tp``, a target forward over B decode tokens (padded to Bp by the
CUDA-graph buckets) whose requests hold C context tokens in total, R requests:

    memory  = (weight bytes read + C x KV bytes per token) / (HBM bytes/s x bw_efficiency)
    compute = (2 x matmul params x Bp + 4 x layers x heads x head_dim x (B / R) x C) / (peak x flop_efficiency)
    step    = max(memory, compute) + all-reduce(Bp) + Bp x sampler + step_overhead_s

with ``sampler`` the seconds one logit row's sampling moves over the whole vocabulary (:data:`SAMPLER_BYTES_PER_LOGIT`
per entry, on one GPU: the engines gather the logits before sampling)

(bytes, FLOPs and heads divided by tp). Prefill tokens add matmul FLOPs (no LM head) and attention FLOPs from
the query-key pairs they compute. A mixture of experts reads the routed experts its tokens touch, and with
``expert_parallel`` (:mod:`simlab.hardware.moe_layout`) the step is its busiest GPU's: data-parallel attention
groups each run their own requests, the experts see every group's tokens, and tokens move by all-to-all.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

from simlab.hardware.base import ArrayOrFloat, CostModel, is_array
from simlab.hardware.buckets import Buckets
from simlab.hardware.cost_spec import PLAIN, roofline_draft_spec, roofline_spec
from simlab.hardware.device import (
    KV_BLOCK_TOKENS,
    PROFILE_SAMPLED_ROWS,
    Device,
    RooflineParams,
    default_activation_reserve_bytes,
    kv_heads_per_gpu,
)
from simlab.hardware.drafters import LAYER_KERNELS, LM_HEAD_KERNELS, SAMPLING_KERNELS, RooflineDrafter
from simlab.hardware.moe_layout import AllToAll, MoeLayout
from simlab.hardware.precision import KV_BYTES, WEIGHT_BYTES
from simlab.hardware.specs import GpuSpec, ModelConfig

# bytes moved per vocabulary entry of every logit row an engine samples (each verified position, and a prefill
# chunk's last token): fp32 logits written and read by the softmax, probabilities written and read by the sampler
# or rejection sampler (vLLM's Sampler and RejectionSampler, SGLang's tree verification). Unpriced before: at 64
# users x 4 positions on Qwen3's 152k vocabulary about 0.25 ms of a step on an H100.
SAMPLER_BYTES_PER_LOGIT = 16


def target_kernels(model: ModelConfig) -> int:
    """Kernels one target forward launches: every decoder layer's, the LM head's and the sampler's."""
    return model.num_layers * LAYER_KERNELS + LM_HEAD_KERNELS + SAMPLING_KERNELS


class RooflineCostModel(CostModel):
    """A :class:`CostModel` computed from first principles with constant efficiencies (``calibration: none``);
    all coefficients precomputed at construction. :class:`~simlab.hardware.calibrated.CalibratedRooflineCostModel`
    prices the same parts with fitted, smooth efficiencies."""

    has_context = True
    device_class = Device
    kernel_arithmetic = PLAIN  # the arithmetic simlab.hardware.cost_kernel repeats for this class

    def __init__(
        self,
        gpu: GpuSpec,
        model: ModelConfig,
        *,
        tensor_parallel: int = 1,
        expert_parallel: int = 1,
        params: RooflineParams = RooflineParams(),
        buckets: Buckets = Buckets(None),
    ) -> None:
        self.gpu, self.model, self.tp, self.params, self.buckets = gpu, model, tensor_parallel, params, buckets
        self.ep = expert_parallel
        self.layout = layout = MoeLayout.of(model, tensor_parallel, expert_parallel)
        self.groups = layout.attention_groups  # data-parallel attention groups (1 without expert parallelism)
        self.num_gpus = layout.num_gpus
        self.name = (f"{gpu.name}_{model.name}" + (f"-tp{tensor_parallel}" if tensor_parallel > 1 else "")
                     + (f"-ep{expert_parallel}" if expert_parallel > 1 else ""))
        self.device = device = self.device_class(gpu, tensor_parallel, params)
        tp = tensor_parallel
        self.weight_bytes_per_param = WEIGHT_BYTES[params.precision]
        # the routed experts may ship in their own format (DeepSeek-V4: MXFP4 experts, FP8 elsewhere)
        expert_bytes = WEIGHT_BYTES[params.expert_format]
        self.weight_bytes = model.weight_bytes_at(self.weight_bytes_per_param, expert_bytes)  # all GPUs
        routed_bytes = model.routed_expert_params * expert_bytes
        holders = layout.expert_holders
        # per GPU: the routed experts over their holders, everything else split tp ways
        self.weight_bytes_per_gpu = (self.weight_bytes / tp if expert_parallel == 1
                                     else (self.weight_bytes - routed_bytes) / tp + routed_bytes / holders)
        self.weight_read_bytes = model.read_bytes_at(self.weight_bytes_per_param) / tp  # per GPU, per forward
        kv_heads, kv_element = kv_heads_per_gpu(model, tp), KV_BYTES[params.kv_precision]
        self.kv_bytes_per_token = model.kv_bytes_per_token(kv_heads, kv_element)
        body_bytes = model.always_read_matmul_params * self.weight_bytes_per_param / tp
        self._mem_fixed_s = (body_bytes / device.matmul_bytes_per_s
                             + (self.weight_read_bytes - body_bytes) / device.bytes_per_s)
        # a mixture of experts reads the routed experts its tokens route to (MoeLayout.routed_share) and multiplies
        # each token through its k experts: per token of the whole replica, on the busiest of the experts' holders
        self._routed = model.is_moe
        self._routed_read_s = routed_bytes / holders / device.matmul_bytes_per_s if model.is_moe else 0.0
        self._routed_token_s = (2.0 * model.active_routed_params / holders / device.matmul_flop_per_s
                                if model.is_moe else 0.0)
        self.kv_read_bytes_per_token = model.kv_read_bytes_per_context_token(kv_heads, kv_element)
        self._mem_per_context_s = self.kv_read_bytes_per_token / device.bytes_per_s
        non_routed = model.always_read_matmul_params if model.is_moe else model.body_matmul_params
        self._decode_token_s = (2.0 * non_routed / tp / device.matmul_flop_per_s
                                + 2.0 * model.lm_head_params / tp / device.flop_per_s)
        self._prefill_token_s = 2.0 * non_routed / tp / device.matmul_flop_per_s
        self._attn_pair_s = model.attention_flops_per_context_token / tp / device.flop_per_s
        # capped attention: DeepSeek-V4's compressed attention (per request, the window's and CSA's selected
        # entries) or a hybrid model's windows and states (simlab.hardware.hybrid_layers), in KV entries of a layer
        self.compressed = capped = model.capped_attention
        self._window_bytes = self._state_entries = self._state_flop_entries = 0.0
        if capped is not None:
            self._capped_entry_bytes = entry = model.kv_entry_bytes(kv_element, kv_heads)[0]
            self._capped_entry_s = entry / device.bytes_per_s
            self._capped_flop_s = model.attention_flops_per_pair / tp / device.flop_per_s
            self._window_bytes = capped.window_bytes_per_sequence(model.num_layers, entry)
            if model.hybrid is not None:  # a state read once per request and written once per query token
                state = model.hybrid.state_bytes / tp
                self._state_entries = state / entry
                self._state_flop_entries = model.hybrid.state_flops_per_token / model.attention_flops_per_pair
                self._window_bytes += state
        self._prefill_pair_s = (1.0 * model.num_kv_layers * model.prefill_attention_flops_per_pair / tp
                                / device.flop_per_s if model.compressed is None else self._attn_pair_s)
        # communication: all-reduces within the tensor-parallel group (two a layer; with data-parallel attention one
        # a layer and one a dense MLP, the MoE layers' tokens moving by all-to-all instead)
        num_allreduces = (model.num_layers + model.num_dense_layers) if layout.uses_alltoall else 2 * model.num_layers
        self._ar_fixed_s, self._ar_token_s = device.allreduce_coefficients(num_allreduces, model.hidden_size)
        self.alltoall = AllToAll.build(layout, model, params.precision, gpu.nvlink_bytes_per_s,
                                       params.alltoall_latency_s, params.alltoall_efficiency)
        if layout.uses_alltoall:  # each GPU of a group sends its 1/tp share of the group's tokens
            self._ar_fixed_s += model.num_moe_layers * self.alltoall.latency_s
            self._ar_token_s += model.num_moe_layers * self.alltoall.s_per_token / tp
        # the routed-expert kernels' fixed time, once per MoE layer of every forward
        self._moe_fixed_s = model.num_moe_layers * params.moe_layer_s(model.hidden_size)
        self._fixed_s = self._ar_fixed_s + params.step_overhead_s + self._moe_fixed_s  # 0.0 for a dense model
        # outside a CUDA graph (above the largest captured size, or a stack without graphs) a forward cannot be
        # faster than the host launching its kernels one by one
        self._launch_floor_s = params.host_launch_s * target_kernels(model)
        self._sample_token_s = model.vocab_size * SAMPLER_BYTES_PER_LOGIT / self._sampler_bytes_per_s()
        self._graph_limit = buckets.largest
        self.drafter = RooflineDrafter(model, device, params, layout, self.alltoall)
        self._kv_cache_tokens = self._capacity_tokens()

    def _sampler_bytes_per_s(self) -> float:
        """The rate the sampler's elementwise passes move bytes at (the calibrated roofline: its elementwise one)."""
        return self.device.bytes_per_s

    # ----------------------------------------------------------------------------------------- target forward
    def verify_s(
        self, batch_tokens: ArrayOrFloat, context_tokens: ArrayOrFloat = 0.0, num_requests: ArrayOrFloat = 1
    ) -> ArrayOrFloat:
        if is_array(batch_tokens, context_tokens, num_requests):
            return self._verify_array(batch_tokens, context_tokens, num_requests)
        b = float(batch_tokens)
        if b <= 0:
            return 0.0
        c, requests = float(context_tokens), max(float(num_requests), 1.0)
        if self.groups == 1:
            padded = self.buckets.pad(b)
            return self._verify_one(b, padded, c, requests, padded)
        share = self._busiest_group_share(requests)
        padded = self.buckets.pad(b * share)  # the busiest group's tokens, padded to its bucket
        return self._verify_one(b * share, padded, c * share, requests * share, padded / share)

    def verify_kernel(self) -> Optional[tuple]:
        """:func:`~simlab.hardware.cost_spec.roofline_spec` (None with compressed attention), built once."""
        if not hasattr(self, "_verify_spec"):
            self._verify_spec = roofline_spec(self)
        return self._verify_spec

    def draft_kernel(self, method: str) -> Optional[np.ndarray]:
        """:func:`~simlab.hardware.cost_spec.roofline_draft_spec` of ``method`` (None where compiled code does not
        price it)."""
        return roofline_draft_spec(self, method)

    def _busiest_group_share(self, requests: Any) -> Any:
        """The share of a step's requests (and, at equal lengths, of its tokens and context) that the busiest of
        the data-parallel attention groups holds: ceil(R / D) of R."""
        if isinstance(requests, np.ndarray):
            return np.ceil(requests / self.groups) / requests
        return math.ceil(requests / self.groups) / requests

    def routed_share(self, tokens: ArrayOrFloat) -> ArrayOrFloat:
        """The fraction of a GPU's routed experts the busiest GPU reads when the replica's step routes ``tokens``
        tokens (0 for a dense model): :meth:`~simlab.hardware.moe_layout.MoeLayout.routed_share`."""
        if not self._routed:
            return 0.0
        return self.layout.routed_share(tokens)

    def _floored(self, gpu_s: float, padded: float) -> float:
        """A forward's GPU time ``gpu_s``, at least the host launch floor when ``padded`` tokens run outside a CUDA
        graph."""
        if self._launch_floor_s > gpu_s and padded > self._graph_limit:
            return self._launch_floor_s
        return gpu_s

    def _floored_array(self, gpu_s: np.ndarray, padded: np.ndarray) -> np.ndarray:
        """:meth:`_floored` over arrays."""
        if self._launch_floor_s > 0.0:
            return np.where(padded > self._graph_limit, np.maximum(gpu_s, self._launch_floor_s), gpu_s)
        return gpu_s

    def _verify_one(self, b: float, padded: float, c: float, requests: float, routed_tokens: float) -> float:
        """One decode-only forward on the busiest GPU: ``b`` > 0 tokens of its group (``padded`` to its bucket),
        ``c`` context, ``requests`` >= 1; ``routed_tokens`` the tokens every group sends to the experts."""
        queries_per_request = b / requests
        memory = self._mem_fixed_s + self._mem_per_context_s * c
        compute = self._decode_token_s * padded + self._attn_pair_s * queries_per_request * c
        if self.compressed is not None:
            capped_memory, capped_compute = self._capped_s(b, c, requests)
            memory += capped_memory
            compute += capped_compute
        if self._routed:
            memory += self._routed_read_s * float(self.routed_share(routed_tokens))
            compute += self._routed_token_s * routed_tokens
        gpu = memory if memory > compute else compute
        return self._floored(gpu, padded) + (self._ar_token_s + self._sample_token_s) * padded + self._fixed_s

    def _grouped_array(self, b: np.ndarray, c: np.ndarray, requests: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(tokens, padded, context, requests) of the busiest group, and the tokens routed to the experts."""
        if self.groups == 1:
            padded = self.buckets.pad_array(b)
            return b, padded, c, requests, padded
        share = self._busiest_group_share(requests)
        padded = self.buckets.pad_array(b * share)
        return b * share, padded, c * share, requests * share, padded / share

    def _verify_array(self, batch_tokens: Any, context_tokens: Any, num_requests: Any) -> np.ndarray:
        b0 = np.asarray(batch_tokens, dtype=float)
        b, padded, c, requests, routed = self._grouped_array(
            b0, np.asarray(context_tokens, dtype=float), np.maximum(np.asarray(num_requests, dtype=float), 1.0))
        queries_per_request = b / requests
        memory = self._mem_fixed_s + self._mem_per_context_s * c
        compute = self._decode_token_s * padded + self._attn_pair_s * queries_per_request * c
        if self.compressed is not None:
            capped_memory, capped_compute = self._capped_s(b, c, requests)
            memory = memory + capped_memory
            compute = compute + capped_compute
        if self._routed:
            memory = memory + self._routed_read_s * self.routed_share(routed)
            compute = compute + self._routed_token_s * routed
        per_token = self._ar_token_s + self._sample_token_s
        cost = self._floored_array(np.maximum(memory, compute), padded) + per_token * padded + self._fixed_s
        return np.where(b0 > 0, cost, 0.0)

    def _mixed_group(self, decode_tokens: int, context_tokens: float, num_requests: int, prefill_tokens: int,
                     prefill_attn_pairs: float) -> tuple[float, float, float, float, float, float]:
        """A mixed step's busiest group: its decode tokens, context and requests, its prefill tokens and their
        attention pairs, and the tokens all groups route to the experts. With data-parallel attention each group
        prefills its own requests within its share of the step's token budget (SGLang divides the chunked-prefill
        size by the data-parallel size), so the prefill is spread evenly over the groups."""
        d, c, r = float(decode_tokens), float(context_tokens), float(num_requests)
        p, pairs = float(prefill_tokens), float(prefill_attn_pairs)
        if self.groups == 1:
            return d, c, r, p, pairs, d + p
        share = float(self._busiest_group_share(r)) if r > 0 else 0.0
        return d * share, c * share, r * share, p / self.groups, pairs / self.groups, d + p

    def step_s(
        self,
        decode_tokens: int,
        context_tokens: float,
        num_requests: int,
        prefill_tokens: int = 0,
        prefill_attn_pairs: float = 0.0,
    ) -> float:
        if prefill_tokens <= 0:
            return self.verify_s(decode_tokens, context_tokens, num_requests)  # type: ignore[return-value]
        d, c, r, p, pairs, routed = self._mixed_group(decode_tokens, context_tokens, num_requests, prefill_tokens,
                                                      prefill_attn_pairs)
        queries_per_request = d / max(r, 1.0)
        memory = self._mem_fixed_s + self._mem_per_context_s * c
        efficiency = self.params.prefill_efficiency
        compute = (
            self._decode_token_s * d
            + self._attn_pair_s * queries_per_request * c
            + (self._prefill_token_s * p + self._prefill_pair_s * pairs) / efficiency
        )
        if self.compressed is not None:
            entries = self._capped_entries(c / r) if r > 0 and d > 0 else 0.0
            memory += self._capped_entry_s * entries * r
            compute += self._capped_flop_s * (entries * d + self._prefill_capped_entries(p, pairs) * p / efficiency)
            if self._state_entries and r > 0 and d > 0:
                state_memory, state_compute = self._state_s(d, r)
                memory += state_memory
                compute += state_compute
        if self._routed:
            memory += self._routed_read_s * float(self.routed_share(routed))
            compute += (self._routed_token_s * (routed - prefill_tokens)
                        + self._routed_token_s * prefill_tokens / efficiency)
        head_tokens = d if d > 0 else 1.0  # logits for the decode tokens and the chunk's last token
        return (max(memory, compute, self._launch_floor_s) + self._ar_token_s * (d + p)
                + self._sample_token_s * head_tokens + self._fixed_s)

    def _capped_entries(self, context_per_request: ArrayOrFloat) -> ArrayOrFloat:
        """Compressed attention: the window's and CSA's selected entries a query attends over all layers, at its
        request's (mean) context."""
        return self.compressed.capped_entries(self.model.num_layers, context_per_request)

    def _capped_s(self, b: ArrayOrFloat, c: ArrayOrFloat, requests: ArrayOrFloat
                  ) -> tuple[ArrayOrFloat, ArrayOrFloat]:
        """Capped attention of ``b`` queries of ``requests`` requests holding ``c`` context: (memory time, compute
        time). A hybrid model's states add a read per request, a write per query (the state at every draft
        position) and their update's FLOPs per query."""
        entries = self._capped_entries(c / requests)
        memory = self._capped_entry_s * entries * requests
        compute = self._capped_flop_s * entries * b
        if self._state_entries:
            state_memory, state_compute = self._state_s(b, requests)
            memory = memory + state_memory
            compute = compute + state_compute
        return memory, compute

    def _state_s(self, b: ArrayOrFloat, requests: ArrayOrFloat) -> tuple[ArrayOrFloat, ArrayOrFloat]:
        """A hybrid model's states for ``b`` queries of ``requests`` requests: (memory time: one read a request and
        one write a query, the state at every draft position; compute time: the update's FLOPs a query)."""
        return (self._capped_entry_s * self._state_entries * (requests + b),
                self._capped_flop_s * self._state_flop_entries * b)

    def _prefill_capped_entries(self, prefill_tokens: float, attn_pairs: float) -> float:
        """Capped attention: the capped entries' worth of FLOPs a prefill token takes, at the chunk's mean position
        (``attn_pairs / prefill_tokens``: each chunk's pairs are its tokens times their mean prior context)."""
        if prefill_tokens <= 0 or self.compressed is None:
            return 0.0
        return float(self._capped_entries(attn_pairs / prefill_tokens)) + self._state_flop_entries

    # ----------------------------------------------------------------------------------------- drafter
    def _drafting_group(self, num_requests: float, context_tokens: float) -> tuple[float, float, float]:
        """(requests, context, routed_scale) a drafter forward runs on: each attention group drafts for its own
        requests (the busiest group's), and an MoE MTP layer's experts see every group's."""
        if self.groups == 1 or num_requests <= 0:
            return num_requests, context_tokens, 1.0
        share = float(self._busiest_group_share(float(num_requests)))
        return num_requests * share, context_tokens * share, 1.0 / share

    def draft_s(self, method: str, gamma: int, num_requests: int, context_tokens: float = 0.0) -> float:
        r, c, scale = self._drafting_group(num_requests, context_tokens)
        return self.drafter.draft_s(method, gamma, r, c, routed_scale=scale)

    # ----------------------------------------------------------------------------------------- memory
    def activation_reserve_bytes(self) -> int:
        if self.params.activation_reserve_bytes is not None:
            return self.params.activation_reserve_bytes
        return default_activation_reserve_bytes(self.model, self.tp)

    def _kv_budget_bytes(self) -> float:
        usable = self.params.gpu_memory_utilization * self.gpu.memory_bytes
        # compressed attention's sliding window: a fixed KV per sequence, reserved for the engine's default
        # max_num_seqs (0.0 for other attention)
        windows = PROFILE_SAMPLED_ROWS * self._window_bytes
        return usable - self.weight_bytes_per_gpu - self.activation_reserve_bytes() - windows

    def _capacity_tokens(self) -> int:
        """KV tokens one replica holds: a whole number of blocks per attention group, each group holding its own
        requests' KV."""
        tokens = int(self._kv_budget_bytes() // self.kv_bytes_per_token)
        return tokens // KV_BLOCK_TOKENS * KV_BLOCK_TOKENS * self.groups

    def kv_cache_tokens(self) -> Optional[int]:
        return self._kv_cache_tokens

    def tree_draft_s(self, method: str, depth: int, topk: int, num_requests: int,
                     context_tokens: float = 0.0) -> Optional[float]:
        r, c, scale = self._drafting_group(num_requests, context_tokens)
        return self.drafter.tree_draft_s(method, depth, topk, r, c, routed_scale=scale)

    def draft_kv_bytes_per_token(self, method: str) -> Optional[float]:
        return self.drafter.kv_bytes_per_token(method) * self.tp

    def draft_prefill_s(self, method: str, tokens: int) -> Optional[float]:
        return self.drafter.prefill_s(method, tokens)

    def kv_transfer_bytes_per_token(self) -> Optional[float]:
        return self.kv_bytes_per_token * self.tp  # each GPU moves its share (replicated KV heads included)

    @property
    def crossover_tokens(self) -> float:
        """Batch tokens where compute time equals memory time at context 0 (without bucket padding)."""
        return self._mem_fixed_s / (self._decode_token_s + self._routed_token_s)

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "roofline",
            "name": self.name,
            "gpu": self.gpu.name,
            "model": self.model.name,
            "tensor_parallel": self.tp,
            # with expert parallelism: the layout and the replica's GPUs (per-GPU metrics divide by num_gpus)
            **({"expert_parallel": self.ep, "attention_groups": self.groups, "num_gpus": self.num_gpus}
               if self.ep > 1 else {}),
            "parameters": self.params.as_dict(),
            **({"stack_version": self.release.version} if self.release is not None else {}),
            "cuda_graph_buckets": self.buckets.to_config(),
            "derived": {
                "weight_bytes": self.weight_bytes,
                **({"weight_bytes_per_gpu": self.weight_bytes_per_gpu} if self.ep > 1 else {}),
                "weight_read_bytes_per_gpu": self.weight_read_bytes,
                "kv_bytes_per_token_per_gpu": self.kv_bytes_per_token,
                "activation_reserve_bytes": self.activation_reserve_bytes(),
                "kv_cache_tokens": self._kv_cache_tokens,
                "crossover_tokens": round(self.crossover_tokens, 1),
                "decode_step_s_at_1_token": self.verify_s(1),
            },
            **({"outside_calibrated_classes": self.model.hybrid.calibration_note()} if self.model.hybrid is not None
               else {}),
        }
