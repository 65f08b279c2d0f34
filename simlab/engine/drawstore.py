"""Draws made ahead, many requests at a time: one arm's store of each request's next decode steps.

Drawing per block costs a few dozen numpy calls whatever the block's size, and on a busy replica a block is a
single step. The store instead draws a request's first ``FIRST_STEPS`` decode steps together with the next
``BATCH`` requests' (requests start in about id order), and later steps in batches of the requests about to run
out. Blocks gather what they need with one fancy index per array. The values are the keyed draws of
:class:`simlab.engine.draws.ArmDraws`, so they do not depend on when or with whom they were drawn.
"""

from __future__ import annotations

import numpy as np

from simlab.engine.draws import ArmDraws

SLOT_STEPS = 128  # most decode steps drawn at a time for one request
MIN_STEPS = 16  # fewest
BATCH = 64  # requests drawn together when one starts
TOP_UP_WITHIN = 32  # when one row runs out, rows within this many steps of their end are topped up too
MARGIN = 1.25  # steps drawn = expected steps to the request's end x MARGIN (rounded up to MIN_STEPS)


class DrawStore:
    """Per request: a slot of ``SLOT_STEPS`` rows of draws and the decode step its first row holds."""

    def __init__(self, draws: ArmDraws, base_logit_of, output_tokens: np.ndarray, tokens_per_step: float) -> None:
        self.draws = draws
        self._logit_of = base_logit_of  # request ids -> [n, G] base logits plus difficulty
        self._output_tokens = output_tokens
        self._tokens_per_step = max(tokens_per_step, 1.0)  # sizes the draws only
        num_requests = len(output_tokens)
        self._num_requests = num_requests
        self.slot = np.full(num_requests, -1, dtype=np.int64)
        self.start = np.zeros(num_requests, dtype=np.int64)
        self.length = np.zeros(num_requests, dtype=np.int64)
        self._done = np.zeros(num_requests, dtype=bool)
        capacity = 2 * BATCH
        self.conf = np.zeros((capacity * SLOT_STEPS, draws.gamma))
        self.true_accepted = np.zeros(capacity * SLOT_STEPS, dtype=np.int64)
        self.step_shift = np.zeros(capacity * SLOT_STEPS)
        self._free = list(range(capacity - 1, -1, -1))

    def gather(self, request_ids: np.ndarray, own_steps: np.ndarray, step_shift: np.ndarray) -> dict:
        """Draws of decode steps ``own_steps`` [K, N] (consecutive along K) of each request; ``step_shift`` [N] is
        z at each request's step before ``own_steps[0]`` (continues the process when more steps are drawn)."""
        first, last = own_steps[0], own_steps[-1]
        missing = self.slot[request_ids] < 0
        if missing.any():
            self._start_batch(request_ids[missing])
        end = self.start[request_ids] + self.length[request_ids]
        short = last >= end
        if short.any():
            # top up every row near its end with it, so that top-ups come in batches
            near = last + TOP_UP_WITHIN >= end
            remaining = self._output_tokens[request_ids[near]] - 1 - first[near]  # decode steps still possible
            self._draw_grouped(request_ids[near], first[near], step_shift[near], remaining, last[near] - first[near] + 1)
        index = self.slot[request_ids][None, :] * SLOT_STEPS + (own_steps - self.start[request_ids][None, :])
        return {"conf": self.conf[index], "true_accepted": self.true_accepted[index],
                "step_shift": self.step_shift[index]}

    def release(self, request_ids: np.ndarray) -> None:
        """Free the slots of finished requests."""
        slots = self.slot[request_ids]
        self._free.extend(int(s) for s in slots if s >= 0)
        self.slot[request_ids] = -1
        self._done[request_ids] = True

    def _start_batch(self, request_ids: np.ndarray) -> None:
        """Draw the first steps of these requests and of the next ones that have not started yet."""
        ids = set(int(r) for r in request_ids)
        upcoming = range(int(request_ids.min()), min(int(request_ids.max()) + BATCH, self._num_requests))
        ids.update(r for r in upcoming if self.slot[r] < 0 and not self._done[r])
        batch = np.array(sorted(ids), dtype=np.int64)
        zeros = np.zeros(len(batch), dtype=np.int64)
        self._draw_grouped(batch, zeros, np.zeros(len(batch)), self._output_tokens[batch] - 1, np.ones(len(batch)))

    def _draw_grouped(self, request_ids, first_step, step_shift, steps_left, at_least) -> None:
        """Draw for each request about the steps it is expected to need (at least ``at_least``), grouped by
        length (a multiple of MIN_STEPS) so that one call serves requests of similar length."""
        expected = np.ceil(steps_left / self._tokens_per_step * MARGIN)
        wanted = np.minimum(np.maximum(np.maximum(expected, at_least), MIN_STEPS), SLOT_STEPS)
        lengths = (np.ceil(wanted / MIN_STEPS) * MIN_STEPS).astype(np.int64)
        for length in np.unique(lengths):
            group = lengths == length
            self._draw(request_ids[group], first_step[group], step_shift[group], int(length))

    def _draw(self, request_ids: np.ndarray, first_step: np.ndarray, step_shift: np.ndarray, num_steps: int) -> None:
        old = self.slot[request_ids]
        self._free.extend(int(s) for s in old if s >= 0)
        while len(self._free) < len(request_ids):
            self._grow()
        slots = np.array([self._free.pop() for _ in range(len(request_ids))], dtype=np.int64)
        conf, true_accepted, shift = self.draws.generate(
            request_ids, self._logit_of(request_ids), first_step, step_shift, num_steps
        )
        rows = (slots[:, None] * SLOT_STEPS + np.arange(num_steps)[None, :]).ravel()
        self.conf[rows] = conf.reshape(-1, conf.shape[-1])
        self.true_accepted[rows] = true_accepted.ravel()
        self.step_shift[rows] = shift.ravel()
        self.slot[request_ids] = slots
        self.start[request_ids] = first_step
        self.length[request_ids] = num_steps

    def _grow(self) -> None:
        old = len(self.true_accepted) // SLOT_STEPS
        self.conf = np.concatenate([self.conf, np.zeros_like(self.conf)])
        self.true_accepted = np.concatenate([self.true_accepted, np.zeros_like(self.true_accepted)])
        self.step_shift = np.concatenate([self.step_shift, np.zeros_like(self.step_shift)])
        self._free.extend(range(2 * old - 1, old - 1, -1))
