"""How one arm drafts and schedules, and the requests in decode on one replica (block.py plans their steps)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple, Optional

import numpy as np

from simlab.acceptance.draws import ArmDraws
from simlab.hardware.cost_spec import table_spec
from simlab.schedulers import Scheduler


class BlockKernel(NamedTuple):
    """What compiled code needs to step an arm's blocks (:meth:`ArmPolicy.block_kernel`)."""

    code: int  # the scheduler's block code (the registry's)
    threshold: float  # threshold's
    cumulative: bool  # threshold's
    slo_ms: float  # adaptive's TPOT limit (0: none)
    lagged: bool  # the scheduler reads confidences lag_steps earlier
    cost: tuple  # the verify spec the scheduler reads (a placeholder when it reads none)
    draft: np.ndarray  # the drafter's spec the scheduler reads (empty: the draft grid, or none read)
    price: Optional[tuple]  # (verify spec, draft spec) pricing every step, or None: priced in numpy
    verified_by_length: np.ndarray  # [γ + 1] draft tokens verified when a request may verify ℓ (a tree's nodes)


@dataclass(frozen=True)
class ArmPolicy:
    """How one arm drafts and schedules: the pieces a block computation needs."""

    method: str
    gamma: int
    scheduler: Optional[Scheduler]
    draws: Optional[ArmDraws]
    cost: object  # simlab.hardware CostModel
    max_batch_tokens: int
    prior_conf: np.ndarray  # [G] stands in for lagged confidences a request does not have yet
    replay: Optional[object] = None  # simlab.acceptance.replay.BoundReplay: recorded outcomes instead of draws
    tree: Optional[object] = None  # simlab.acceptance.tree.TreeDraws of an EAGLE-3 tree arm
    # the cost model the engine prices verify steps on, where the scheduler reads another view of it (its sps)
    step_cost: Optional[object] = None
    max_concurrency: int = 0  # speculation off in a step where more requests decode than this (0: never off)
    max_drafting: int = 0  # at most this many requests draft a step, the first admitted (0: every one)
    # caches, never passed in, so that a dataclasses.replace copy (another cost, another scheduler) starts empty
    _draft_grid: list = field(default_factory=list, init=False, repr=False, compare=False)  # [[length, count]]
    _kernel: list = field(default_factory=list, init=False, repr=False, compare=False)  # [the compiled block's]

    def draft_s(self, num_requests: np.ndarray, context_tokens: np.ndarray) -> np.ndarray:
        """Drafter seconds of each step when all ``num_requests`` [S] requests draft γ positions, holding
        ``context_tokens`` [S] KV tokens in total."""
        counts = np.asarray(num_requests, dtype=np.int64)
        if self.gamma == 0:
            return np.zeros(counts.shape)
        if self.cost.draft_reads_context:
            return self._each(np.full(counts.shape, self.gamma), counts, context_tokens)
        lengths = np.full(counts.shape, self.gamma)
        return self._with_context(self._grid(counts)[self.gamma, counts], lengths, counts, context_tokens)

    def draft_cost(self, draft_len: np.ndarray, num_drafting: np.ndarray, context_tokens: np.ndarray) -> np.ndarray:
        """Drafter seconds of each step in which ``num_drafting`` [S] requests draft ``draft_len`` [S] positions
        (a draft length of 0 costs nothing); ``context_tokens`` [S] is the KV those requests hold. Arrays may have
        leading axes ([..., S]: several plans of each step); the result is elementwise."""
        counts = np.asarray(num_drafting, dtype=np.int64)
        lengths = np.asarray(draft_len, dtype=np.int64)
        if self.gamma == 0:
            return np.zeros(counts.shape)
        if self.cost.draft_reads_context:
            return self._each(lengths, counts, context_tokens)
        return self._with_context(self._grid(counts)[lengths, counts], lengths, counts, context_tokens)

    def _with_context(self, grid_s: np.ndarray, lengths: np.ndarray, counts: np.ndarray,
                      context_tokens: np.ndarray) -> np.ndarray:
        """A grid's seconds (at no context) plus a table drafter's context term (:meth:`CostModel.draft_context`):
        its seconds per context token a forward, times its forwards, times the drafting requests' context."""
        per_token_s, per_position = self.cost.draft_context(self.method)
        if per_token_s == 0.0:
            return grid_s
        lengths, counts = np.broadcast_arrays(lengths, counts)
        forwards = lengths.astype(float) if per_position else np.ones(lengths.shape)
        term = per_token_s * forwards * np.asarray(context_tokens, dtype=float)
        return grid_s + np.where((lengths > 0) & (counts > 0), term, 0.0)

    def planned_draft_s(self, draft_len: np.ndarray, num_drafting: np.ndarray, num_decoding: np.ndarray,
                        context_tokens: np.ndarray) -> np.ndarray:
        """:meth:`draft_cost` when only ``num_drafting`` of the ``num_decoding`` [S] requests draft: a drafter
        that reads its context reads their share of the batch's ``context_tokens``."""
        total = np.asarray(context_tokens, dtype=float)
        share = np.where(num_drafting == num_decoding, total, total * num_drafting / np.maximum(num_decoding, 1))
        return self.draft_cost(draft_len, num_drafting, share)

    def _each(self, lengths: np.ndarray, counts: np.ndarray, context_tokens: np.ndarray) -> np.ndarray:
        lengths, counts, contexts = np.broadcast_arrays(lengths, counts, np.asarray(context_tokens, dtype=float))
        seconds = [self._draft(r, c, d)
                   for r, c, d in zip(counts.ravel().tolist(), contexts.ravel().tolist(), lengths.ravel().tolist())]
        return np.array(seconds, dtype=float).reshape(counts.shape)

    def draft_grid(self, num_requests: int) -> np.ndarray:
        """[γ + 1, > num_requests] drafter seconds by draft length and requests drafting (a drafter whose cost
        ignores context), as :meth:`draft_cost` reads them."""
        return self._grid(np.array([max(num_requests, 1)]))

    def _grid(self, counts: np.ndarray) -> np.ndarray:
        """Seconds by draft length 0..γ and request count (a model whose cost ignores context), grown as needed."""
        grids = self._draft_grid
        largest = int(np.maximum.reduce(counts, axis=None, initial=0))
        if not grids or largest >= grids[0].shape[1]:
            size = max(largest + 1, 2 * grids[0].shape[1] if grids else 0, 256)
            grid = np.array([[self._draft(r, 0.0, d) for r in range(size)] for d in range(self.gamma + 1)])
            grids[:] = [grid]
        return grids[0]

    def _draft(self, num_requests: int, context_tokens: float, draft_len: int) -> float:
        if num_requests == 0 or draft_len == 0:
            return 0.0
        if self.tree is not None:
            return float(self.cost.tree_draft_s(self.method, draft_len, self.tree.topk, num_requests, context_tokens))
        return float(self.cost.draft_s(self.method, draft_len, num_requests, context_tokens))

    def verify_tokens(self, lengths: np.ndarray) -> np.ndarray:
        """Draft tokens verified by requests that may verify ``lengths`` positions (a tree: its nodes that deep)."""
        if self.tree is None:
            return lengths
        return self.tree.nodes_within()[lengths]

    @property
    def lookahead_slots(self) -> Optional[np.ndarray]:
        """A tree arm's KV lookahead slots by verify length (its nodes that deep); None: the length itself."""
        return self.tree.nodes_within() if self.tree is not None else None

    @property
    def max_tokens_per_request(self) -> int:
        """The most tokens a decoding request puts in one step: its own and every draft token it may verify."""
        return 1 + (self.tree.num_nodes if self.tree is not None else self.gamma)

    def block_kernel(self) -> Optional[BlockKernel]:
        """What compiled code needs to step this arm's blocks (:mod:`simlab.engine.block_kernel`), or None (the
        numpy block): a chain drafter with drawn outcomes whose scheduler is ``fixed`` or ``threshold``, or
        ``hardware_aware``, ``async_topk``, ``oracle``, ``goodput`` or ``adaptive`` (with or without ``slo_tpot_ms``)
        on a cost model whose verify seconds compiled code prices (and, for the last two, whose draft seconds it prices:
        a draft cost that ignores context, or a roofline's drafter); or a draft tree with drawn outcomes (always
        ``fixed``)."""
        if not self._kernel:
            self._kernel.append(self._block_kernel())
        return self._kernel[0]

    def _block_kernel(self) -> Optional[BlockKernel]:
        if self.gamma == 0 or self.replay is not None or self.scheduler is None:
            return None
        entry, params = self.scheduler.entry, self.scheduler.params
        if entry.block_code is None or (self.tree is not None and entry.reads_verify_cost):
            return None
        cost = self.cost.verify_kernel() if entry.reads_verify_cost else _NO_COST
        draft = self._grid_draft()  # a draft cost that ignores context is read from draft_grid
        if entry.reads_draft_cost and self.cost.draft_reads_context:
            draft = self.cost.draft_kernel(self.method)
        if cost is None or draft is None:
            return None
        return BlockKernel(
            entry.block_code, float(params.get("threshold", 0.0)), bool(params.get("cumulative", False)),
            float(params.get("slo_tpot_ms") or 0.0), self.lag_steps > 0, cost, draft, self._price_kernel(),
            np.asarray(self.verify_tokens(np.arange(self.gamma + 1)), dtype=np.int64))

    @property
    def verify_priced_by(self):
        """The cost model the engine prices this arm's verify steps on (the scheduler may read another view)."""
        return self.cost if self.step_cost is None else self.step_cost

    def _price_kernel(self) -> Optional[tuple]:
        """What compiled code needs to price a step as :meth:`draft_s` (or :meth:`planned_draft_s`) and
        :attr:`verify_priced_by`'s ``verify_s`` do: the verify spec and the drafter's spec (empty: the draft grid
        prices it), or None where compiled code cannot price them."""
        verify = self.verify_priced_by.verify_kernel()
        draft = self._grid_draft()  # the draft grid (a tree's draft too)
        if self.cost.draft_reads_context:  # a roofline's drafter; a tree's is priced in numpy
            draft = self.cost.draft_kernel(self.method) if self.tree is None else None
        return None if verify is None or draft is None else (verify, draft)

    def _grid_draft(self) -> np.ndarray:
        """The draft spec compiled code reads the draft grid with: empty, or a table drafter's context term."""
        spec = self.cost.draft_context_kernel(self.method)
        return _GRID_DRAFT if spec is None else spec

    @property
    def plans_draft(self) -> bool:
        """Whether a block records each step's draft plan (draft length, requests drafting): a scheduler that plans
        its draft, or an arm whose speculation turns off above ``max_concurrency`` or drafts for at most
        ``max_drafting`` requests."""
        return bool(self.scheduler is not None
                    and (self.scheduler.plans_draft or self.max_concurrency > 0 or self.max_drafting > 0))

    @property
    def lag_steps(self) -> int:
        return self.scheduler.lag_steps if self.scheduler is not None else 0

    @property
    def reads_context(self) -> bool:
        return bool(self.scheduler is not None and self.scheduler.entry.reads_verify_cost and self.cost.has_context)


