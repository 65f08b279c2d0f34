"""Draws made ahead, many requests at a time: one arm's store of each request's next decode steps.

Drawing per block costs a few dozen numpy calls whatever the block's size, and on a busy replica a block is a
single step. The store instead draws, in one call, a ragged run of steps per request: when a request starts,
about the steps it is expected to need, together with the next ``BATCH`` requests (requests start in about id
order); later, the requests about to run out are extended in batches. A block gathers what it needs with one
fancy index per array, and stops where a request would decode beyond its run. The values are the keyed draws
of :class:`simlab.acceptance.draws.ArmDraws`, so they do not depend on when or with whom they were drawn.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from simlab.acceptance.draws import ArmDraws

SLOT_STEPS = 256  # most decode steps drawn at a time for one request
SLACK_STEPS = 4  # drawn beyond the expected steps
BATCH = 64  # requests drawn together when one starts
TOP_UP_WITHIN = 32  # when one row is short, rows within this many steps of being short are extended too
MARGIN = 1.5  # steps drawn = expected steps to the request's end x MARGIN + SLACK_STEPS
NEED_MARGIN = 1.2  # a block extends the draws of requests holding fewer than this x expected steps + SLACK_STEPS


class DrawStore:
    """Per request: a slot of ``SLOT_STEPS`` rows of draws, the decode step its first row holds and the step
    after its last. The step-difficulty process z is kept with the draws, so that extending a request's run
    continues it."""

    def __init__(self, draws: ArmDraws, base_logit_of, output_tokens: np.ndarray, lag_steps: int = 0,
                 match_of=None) -> None:
        """``match_of`` (a lookup drafter's): request ids -> each one's chance that a round finds a match."""
        self.draws = draws
        self._match_of = match_of
        self.lag_steps = lag_steps  # steps kept before a request's next one (for lagged confidences)
        self._logit_of = base_logit_of  # request ids -> [n, G] base logits plus difficulty
        self._output_tokens = output_tokens
        num_requests = len(output_tokens)
        self._num_requests = num_requests
        self.slot = np.full(num_requests, -1, dtype=np.int64)
        self.start = np.zeros(num_requests, dtype=np.int64)
        self.end = np.zeros(num_requests, dtype=np.int64)  # one past the last step held
        self.row0 = np.zeros(num_requests, dtype=np.int64)  # the row step 0 would have: slot * SLOT_STEPS - start
        self._done = np.zeros(num_requests, dtype=bool)
        self._first_rate = np.ones(num_requests)  # tokens per step expected before a request's first step
        capacity = 2 * BATCH
        self.conf = np.zeros((capacity * SLOT_STEPS, draws.gamma))
        self.true_accepted = np.zeros(capacity * SLOT_STEPS, dtype=np.int64)
        self.proposed = np.zeros(capacity * SLOT_STEPS, dtype=np.int64)  # positions each step proposes
        self.step_shift = np.zeros(capacity * SLOT_STEPS)
        self._free = list(range(capacity - 1, -1, -1))

    def gather(self, request_ids: np.ndarray, own_steps: np.ndarray, remaining: np.ndarray) -> dict:
        """Draws of decode steps ``own_steps`` [K, N] (non-decreasing along K, starting at each request's next
        step) of each request; ``remaining`` [N] is the tokens each has still to emit.

        Each request gets at least the steps it is expected to need (``held`` [N] says how many steps from its
        first are real draws; rows beyond repeat the last one held and must not be used)."""
        first = own_steps[0]
        base, end, start = self.ready(request_ids, first, own_steps[-1], remaining, own_steps.shape[0] == 1)
        index = base + np.minimum(own_steps, end - 1)
        out = {"conf": self.conf[index], "true_accepted": self.true_accepted[index], "held": end - first,
               "proposed": self.proposed[index]}
        if self.lag_steps:  # confidences `lag` steps earlier; None where a request had not decoded that far yet
            source = own_steps - self.lag_steps
            out["lagged_conf"] = self.conf[base + np.minimum(np.maximum(source, start), end - 1)]
            out["lagged_known"] = source >= 0
        return out

    def ready(self, request_ids: np.ndarray, first: np.ndarray, last: np.ndarray, remaining: np.ndarray,
              single: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Make sure each request holds the draws of its steps ``first`` [N] (its next) to ``last`` [N] that it is
        expected to need (all of them when ``single``: a one-step block), drawing more where it is short.

        Returns, per request, the row its decode step 0 would have (step s is row ``base + s``), the step after
        its last held and its first held (``lag_steps`` before ``first`` where it has decoded that far): the
        draws of step s are rows ``base + min(s, end - 1)`` of :attr:`conf` and :attr:`true_accepted`."""
        missing = self.slot[request_ids] < 0
        if np.logical_or.reduce(missing):
            self._start_batch(request_ids[missing])
        end = self.end[request_ids]
        if single:
            needed = 1
        else:  # the steps of the block each request may decode, generously (blocks stop where draws run out)
            expected = np.ceil(remaining / self._rate(request_ids, first, remaining) * NEED_MARGIN) + SLACK_STEPS
            needed = np.maximum(np.minimum(expected, last - first + 1), 1)
        short = end - first < needed
        if np.logical_or.reduce(short):
            # extend every row near its end with it, so that extensions come in batches
            near = end - first < needed + TOP_UP_WITHIN
            self._extend(request_ids[near], first[near], remaining[near], np.broadcast_to(needed, near.shape)[near])
            end = self.end[request_ids]
        return self.row0[request_ids], end, self.start[request_ids]

    def _rate(self, request_ids: np.ndarray, first: np.ndarray, remaining: np.ndarray) -> np.ndarray:
        """Tokens per step each request is expected to emit: so far, or (before its first step) from its logits."""
        emitted = self._output_tokens[request_ids] - 1 - remaining
        return np.where(first > 0, np.maximum(emitted, 1) / np.maximum(first, 1), self._first_rate[request_ids])

    def release(self, request_ids: np.ndarray) -> None:
        """Free the slots of finished requests."""
        slots = self.slot[request_ids]
        self._free.extend(slots[slots >= 0].tolist())
        self.slot[request_ids] = -1
        self._done[request_ids] = True

    def _start_batch(self, request_ids: np.ndarray) -> None:
        """Draw the first steps of these requests and of the next ones that have not started yet."""
        ids = set(int(r) for r in request_ids)
        upcoming = range(int(request_ids.min()), min(int(request_ids.max()) + BATCH, self._num_requests))
        # (a request that wants one token never decodes: it would never give its slot back)
        ids.update(r for r in upcoming if self.slot[r] < 0 and not self._done[r] and self._output_tokens[r] > 1)
        batch = np.array(sorted(ids), dtype=np.int64)
        while len(self._free) < len(batch):
            self._grow()
        slots = np.array([self._free.pop() for _ in range(len(batch))], dtype=np.int64)
        zeros = np.zeros(len(batch), dtype=np.int64)
        # tokens per step if every drafted position were verified, from each request's logits
        survival = np.multiply.accumulate(expit(self._logit_of(batch)), axis=1)
        self._first_rate[batch] = 1.0 + np.add.reduce(survival, axis=1)
        num_steps = self._wanted(self._output_tokens[batch] - 1, self._first_rate[batch], 1)
        self._draw(batch, slots, zeros, zeros, np.zeros(len(batch)), num_steps)
        self.slot[batch] = slots
        self.start[batch] = 0
        self.end[batch] = num_steps
        self.row0[batch] = slots * SLOT_STEPS

    def _extend(self, request_ids: np.ndarray, first: np.ndarray, remaining: np.ndarray, at_least: np.ndarray) -> None:
        """Drop the steps before ``first`` (but ``lag_steps``) and draw more after the last one held (``at_least``
        from ``first``)."""
        slots, start, end = self.slot[request_ids], self.start[request_ids], self.end[request_ids]
        keep_from = np.maximum(first - self.lag_steps, start)
        kept = end - keep_from
        # move the steps kept (keep_from .. end-1) to the front of each slot
        dst = np.repeat(slots * SLOT_STEPS - (np.add.accumulate(kept) - kept), kept)
        src = dst + np.repeat(keep_from - start, kept)
        moved = np.arange(len(src))
        self.conf[dst + moved] = self.conf[src + moved]
        self.true_accepted[dst + moved] = self.true_accepted[src + moved]
        self.proposed[dst + moved] = self.proposed[src + moved]
        self.step_shift[dst + moved] = self.step_shift[src + moved]
        previous = self.step_shift[slots * SLOT_STEPS + end - 1 - start]  # z at the last step held
        wanted = self._wanted(remaining, self._rate(request_ids, first, remaining), at_least)
        num_steps = np.minimum(np.maximum(wanted - (end - first), 1), SLOT_STEPS - kept)
        self._draw(request_ids, slots, kept, end, previous, num_steps)
        self.start[request_ids] = keep_from
        self.end[request_ids] = end + num_steps
        self.row0[request_ids] = slots * SLOT_STEPS - keep_from

    @staticmethod
    def _wanted(tokens_left: np.ndarray, tokens_per_step: np.ndarray, at_least) -> np.ndarray:
        """Steps to hold from a request's next one: about those it is expected to need, at least ``at_least``."""
        expected = np.ceil(tokens_left / tokens_per_step * MARGIN).astype(np.int64)
        wanted = np.maximum(np.minimum(expected + SLACK_STEPS, tokens_left), at_least)
        return np.minimum(wanted, SLOT_STEPS).astype(np.int64)

    def _draw(self, request_ids, slots, offset_in_slot, first_step, previous_shift, num_steps) -> None:
        """Draw ``num_steps`` steps of each request from ``first_step`` into its slot from ``offset_in_slot``."""
        match = self._match_of(request_ids) if self._match_of is not None else None
        conf, true_accepted, shift = self.draws.generate(
            request_ids, self._logit_of(request_ids), first_step, previous_shift, num_steps, match
        )
        # row i of the draws is step (i - run_start) of its request's run
        run_start = np.add.accumulate(num_steps) - num_steps
        rows = np.repeat(slots * SLOT_STEPS + offset_in_slot - run_start, num_steps) + np.arange(len(true_accepted))
        self.conf[rows] = conf
        self.true_accepted[rows] = true_accepted
        self.proposed[rows] = self.draws.proposed(conf)
        self.step_shift[rows] = shift

    def _grow(self) -> None:
        old = len(self.true_accepted) // SLOT_STEPS
        self.conf = np.concatenate([self.conf, np.zeros_like(self.conf)])
        self.true_accepted = np.concatenate([self.true_accepted, np.zeros_like(self.true_accepted)])
        self.proposed = np.concatenate([self.proposed, np.zeros_like(self.proposed)])
        self.step_shift = np.concatenate([self.step_shift, np.zeros_like(self.step_shift)])
        self._free.extend(range(2 * old - 1, old - 1, -1))
