"""How one arm drafts and schedules, and the requests in decode on one replica (block.py plans their steps)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from simlab.engine.draws import ArmDraws
from simlab.schedulers import Scheduler


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
    _draft_table: list = field(default_factory=lambda: [np.zeros(0)], repr=False, compare=False)  # [by count]

    def draft_s(self, num_requests: np.ndarray, context_tokens: np.ndarray) -> np.ndarray:
        """Drafter seconds of each step for ``num_requests`` [S] requests holding ``context_tokens`` [S] KV tokens
        in total."""
        counts = np.asarray(num_requests, dtype=np.int64)
        if self.gamma == 0:
            return np.zeros(counts.shape)
        if self.cost.draft_reads_context:
            contexts = np.asarray(context_tokens, dtype=float)
            seconds = [self._draft(r, c) for r, c in zip(counts.tolist(), contexts.tolist())]
            return np.array(seconds).reshape(counts.shape)
        table = self._draft_table[0]  # the cost is a function of the request count: tabulated as counts come
        if np.maximum.reduce(counts, axis=None, initial=0) >= len(table):
            size = max(int(np.maximum.reduce(counts, axis=None)) + 1, 2 * len(table), 256)
            table = self._draft_table[0] = np.array([self._draft(r, 0.0) for r in range(size)])
        return table[counts]

    def _draft(self, num_requests: int, context_tokens: float) -> float:
        if num_requests == 0:
            return 0.0
        return float(self.cost.draft_s(self.method, self.gamma, num_requests, context_tokens))

    @property
    def lag_steps(self) -> int:
        return self.scheduler.lag_steps if self.scheduler is not None else 0

    @property
    def reads_context(self) -> bool:
        return bool(self.scheduler is not None and self.scheduler.entry.reads_verify_cost and self.cost.has_context)


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