_NO_COST = table_spec(np.zeros(1), 1, np.zeros(0))  # a scheduler that reads no verify cost
_GRID_DRAFT = np.zeros(0)


class DecodeSet:
    """The requests decoding on one replica, in admission order, as columns.

    Columns are never written in place: every change installs new arrays, so a block's roster can hold the
    current ones without copying them."""

    COLUMNS = ("request_id", "remaining", "context", "steps")

    def __init__(self, policy: ArmPolicy, store=None) -> None:
        self.policy = policy
        self.store = store  # the arm's DrawStore (None without drafting)
        self.request_id = np.zeros(0, dtype=np.int64)
        self.remaining = np.zeros(0, dtype=np.int64)  # tokens still to emit
        self.context = np.zeros(0, dtype=np.int64)  # KV tokens held
        self.steps = np.zeros(0, dtype=np.int64)  # decode steps done

    def __len__(self) -> int:
        return len(self.request_id)

    def extend(self, columns: dict[str, np.ndarray]) -> None:
        """Append rows (every column of :attr:`COLUMNS`, same length), e.g. requests that joined in a block."""
        if len(columns["request_id"]):
            for name in self.COLUMNS:
                setattr(self, name, np.concatenate([getattr(self, name), columns[name]]))

    def overwrite(self, columns: dict[str, np.ndarray]) -> None:
        """Replace every row with ``columns`` (every column of :attr:`COLUMNS`, the same length each; the
        arrays are kept, not copied, and must not be written afterwards)."""
        for name in self.COLUMNS:
            setattr(self, name, columns[name])
