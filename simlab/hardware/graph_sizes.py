"""The batch sizes an engine captures CUDA graphs for, per arm: with speculation vLLM captures its decode graphs
for batches of whole requests, each verifying 1 + K tokens (docs/hardware.md, "Engine releases").

``vllm/config/compilation.py``, ``CompilationConfig.adjust_cudagraph_sizes_for_spec_decode``: every capture size is
rounded up to a multiple of the query length q = 1 + K and those above ``max_cudagraph_capture_size`` are dropped;
if none is left, ``[q]`` when q fits. A verify batch of more tokens than the largest runs without a graph.
"""

from __future__ import annotations

import copy
from typing import Optional, Sequence

from simlab.hardware.base import CostModel
from simlab.hardware.buckets import Buckets


def spec_decode_sizes(sizes: Sequence[int], query_len: int) -> list[int]:
    """``sizes`` rounded up to multiples of ``query_len``, those above the largest of ``sizes`` dropped (vLLM's
    rule; the largest stands for ``max_cudagraph_capture_size``)."""
    if not sizes or query_len <= 1:
        return list(sizes)
    largest = max(sizes)
    rounded = sorted({-(-int(s) // query_len) * query_len for s in sizes} - {0})
    kept = [s for s in rounded if s <= largest]
    return kept or ([query_len] if query_len <= largest else [])


def with_graph_sizes(cost: CostModel, sizes: Optional[Sequence[int]]) -> CostModel:
    """A copy of ``cost`` whose steps pad to ``sizes`` (None: no CUDA-graph padding); ``cost`` itself when they
    are its own."""
    buckets = Buckets(sizes)
    if buckets.sizes == cost.buckets.sizes:
        return cost
    from simlab.hardware.table import TableCostModel

    if isinstance(cost, TableCostModel):
        return TableCostModel(cost.config.model_copy(update={"cuda_graph_buckets": buckets.to_config()}),
                              name=cost.name, source=cost.source)
    copied = copy.copy(cost)
    copied.buckets = buckets
    copied._graph_limit = buckets.largest
    copied.__dict__.pop("_verify_spec", None)  # the compiled spec holds the buckets
    return copied
