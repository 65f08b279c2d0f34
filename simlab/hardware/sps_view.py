"""The step-cost curve a load-aware scheduler reads (its ``sps`` option): the steps' own CUDA-graph staircase, or
the view its engine hands it (docs/schedulers.md, "The curve a scheduler reads").

Real steps cost a staircase: a batch runs the graph captured for the next size up, so the time is flat within a
bucket and jumps at its end. Engines do not hand their schedulers that staircase:

- ``smooth``: SGLang's DSpark fits its measured steps with a smooth T(bs, K) = bias + alpha(bs) + theta(bs + K)
  and Algorithm 1 reads the fit. simlab's smooth view is the same cost model without the CUDA-graph padding: the
  curve through the steps at the captured sizes themselves, where padding costs nothing.
- ``monotone``: vLLM's adaptive verification reads a table of measured step times forced non-decreasing in the
  batch. simlab's monotone view is the smooth view with each row of a table forced non-decreasing (a roofline
  without padding is non-decreasing already).
- ``staircase``: the steps' own costs, padding included (what simlab's schedulers read before engine views; kept
  as a what-if: Algorithm 1 stops at the first bucket edge, where Θ = τ·SPS(B) drops).

The steps are always priced on the staircase; only what the scheduler reads changes.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from simlab.hardware.base import CostModel

SPS_VIEWS = ("staircase", "smooth", "monotone")
ENGINE_VIEWS = {"sglang": "smooth", "vllm": "monotone"}  # an engine without adaptive verification: staircase


def stack_of(cost: CostModel) -> Optional[str]:
    """The serving stack ``cost`` stands for: a roofline's ``stack``, or what a table's provenance says it was
    exported from (None: unknown)."""
    params = getattr(cost, "params", None)
    if params is not None and getattr(params, "stack", None):
        return params.stack
    provenance = getattr(getattr(cost, "config", None), "provenance", None) or {}
    if isinstance(provenance, dict) and isinstance(provenance.get("stack"), str):  # kind: operations names it
        return provenance["stack"]
    source = provenance.get("source") if isinstance(provenance, dict) else None
    if isinstance(source, dict):
        return (source.get("parameters") or {}).get("stack", "vllm" if source.get("gpu") else None)
    return None


def default_view(cost: CostModel) -> str:
    """The view a scheduler reads when its ``sps`` is left out: its engine's own (:data:`ENGINE_VIEWS`)."""
    return ENGINE_VIEWS.get(stack_of(cost) or "", "staircase")


def scheduler_view(cost: CostModel, sps: Optional[str]) -> CostModel:
    """The cost model a scheduler reads for ``sps`` (None: :func:`default_view`); ``cost`` itself for the
    staircase or a model without CUDA-graph padding."""
    view = sps or default_view(cost)
    if view == "staircase":
        return cost
    from simlab.hardware.table import TableCostModel

    if isinstance(cost, TableCostModel):
        if not cost.buckets.enabled and (view == "smooth" or not _needs_monotone(cost)):
            return cost
        return _table_view(cost, monotone=view == "monotone")
    return _unpadded(cost) if cost.buckets.enabled else cost


def _needs_monotone(cost: CostModel) -> bool:
    from simlab.hardware.table import TableCostModel

    if not isinstance(cost, TableCostModel):
        return False
    rows = np.atleast_2d(np.asarray(cost.config.verify.step_s, dtype=float))
    return bool((np.diff(rows, axis=1) < 0).any())


def _unpadded(cost: CostModel) -> CostModel:
    """A roofline that prices a batch at its own size (no CUDA-graph padding); its launch floor, if any, stays
    where the steps pay it."""
    from simlab.hardware.graph_sizes import with_graph_sizes

    view = with_graph_sizes(cost, None)
    view._graph_limit = cost._graph_limit
    return view


def _table_view(cost: CostModel, *, monotone: bool) -> CostModel:
    """A table read without its CUDA-graph buckets (rows forced non-decreasing for ``monotone``)."""
    from simlab.hardware.table import TableCostModel

    verify = cost.config.verify
    step_s = verify.step_s
    if monotone:
        rows = np.maximum.accumulate(np.atleast_2d(np.asarray(step_s, dtype=float)), axis=1)
        step_s = rows.tolist() if verify.context_tokens is not None else rows[0].tolist()
    config = cost.config.model_copy(update={"cuda_graph_buckets": None,
                                            "verify": verify.model_copy(update={"step_s": step_s})})
    return TableCostModel(config, name=cost.name, source=cost.source)
