"""The verify length of one round, decided by the registry's own scheduler functions (S = 1, R = 1).

Decisions use floats (they are discrete); only the probabilities of the enumeration are exact.
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from simlab.schedulers import Scheduler
from simlab.schedulers.step_inputs import schedule_inputs

Confidences = tuple[float, ...]


def verify_seconds(sps: dict[int, float]) -> Callable[[np.ndarray], np.ndarray]:
    """The ``verify_s`` cost for :class:`ScheduleInputs`: 1 / SPS(B) seconds for B batch tokens.

    A B absent from the table is unavailable: it costs +inf seconds, so tau * SPS(B) there is 0 and no
    cost-aware scheduler prefers it to verifying nothing (B = 1, which every audit file must list).
    """
    sizes = np.array(sorted(sps), dtype=np.int64)
    seconds = np.array([1.0 / sps[b] for b in sorted(sps)], dtype=float)

    def cost(batch_tokens: np.ndarray) -> np.ndarray:
        b = np.asarray(batch_tokens, dtype=np.int64)
        where = np.searchsorted(sizes, b).clip(max=len(sizes) - 1)
        return np.where(sizes[where] == b, seconds[where], np.inf)

    return cost


class VerifyLengthChooser:
    """Calls a registry scheduler on one request's confidences and returns its verify length l in 0..gamma.

    ``lag`` is how many rounds back the lagged confidences come from (0: the scheduler reads none); a round with
    no confidences that far back (``lagged`` None) is scheduled with the ``prior`` instead, by the helper the
    simulator and the real engine use. A scheduler that plans its draft (``adaptive``) plans it first from the
    lagged confidences and ``draft_s`` (seconds to draft d = 0..gamma positions). Results are memoised on
    (current, lagged) confidences: a scheduler is a pure function of its inputs.
    """

    def __init__(self, scheduler: Scheduler, gamma: int, sps: dict[int, float], draft_s: tuple[float, ...] = (),
                 prior: Optional[Confidences] = None) -> None:
        self.scheduler = scheduler
        self._draft_s = np.array(draft_s if draft_s else (0.0,) * (gamma + 1), dtype=float)
        self.gamma = gamma
        self.lag = scheduler.lag_steps
        self._cost = verify_seconds(sps)
        self._max_len = np.array([[gamma]], dtype=np.int64)
        self._prior = None if prior is None else np.array(prior, dtype=float)
        self._memo: dict[tuple[Confidences, Optional[Confidences]], int] = {}

    def __call__(self, conf: Confidences, lagged: Optional[Confidences]) -> int:
        key = (conf, lagged)
        if key not in self._memo:
            self._memo[key] = self._decide(conf, lagged)
        return self._memo[key]

    def _decide(self, conf: Confidences, lagged: Optional[Confidences]) -> int:
        known = lagged is not None
        inputs = schedule_inputs(
            self.scheduler,
            conf=np.array([[conf]], dtype=float),
            max_len=self._max_len,
            verify_s=self._cost,
            lagged_conf=np.array([[lagged]], dtype=float) if known else np.zeros((1, 1, self.gamma)),
            lagged_known=np.array([[known]]),
            prior_conf=self._prior,
        )
        if self.scheduler.plans_draft:  # the draft plan first: how much to draft, from the lagged confidences
            inputs.draft_cost = lambda lengths, drafting: np.where(drafting > 0, self._draft_s[lengths], 0.0)
            draft_len, drafts, inputs.min_budget = self.scheduler.plan_draft(inputs)
            inputs.max_len = np.where(drafts, np.minimum(self._max_len, draft_len[:, None]), 0)
            inputs.draft_s = inputs.draft_cost(draft_len, np.add.reduce(drafts, axis=1))
        length = int(np.asarray(self.scheduler(inputs)).reshape(-1)[0])
        if not 0 <= length <= self.gamma:
            raise RuntimeError(
                f"scheduler {self.scheduler.kind!r} chose verify length {length} outside 0..{self.gamma}"
            )
        return length
