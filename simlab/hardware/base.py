"""The cost model the engine and the schedulers read: seconds per target forward and per drafter step."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Optional, Union

import numpy as np

from simlab.hardware.buckets import Buckets

ArrayOrFloat = Union[float, np.ndarray]

DRAFT_METHODS: tuple[str, ...] = ("none", "mtp", "eagle3", "dflash", "dspark", "draft_model", "ngram", "suffix")
AUTOREGRESSIVE_METHODS = frozenset({"mtp", "eagle3"})


class CostModel(ABC):
    """Seconds for one engine iteration's target forward and for the drafter, on one replica.

    ``verify_s`` is vectorised (numpy broadcasting over ``batch_tokens``, ``context_tokens`` and
    ``num_requests``); scalar calls of ``verify_s``, ``step_s`` and ``draft_s`` stay in plain Python and cost a
    few microseconds, since the engine makes them once per step.
    """

    name: str
    has_context: bool  # True when the verify cost depends on the context (KV) tokens
    draft_reads_context: bool = True  # False when draft_s ignores context_tokens (tables)
    buckets: Buckets
    release = None  # the serving stack's engine release (simlab.hardware.releases.EngineRelease), if it has one
    release_named = False  # whether the scenario named that release (stack_version) or took the newest known

    @abstractmethod
    def verify_s(
        self, batch_tokens: ArrayOrFloat, context_tokens: ArrayOrFloat = 0.0, num_requests: ArrayOrFloat = 1
    ) -> ArrayOrFloat:
        """Seconds for one decode-only target forward over ``batch_tokens`` decode/verify tokens.

        ``context_tokens`` is the total KV tokens the batch's requests hold (the sum of their context lengths)
        and ``num_requests`` the number of requests the tokens belong to. Any argument may be a numpy array
        (e.g. batch tokens ``[S, n]`` and contexts ``[S, 1]``): the result is the broadcast array. Scalars in,
        float out. Includes CUDA-graph bucket padding; zero tokens cost 0.
        """

    @abstractmethod
    def step_s(
        self,
        decode_tokens: int,
        context_tokens: float,
        num_requests: int,
        prefill_tokens: int = 0,
        prefill_attn_pairs: float = 0.0,
    ) -> float:
        """One engine iteration's target forward: decode/verify tokens plus prefill chunk tokens (mixed batch).

        ``context_tokens`` and ``num_requests`` describe the decode part, as in :meth:`verify_s`.
        ``prefill_attn_pairs`` is the sum over prefill chunks of ``chunk * (prior_context + chunk / 2)``, the
        query-key pairs the chunks' attention computes. A step without prefill tokens equals :meth:`verify_s`.
        """

    @abstractmethod
    def draft_s(self, method: str, gamma: int, num_requests: int, context_tokens: float = 0.0) -> float:
        """Drafter seconds for one step proposing ``gamma`` tokens for each of ``num_requests`` requests.

        ``method`` is one of none, mtp, eagle3, dflash, dspark. ``context_tokens`` (total KV tokens of those
        requests) matters only to models that charge the drafter's own KV reads (the roofline); tables ignore it.
        """

    @abstractmethod
    def kv_cache_tokens(self) -> Optional[int]:
        """KV-cache capacity in tokens for ``engine.kv_cache_tokens: auto``; None when unknown."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """JSON-able provenance: where the numbers come from and every parameter in force."""

    def tree_draft_s(self, method: str, depth: int, topk: int, num_requests: int,
                     context_tokens: float = 0.0) -> Optional[float]:
        """Drafter seconds of one round of an EAGLE-3 draft tree per request (docs/acceptance.md section 8):
        ``depth`` sequential forwards, the first over each request's last token, the others over its ``topk``
        frontier nodes; None when the model cannot price it."""
        return None

    def draft_kv_bytes_per_token(self, method: str) -> Optional[float]:
        """Bytes per token of the drafter's own KV over one replica (0 for ``none``); None when unknown."""
        return 0.0 if method == "none" else None

    def draft_prefill_s(self, method: str, tokens: int) -> Optional[float]:
        """Seconds one replica takes to build the drafter's KV over a prompt of ``tokens`` tokens (a decode
        replica recomputing it after a disaggregated prefill); None when unknown."""
        return 0.0 if method == "none" else None

    def kv_transfer_bytes_per_token(self) -> Optional[float]:
        """KV bytes per token of one replica's whole KV (every GPU's share), what a disaggregated engine moves
        from a prefill to a decode replica; None when the model does not know it (tables)."""
        return None

    def verify_kernel(self) -> Optional[tuple]:
        """Its verify seconds in the form compiled code reads (:mod:`simlab.hardware.cost_spec`), for the
        simulator's compiled block; None when compiled code does not price this model (the block stays numpy)."""
        return None

    def draft_context(self, method: str) -> tuple[float, bool]:
        """A drafter whose cost ignores context but for a linear term (a table's): seconds per context token of the
        drafting requests for each forward, and whether a forward runs per drafted position; (0, False): none."""
        return 0.0, False

    def draft_context_kernel(self, method: str) -> Optional[np.ndarray]:
        """:meth:`draft_context` in the form compiled code reads beside the draft grid, or None where it is 0."""
        return None

    def draft_kernel(self, method: str) -> Optional[np.ndarray]:
        """A drafter whose cost reads context (``draft_reads_context``): its draft seconds in the form compiled code
        reads (:func:`simlab.hardware.cost_spec.roofline_draft_spec`), or None (the block stays numpy)."""
        return None

    def prefill_s(self, prefill_tokens: int, prefill_attn_pairs: Optional[float] = None) -> float:
        """A pure prefill step; ``prefill_attn_pairs`` defaults to one chunk starting at context 0."""
        if prefill_attn_pairs is None:
            prefill_attn_pairs = prefill_tokens * prefill_tokens / 2.0
        return self.step_s(0, 0.0, 0, prefill_tokens, prefill_attn_pairs)


def check_method(method: str) -> None:
    """Raise ValueError for a drafter method the cost models do not know (a programming error upstream)."""
    if method not in DRAFT_METHODS:
        raise ValueError(f"unknown drafter method {method!r}; valid: {', '.join(DRAFT_METHODS)}")


def is_array(*values: Any) -> bool:
    """Whether any of ``values`` is a numpy array."""
    for value in values:
        if isinstance(value, np.ndarray):
            return True
    return False
