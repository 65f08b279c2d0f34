"""The batch sizes an engine captures CUDA graphs for, per arm: with speculation vLLM captures its decode graphs
for batches of whole requests, each verifying q = 1 + K tokens (docs/serving-stacks.md, "Engine releases"). Two rules:

- ``multiples_of_query_len`` (vLLM 0.13.0, ``CompilationConfig.adjust_cudagraph_sizes_for_spec_decode``): every
  capture size rounded up to a multiple of q, those above ``max_cudagraph_capture_size`` dropped; if none is left,
  ``[q]`` when q fits;
- ``requests_times_query_len`` (vLLM 0.34.0): the capture sizes counted in requests, n x q for every size n, those
  above the largest dropped.

A verify batch of more tokens than the largest runs without a graph.
"""

from __future__ import annotations

import copy
from typing import Optional, Sequence

from simlab.hardware.base import CostModel
from simlab.hardware.buckets import Buckets

CARRIED = ("release", "release_named", "gpu", "operations_config")  # a table's attributes set beside its config


def spec_decode_sizes(sizes: Sequence[int], query_len: int, rule: str = "multiples_of_query_len") -> list[int]:
    """The graph sizes of a speculative arm under ``rule`` (the module docstring): ``sizes`` are the engine's own,
    their largest standing for ``max_cudagraph_capture_size``."""
    if not sizes or query_len <= 1:
        return list(sizes)
    largest = max(sizes)
    if rule == "requests_times_query_len":
        return sorted({int(s) * query_len for s in sizes if int(s) * query_len <= largest})
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
        table = TableCostModel(cost.config.model_copy(update={"cuda_graph_buckets": buckets.to_config()}),
                               name=cost.name, source=cost.source)
        for name in CARRIED:  # what a table's builder set beside its config (the operation model's release)
            if name in cost.__dict__:
                setattr(table, name, cost.__dict__[name])
        return table
    copied = copy.copy(cost)
    copied.buckets = buckets
    copied._graph_limit = buckets.largest
    copied.__dict__.pop("_verify_spec", None)  # the compiled spec holds the buckets
    return copied
