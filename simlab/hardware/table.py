"""A cost table (the contract's ``kind: table``): measured or exported curves, interpolated.

- verify: ``step_s`` piecewise linear in batch tokens, flat beyond the ends; with ``context_tokens`` a grid
  (rows by total context tokens, columns by batch tokens), bilinear, flat beyond every edge;
- draft: each entry a constant or a curve over the tokens one drafter forward processes (requests x gamma for
  the parallel block, requests for an autoregressive step or a sequential-head position); missing costs 0;
- prefill: ``per_token_s`` x prefill tokens, added to the decode part (an additive assumption: the table has no
  joint measurement); or a curve of a forward's token-proportional seconds, so that a chunk joining d decode tokens
  adds ``curve(d + p) - curve(d)``, plus its attention pairs (:class:`~simlab.config.hardware.PrefillTable`);
- ``cuda_graph_buckets``: a decode-only step is evaluated at the next captured size.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from simlab.config.hardware import CostCurve, TableHardware
from simlab.hardware.base import ArrayOrFloat, CostModel, check_method, is_array
from simlab.hardware.buckets import Buckets
from simlab.hardware.curves import BatchLookup, Curve, Grid, LinearTail
from simlab.hardware.device import kv_heads_per_gpu
from simlab.hardware.precision import KV_BYTES
from simlab.hardware.specs import MODELS
from simlab.hardware.cost_spec import table_spec

_ZERO = Curve.constant(0.0)
MAX_LOOKUP_BATCH = 65536  # integer batches tabulated for vectorised verify costs (when the grid is flat beyond)


def _draft_curve(entry: Optional[CostCurve]) -> Curve:
    if entry is None:
        return _ZERO
    if isinstance(entry.step_s, list):
        return Curve(entry.batch_tokens or [], entry.step_s)
    return Curve.constant(entry.step_s)


class TableCostModel(CostModel):
    """A :class:`CostModel` read from a :class:`TableHardware` config. ``num_requests`` is ignored."""

    draft_reads_context = False
    lookup_round_s: Optional[float] = None  # a lookup arm's round host time left exposed (None: all of it)

    def __init__(self, cfg: TableHardware, *, name: Optional[str] = None, source: Optional[str] = None) -> None:
        self.config = cfg
        self.name = cfg.name or name or "table"
        self.source = source
        self.buckets = Buckets(cfg.cuda_graph_buckets)
        verify = cfg.verify
        self.has_context = verify.context_tokens is not None
        self._curve: Optional[Curve] = None
        self._grid: Optional[Grid] = None
        if verify.context_tokens is None:
            self._curve = Curve(verify.batch_tokens, verify.step_s)  # type: ignore[arg-type]
        else:
            self._grid = Grid(verify.context_tokens, verify.batch_tokens, verify.step_s)  # type: ignore[arg-type]
        self._autoregressive = _draft_curve(cfg.draft.autoregressive)
        self._autoregressive_round = _draft_curve(cfg.draft.autoregressive_round)
        self._parallel = _draft_curve(cfg.draft.parallel)
        self._sequential_head = _draft_curve(cfg.draft.sequential_head)
        own_mtp = cfg.draft.mtp is not None  # MTP's own step and round, else EAGLE-3's autoregressive ones
        self._mtp = _draft_curve(cfg.draft.mtp) if own_mtp else self._autoregressive
        self._mtp_round = _draft_curve(cfg.draft.mtp_round) if own_mtp else self._autoregressive_round
        draft = cfg.draft  # each forward's seconds per context token of the drafting requests
        self._context_token_s = {kind: float(curve.context_token_s) if curve is not None else 0.0
                                 for kind, curve in (("autoregressive", draft.autoregressive),
                                                     ("parallel", draft.parallel), ("mtp", draft.mtp))}
        if not own_mtp:
            self._context_token_s["mtp"] = self._context_token_s["autoregressive"]
        self._prefill_per_token_s = float(cfg.prefill.per_token_s)
        prefill = cfg.prefill
        self._prefill_forward = None if prefill.batch_tokens is None else LinearTail(prefill.batch_tokens,
                                                                                      prefill.step_s)
        self._pair_s, self._window_pair_s = float(prefill.attention_pair_s), float(prefill.window_pair_s)
        self._window_tokens = float(prefill.window_tokens or 0)
        # flat beyond the last column and the largest bucket: every integer batch above reads the same value
        flat_from = int(np.ceil(max(verify.batch_tokens[-1], self.buckets.largest)))
        self._lookup: Optional[BatchLookup] = None
        if flat_from <= MAX_LOOKUP_BATCH:
            padded = self.buckets.pad_array(np.arange(flat_from + 1))
            self._lookup = BatchLookup(self._grid, self._curve, padded)

    def verify_s(
        self, batch_tokens: ArrayOrFloat, context_tokens: ArrayOrFloat = 0.0, num_requests: ArrayOrFloat = 1
    ) -> ArrayOrFloat:
        if is_array(batch_tokens, context_tokens):
            if self._lookup is not None and isinstance(batch_tokens, np.ndarray) and batch_tokens.dtype.kind in "iu":
                return self._lookup(batch_tokens, context_tokens)
            padded = self.buckets.pad_array(batch_tokens)
            b = np.asarray(batch_tokens, dtype=float)
            if self._grid is not None:
                cost = self._grid(np.asarray(context_tokens, dtype=float), padded)
            else:
                shape = np.broadcast_shapes(b.shape, np.shape(context_tokens))
                cost = np.broadcast_to(self._curve(padded), shape)  # type: ignore[misc]
            return np.where(b > 0, cost, 0.0)
        b = float(batch_tokens)
        if b <= 0:
            return 0.0
        padded = self.buckets.pad(b)
        if self._grid is not None:
            return self._grid.at(float(context_tokens), padded)
        return self._curve.at(padded)  # type: ignore[union-attr]

    def verify_kernel(self) -> Optional[tuple]:
        """The integer-batch table :meth:`verify_s` reads for integer arrays, as a spec
        (:func:`~simlab.hardware.cost_spec.table_spec`); None when the curves are not flat within
        ``MAX_LOOKUP_BATCH`` tokens."""
        return None if self._lookup is None else table_spec(*self._lookup.arrays())

    def step_s(
        self,
        decode_tokens: int,
        context_tokens: float,
        num_requests: int,
        prefill_tokens: int = 0,
        prefill_attn_pairs: float = 0.0,
    ) -> float:
        decode = self.verify_s(decode_tokens, context_tokens) if decode_tokens > 0 else 0.0
        if self._prefill_forward is None or prefill_tokens <= 0:
            return decode + self._prefill_per_token_s * prefill_tokens  # type: ignore[operator]
        forward = self._prefill_forward
        joined = forward.at(decode_tokens + prefill_tokens) - (forward.at(decode_tokens) if decode_tokens > 0 else 0.0)
        attention = self._pair_s * prefill_attn_pairs
        if self._window_pair_s:
            attention += self._window_pair_s * min(prefill_attn_pairs, prefill_tokens * self._window_tokens)
        return decode + joined + attention  # type: ignore[operator]

    def draft_s(self, method: str, gamma: int, num_requests: int, context_tokens: float = 0.0) -> float:
        if method == "none" or gamma <= 0 or num_requests <= 0:
            check_method(method)
            return 0.0
        if method in ("eagle3", "mtp", "dflash", "dspark"):
            per_token_s, per_position = self.draft_context(method)
            return self._draft_at_no_context(method, gamma, num_requests) + (
                per_token_s * (gamma if per_position else 1) * context_tokens)
        if method in ("ngram", "suffix"):  # a host-side lookup, and the round's host time every arm pays
            from simlab.hardware.lookup_cost import lookup_s

            round_s = self.round_host_s() if self.lookup_round_s is None else self.lookup_round_s
            return lookup_s(method, gamma, num_requests) + round_s
        check_method(method)
        if method == "draft_model":
            raise ValueError("a table prices no draft model (a draft_model arm needs a roofline)")
        return 0.0

    def kv_cache_tokens(self) -> Optional[int]:
        return self.config.kv_cache_tokens

    def tree_draft_s(self, method: str, depth: int, topk: int, num_requests: int,
                     context_tokens: float = 0.0) -> Optional[float]:
        """The autoregressive draft curve read at the R roots, then at R x topk frontier nodes per further step."""
        if num_requests <= 0 or depth <= 0:
            return 0.0
        first = self._autoregressive.at(num_requests)
        return float(first + (depth - 1) * self._autoregressive.at(num_requests * topk)
                     + self._autoregressive_round.at(num_requests)
                     + depth * self._context_token_s["autoregressive"] * context_tokens)

    def _draft_at_no_context(self, method: str, gamma: int, num_requests: float) -> float:
        if method == "eagle3":
            return gamma * self._autoregressive.at(num_requests) + self._autoregressive_round.at(num_requests)
        if method == "mtp":
            return gamma * self._mtp.at(num_requests) + self._mtp_round.at(num_requests)
        block = self._parallel.at(num_requests * gamma)
        return block if method == "dflash" else block + gamma * self._sequential_head.at(num_requests)

    def draft_context(self, method: str) -> tuple[float, bool]:
        """``method``'s seconds per context token of the drafting requests for each drafter forward, and whether
        it runs one forward a drafted position (autoregressive) or one a round (a parallel block); (0, False)
        where the table gives none."""
        if method in ("eagle3", "mtp"):
            return self._context_token_s["autoregressive" if method == "eagle3" else "mtp"], True
        if method in ("dflash", "dspark"):
            return self._context_token_s["parallel"], False
        return 0.0, False

    def draft_context_kernel(self, method: str) -> Optional[np.ndarray]:
        """The draft spec compiled code reads its grid with (:func:`~simlab.hardware.cost_spec.table_draft_spec`),
        or None where the drafter's cost reads no context."""
        from simlab.hardware.cost_spec import table_draft_spec

        per_token_s, per_position = self.draft_context(method)
        return table_draft_spec(per_token_s, per_position) if per_token_s > 0.0 else None

    def round_host_s(self) -> float:
        """The engine's host time once per speculative round (``spec_round_overhead_s``) of the roofline this table
        was derived from, which its drafters' curves hold inside them and a lookup drafter, having no curve, pays
        on its own; 0 for a table with no roofline behind it."""
        source = self.roofline_source()
        parameters = (source or {}).get("parameters") or {}
        return float(parameters.get("spec_round_overhead_s") or 0.0)

    def roofline_source(self) -> Optional[dict]:
        """What a profile records of the roofline it was derived from (its ``provenance.source``, or
        ``provenance.kv_roofline`` for a table that takes a roofline's KV: kind, gpu, model, tensor_parallel,
        parameters), or None."""
        provenance = self.config.provenance
        if not isinstance(provenance, dict):
            return None
        for key in ("source", "kv_roofline"):
            source = provenance.get(key)
            if isinstance(source, dict) and source.get("kind") == "roofline":
                return source
        return None

    def _roofline_source(self):
        """(model, tensor parallelism, its roofline parameters) of :meth:`roofline_source`, or None."""
        source = self.roofline_source()
        if source is None:
            return None
        model = MODELS.get(str(source.get("model")))
        parameters = source.get("parameters") or {}
        if model is None or parameters.get("kv_precision", "bf16") not in KV_BYTES:
            return None
        return model, int(source.get("tensor_parallel", 1)), parameters

    def kv_transfer_bytes_per_token(self) -> Optional[float]:
        """From the roofline a profile was derived from, when it names one."""
        source = self._roofline_source()
        if source is None:
            return None
        model, tp, parameters = source
        kv_bytes = KV_BYTES[parameters.get("kv_precision", "bf16")]
        return model.kv_bytes_per_token(kv_heads_per_gpu(model, tp), kv_bytes) * tp

    def draft_kv_bytes_per_token(self, method: str) -> Optional[float]:
        """The drafter's layers' share of the target's KV per token (one layer for EAGLE-3 and MTP,
        ``draft_layers`` for DFlash/DSpark), from the roofline a profile was derived from."""
        if method in ("none", "ngram", "suffix"):
            return 0.0
        if method == "draft_model":
            return None
        target = self.kv_transfer_bytes_per_token()
        if target is None:
            return None
        model, _, parameters = self._roofline_source()
        if model.compressed is not None:  # drafter layers on a DeepSeek-V4 target keep only a sliding window
            return 0.0
        layers = 1 if method in ("eagle3", "mtp") else int(parameters.get("draft_layers", 5))
        return target * layers / model.num_layers

    def draft_prefill_s(self, method: str, tokens: int) -> Optional[float]:
        """One drafter forward over the prompt's tokens, read off the table's draft curves (a parallel block's
        over ``tokens`` tokens; an autoregressive step's over ``tokens`` rows)."""
        check_method(method)
        if method in ("none", "ngram", "suffix") or tokens <= 0:
            return 0.0
        if method == "draft_model":
            return None
        curve = {"eagle3": self._autoregressive, "mtp": self._mtp}.get(method, self._parallel)
        return float(curve.at(tokens))

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "table", "name": self.name}
        if self.source:
            out["source"] = self.source
        out["verify_points"] = len(self.config.verify.batch_tokens)
        out["context_rows"] = len(self.config.verify.context_tokens or [])
        out["cuda_graph_buckets"] = self.buckets.to_config()
        out["kv_cache_tokens"] = self.config.kv_cache_tokens
        if self.config.provenance is not None:
            out["provenance"] = _jsonable(self.config.provenance)
        return out


def _jsonable(value: Any) -> Any:
    """Provenance read from YAML may hold dates; make it JSON-able."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)

