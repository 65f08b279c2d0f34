"""Building a step's :class:`ScheduleInputs` the same way in the simulator, the real engine and the audit.

The lag rule (docs/engine.md, section 3): a scheduler with a lag λ reads, for each request at decode step s, the
confidences it had at step s − λ; a request younger than that (s < λ) stands in with the arm's prior
confidences. ``lagged_max_len`` is the current ``max_len``. :class:`LagBuffer` keeps the last λ steps of each
request for engines that step one iteration at a time (the simulator reads them from its draw store).
"""

from __future__ import annotations

from collections import deque
from typing import Optional

import numpy as np

from simlab.schedulers.inputs import ScheduleInputs, VerifyCost


def schedule_inputs(
    scheduler,
    *,
    conf: np.ndarray,
    max_len: np.ndarray,
    verify_s: VerifyCost,
    draft_s: float | np.ndarray = 0.0,
    token_budget=None,
    lagged_conf: Optional[np.ndarray] = None,
    lagged_known: Optional[np.ndarray] = None,
    prior_conf: Optional[np.ndarray] = None,
    true_accepted: Optional[np.ndarray] = None,
    num_requests: Optional[np.ndarray] = None,
) -> ScheduleInputs:
    """The inputs of ``scheduler`` (a :class:`~simlab.schedulers.Scheduler`) for one step or a stack of steps.

    For a lagged scheduler, ``lagged_conf`` [S, R, G] holds each request's confidences ``lag_steps`` decode steps
    earlier where ``lagged_known`` [S, R] is True; elsewhere the ``prior_conf`` [G] stands in. Other schedulers
    get no lagged inputs."""
    lagged = lagged_max_len = None
    if scheduler.lag_steps:
        if lagged_conf is None or lagged_known is None or prior_conf is None:
            raise ValueError(f"scheduler {scheduler.kind!r} needs lagged confidences, their mask and a prior")
        lagged = np.where(lagged_known[..., None], lagged_conf, prior_conf)
        lagged_max_len = max_len
    return ScheduleInputs(
        conf=conf, max_len=max_len, verify_s=verify_s, draft_s=draft_s, token_budget=token_budget,
        lagged_conf=lagged, lagged_max_len=lagged_max_len, true_accepted=true_accepted, num_requests=num_requests,
    )


class LagBuffer:
    """The confidences of each request's last ``lag`` decode steps (a step-at-a-time engine's lag state)."""

    def __init__(self, lag: int, gamma: int) -> None:
        self.lag = lag
        self.gamma = gamma
        self._history: dict[int, deque] = {}

    def lagged(self, request_ids) -> tuple[np.ndarray, np.ndarray]:
        """For requests about to take their next decode step: their confidences ``lag`` steps earlier [R, G]
        (zeros where unknown) and whether they have them [R]."""
        conf = np.zeros((len(request_ids), self.gamma))
        known = np.zeros(len(request_ids), dtype=bool)
        for row, request_id in enumerate(request_ids):
            history = self._history.get(int(request_id))
            if history is not None and len(history) == self.lag:
                conf[row], known[row] = history[0], True
        return conf, known

    def push(self, request_ids, conf: np.ndarray) -> None:
        """Record this step's confidences [R, G] of the requests (after scheduling it)."""
        if self.lag == 0:
            return
        for row, request_id in enumerate(request_ids):
            history = self._history.setdefault(int(request_id), deque(maxlen=self.lag))
            history.append(np.array(conf[row], dtype=float))

    def drop(self, request_id: int) -> None:
        """Forget a finished request."""
        self._history.pop(int(request_id), None)


__all__ = ["LagBuffer", "schedule_inputs"]
