"""How one replica's GPUs hold a mixture of experts: tensor parallelism, expert parallelism and data-parallel
attention (docs/roofline.md, "Expert parallelism").

``tensor_parallel`` T splits attention, the dense layers, the shared experts and the LM head T ways.
``expert_parallel`` E places whole routed experts on E GPUs (``num_experts / E`` each):

- E = 1: every routed expert is split T ways as well (vLLM's and SGLang's ``--tp`` without expert parallelism);
- E = T: the T GPUs of the tensor-parallel group hold whole experts (``--tp 8 --enable-expert-parallel``, SGLang's
  ``--tp 8 --ep 8``); the MoE output is still all-reduced;
- E > T: E / T data-parallel attention groups of T GPUs (``--tp 8 --dp 8 --enable-dp-attention --ep 8`` is T = 1,
  E = 8): each group holds its own requests and their KV; tokens reach their experts by an all-to-all dispatch and
  come back by an all-to-all combine in every MoE layer.

A step's time is its busiest GPU's. Routing is taken uniform (the balanced routing that DeepSeek's own profile
data assumes, and that EPLB aims at): the expected experts a GPU's tokens touch, and of the E expert holders the
busiest reads the most distinct experts (:meth:`MoeLayout.routed_share`). The all-to-all is not overlapped with
compute (no two-batch overlap).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simlab.hardware.specs import BF16_BYTES, ModelConfig, expected_experts

FP8_GROUP = 128  # DeepEP's FP8 dispatch: one fp32 scale per 128 channels ...
DISPATCH_METADATA_BYTES = 16  # ... and 16 bytes of routing metadata per (token, expert)
SHARE_TAIL = 1e-12  # past the tokens where an expert is missed with this probability, every expert is read


def dispatch_bytes_per_copy(hidden_size: int, precision: str) -> float:
    """Bytes of one token's hidden state sent to one expert: FP8 with its scales when the weights are quantised
    (DeepEP's low-latency accounting, tests/test_low_latency.py), else bf16."""
    if precision == "bf16":
        return float(BF16_BYTES * hidden_size)
    return float(hidden_size + hidden_size / FP8_GROUP * 4 + DISPATCH_METADATA_BYTES)


@dataclass(frozen=True)
class MoeLayout:
    """A replica's parallel layout for a model (dense models: T GPUs, nothing routed)."""

    tensor_parallel: int
    expert_parallel: int = 1
    num_experts: int = 0
    experts_per_token: int = 0
    _busiest: Any = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def of(cls, model: ModelConfig, tensor_parallel: int, expert_parallel: int = 1) -> "MoeLayout":
        return cls(tensor_parallel, expert_parallel, model.num_experts, model.experts_per_token)

    @property
    def attention_groups(self) -> int:
        """Data-parallel attention groups D: E / T when experts spread beyond the tensor-parallel group, else 1."""
        t, e = self.tensor_parallel, self.expert_parallel
        return e // t if e > t else 1

    @property
    def num_gpus(self) -> int:
        """GPUs of one replica: D x T."""
        return self.attention_groups * self.tensor_parallel

    @property
    def expert_holders(self) -> int:
        """GPUs the routed experts' weights are divided over (E, or T when every expert is split)."""
        return self.expert_parallel if self.expert_parallel > 1 else self.tensor_parallel

    @property
    def uses_alltoall(self) -> bool:
        """Whether tokens move to their experts by all-to-all (data-parallel attention) instead of an all-reduce."""
        return self.attention_groups > 1

    def routed_share(self, tokens: Any) -> Any:
        """The fraction of one GPU's routed weights the busiest GPU reads when ``tokens`` tokens of the whole
        replica route in one MoE layer (arrays work).

        Experts split T ways: the expected distinct experts over all experts, ``1 - (1 - k/N)^B``. Whole experts
        on E GPUs of n = N/E each: an expert is touched with probability p = ``1 - (1 - k/N)^B``; taking the n
        experts of a GPU as independent Binomial(n, p) draws and the GPUs as independent, the busiest GPU reads
        ``E[max] = sum_{x<n} (1 - F(x)^E)`` of them (within 1 % of a Monte-Carlo count of uniform routing;
        tests/test_expert_parallel.py). One token's k experts land on about 2.5 of 32 per GPU at E = 8, N = 256:
        expert parallelism reads more on its busiest GPU than tensor parallelism at a small batch, and the same
        at a large one.
        """
        if self.num_experts == 0:
            return 0.0
        if self.expert_parallel <= 1:
            return expected_experts(tokens, self.num_experts, self.experts_per_token) / self.num_experts
        table = self._busiest_table()
        if isinstance(tokens, np.ndarray):
            return np.interp(np.maximum(tokens, 0.0), np.arange(table.size, dtype=float), table, right=1.0)
        t = max(float(tokens), 0.0)
        if t >= table.size - 1:
            return 1.0
        low = int(t)
        return float(table[low] + (table[low + 1] - table[low]) * (t - low))

    def _busiest_table(self) -> np.ndarray:
        """The busiest GPU's share at 0, 1, 2, ... tokens, up to where every expert is read."""
        if self._busiest is None:
            from scipy.stats import binom

            n, e = self.num_experts // self.expert_parallel, self.expert_parallel
            miss = 1.0 - self.experts_per_token / self.num_experts
            last = int(np.ceil(np.log(SHARE_TAIL) / np.log(miss))) + 1
            p = 1.0 - np.power(miss, np.arange(last + 1, dtype=float))
            cdf = binom.cdf(np.arange(n)[:, None], n, p[None, :])  # F(x) for x < n
            table = np.sum(1.0 - np.power(cdf, e), axis=0) / n
            table[-1] = 1.0
            object.__setattr__(self, "_busiest", table)
        return self._busiest

    def describe(self) -> dict[str, int]:
        return {"tensor_parallel": self.tensor_parallel, "expert_parallel": self.expert_parallel,
                "attention_groups": self.attention_groups, "num_gpus": self.num_gpus}


@dataclass(frozen=True)
class AllToAll:
    """Seconds of one MoE layer's all-to-all dispatch and combine on one GPU: two operations of fixed latency,
    and the bytes a GPU sends to the other E - 1 over its NVLink at ``efficiency`` of the per-direction peak."""

    latency_s: float
    s_per_token: float  # per token the GPU sends (its share of its group's tokens)

    @classmethod
    def build(cls, layout: MoeLayout, model: ModelConfig, precision: str, nvlink_bytes_per_s: float,
              latency_s: float, efficiency: float) -> "AllToAll":
        if not layout.uses_alltoall:
            return cls(0.0, 0.0)
        e = layout.expert_parallel
        remote = model.experts_per_token * (e - 1) / e  # (token, expert) copies that leave the GPU
        per_copy = dispatch_bytes_per_copy(model.hidden_size, precision) + BF16_BYTES * model.hidden_size
        return cls(2.0 * latency_s, remote * per_copy / (nvlink_bytes_per_s * efficiency))

    def layer_s(self, tokens_per_gpu: float) -> float:
        """One MoE layer's dispatch and combine for ``tokens_per_gpu`` tokens on the busiest GPU."""
        if self.s_per_token == 0.0:
            return 0.0
        return self.latency_s + self.s_per_token * tokens_per_gpu
