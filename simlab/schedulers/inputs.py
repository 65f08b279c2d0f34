"""What a verify-length scheduler sees in one engine step (or a stack of steps)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

VerifyCost = Callable[[np.ndarray], np.ndarray]


@dataclass(slots=True)
class ScheduleInputs:
    """Arrays are stacked over S steps (S = 1 for a single step), R requests and G drafted positions.

    conf:           [S, R, G] the confidence head's (calibrated) conditional acceptance estimates c_hat_k.
    max_len:        [S, R] how many leading positions may be verified (gamma, or fewer near a request's end).
    verify_s:       target seconds for a step of B batch tokens; takes B as an int array [1 or S, n] and
                    returns seconds broadcastable to [S, n] (the step's context is bound in by the caller).
    draft_s:        seconds the drafter spent this step (a scalar or [S]); the goodput objective adds it.
    token_budget:   the most verify tokens (sum of lengths) a step may hold (a scalar or [S]), or None.
    lagged_conf:    [S, R, G] estimates from ``lag`` steps earlier (async_topk, goodput).
    lagged_max_len: [S, R] the lengths that were allowed then.
    true_accepted:  [S, R] how many leading drafted positions the target will accept (oracle only).
    num_requests:   [S] requests in the batch at each step, when some of the R rows sit a step out (their
                    max_len is 0 and they add no anchor token); None means all R every step.
    draft_cost:     (draft lengths [..., S], requests drafting [..., S]) -> drafter seconds [..., S] (elementwise);
                    what drafting would cost
                    (schedulers that plan the draft read it).
    min_budget:     [S] candidates a step verifies at least (set by a scheduler's draft plan), or None.
    """

    conf: np.ndarray
    max_len: np.ndarray
    verify_s: VerifyCost
    draft_s: float | np.ndarray = 0.0
    token_budget: Optional[int] = None
    lagged_conf: Optional[np.ndarray] = None
    lagged_max_len: Optional[np.ndarray] = None
    true_accepted: Optional[np.ndarray] = None
    num_requests: Optional[np.ndarray] = None
    draft_cost: Optional[Callable[[np.ndarray, np.ndarray], np.ndarray]] = None
    min_budget: Optional[np.ndarray] = None

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.conf.shape  # type: ignore[return-value]
