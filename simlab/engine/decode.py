"""The requests in decode of one replica, and the vectorised computation of a block of decode steps.

A block is K consecutive iterations over the same set of requests (no arrival, admission or finish inside it).
Draws do not depend on decisions, so they are made once for the block; the scheduler runs over all K steps at
once. Its inputs at step k (each request's allowed length, which shrinks near the request's end, and the total
context, which the cost curve reads) depend on the tokens emitted at steps < k, so the block is solved as a
fixed point: a pass uses guessed emissions, and the steps whose inputs match the emissions it produced are exact.
Step 0 is always exact, so a block commits at least one step, and the result equals stepping one by one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from simlab.engine.draws import ArmDraws
from simlab.schedulers import ScheduleInputs, Scheduler

MAX_PASSES = 3


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

    def draft_s(self, num_requests: int, context_tokens):
        """Drafter seconds per step for ``num_requests`` requests holding ``context_tokens`` KV tokens in total
        (a scalar, or an array of per-step totals)."""
        if self.gamma == 0 or num_requests == 0:
            return 0.0 if np.ndim(context_tokens) == 0 else np.zeros(np.shape(context_tokens))
        draft = self.cost.draft_s
        if np.ndim(context_tokens) == 0:
            return float(draft(self.method, self.gamma, num_requests, float(context_tokens)))
        return np.array([draft(self.method, self.gamma, num_requests, float(c)) for c in context_tokens])

    @property
    def lag_steps(self) -> int:
        return self.scheduler.lag_steps if self.scheduler is not None else 0

    @property
    def reads_context(self) -> bool:
        return bool(self.scheduler is not None and self.scheduler.info.uses_cost and self.cost.has_context)


@dataclass
class Plan:
    """Outcome of K planned steps; steps 0..num_exact-1 are exact."""

    lengths: np.ndarray  # [K, R] verify lengths
    accepted: np.ndarray  # [K, R]
    emitted: np.ndarray  # [K, R]
    context_before: np.ndarray  # [K] total KV tokens read at each step
    num_exact: int
    first_finish: int  # first step at whose end some request is done (K if none)
    conf: Optional[np.ndarray] = None  # [K, R, G]
    step_shift: Optional[np.ndarray] = None  # [K, R]

    @property
    def batch_tokens(self) -> np.ndarray:
        return self.lengths.shape[1] + self.lengths.sum(axis=1)


class DecodeSet:
    """Compact arrays over the requests currently decoding on one replica."""

    def __init__(self, policy: ArmPolicy) -> None:
        self.policy = policy
        gamma, lag = policy.gamma, max(policy.lag_steps, 1)
        self.request_id = np.zeros(0, dtype=np.int64)
        self.domain = np.zeros(0, dtype=np.int64)
        self.remaining = np.zeros(0, dtype=np.int64)  # tokens still to emit
        self.context = np.zeros(0, dtype=np.int64)  # KV tokens held
        self.steps = np.zeros(0, dtype=np.int64)  # decode steps done
        self.request_shift = np.zeros(0)
        self.step_shift = np.zeros(0)
        self.history = np.zeros((0, lag, gamma))  # last `lag` steps' confidences, indexed by step % lag

    def __len__(self) -> int:
        return len(self.request_id)

    def add(self, request_id: int, domain: int, remaining: int, context: int) -> None:
        draws = self.policy.draws
        shift = draws.request_shift(np.array([request_id]))[0] if draws is not None else 0.0
        self.request_id = np.append(self.request_id, request_id)
        self.domain = np.append(self.domain, domain)
        self.remaining = np.append(self.remaining, remaining)
        self.context = np.append(self.context, context)
        self.steps = np.append(self.steps, 0)
        self.request_shift = np.append(self.request_shift, shift)
        self.step_shift = np.append(self.step_shift, 0.0)
        self.history = np.concatenate([self.history, np.zeros((1,) + self.history.shape[1:])])

    def remove(self, keep: np.ndarray) -> None:
        for name in ("request_id", "domain", "remaining", "context", "steps", "request_shift", "step_shift", "history"):
            setattr(self, name, getattr(self, name)[keep])

    def plan(self, num_steps: int) -> Plan:
        """Plan up to ``num_steps`` steps (fewer are exact when inputs drift; at least one always is)."""
        if self.policy.gamma == 0:
            return self._plan_plain(num_steps)
        policy = self.policy
        num_requests, gamma = len(self), policy.gamma
        draws = policy.draws.draw(
            self.request_id, self.domain, self.steps, self.request_shift, self.step_shift, num_steps
        )
        lagged = self._lagged(draws.conf) if policy.lag_steps else None
        guess = np.ones((num_steps, num_requests), dtype=np.int64)
        for _ in range(MAX_PASSES):
            max_len, context = self._inputs(guess)
            lengths = self._schedule(draws, max_len, context, lagged)
            accepted = np.minimum(draws.true_accepted, lengths)
            emitted = accepted + 1
            actual_max_len, actual_context = self._inputs(emitted)
            differs = (actual_max_len != max_len).any(axis=1)
            if policy.reads_context:
                differs |= actual_context != context
            num_exact = int(differs.argmax()) if differs.any() else num_steps
            if num_exact == num_steps:
                break
            guess = emitted
        left = self.remaining[None, :] - np.cumsum(emitted, axis=0)
        done = (left[:num_exact] <= 0).any(axis=1)
        first_finish = int(done.argmax()) if done.any() else num_steps
        return Plan(lengths, accepted, emitted, actual_context, num_exact, first_finish, draws.conf, draws.step_shift)

    def _plan_plain(self, num_steps: int) -> Plan:
        num_requests = len(self)
        num_steps = max(1, min(num_steps, int(self.remaining.min())))
        ones = np.ones((num_steps, num_requests), dtype=np.int64)
        context = self.context.sum() + num_requests * np.arange(num_steps)
        first_finish = int(self.remaining.min()) - 1
        zeros = np.zeros_like(ones)
        return Plan(zeros, zeros, ones, context, num_steps, first_finish if first_finish < num_steps else num_steps)

    def _inputs(self, emitted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-step allowed lengths [K, R] and total context [K] implied by the emissions of earlier steps."""
        before = np.cumsum(emitted, axis=0) - emitted
        max_len = np.clip(self.remaining[None, :] - before - 1, 0, self.policy.gamma)
        context = self.context.sum() + before.sum(axis=1)
        return max_len, context

    def _schedule(self, draws, max_len: np.ndarray, context: np.ndarray, lagged) -> np.ndarray:
        policy = self.policy
        num_requests = len(self)
        cost = policy.cost
        ctx = context[:, None].astype(float)
        inputs = ScheduleInputs(
            conf=draws.conf,
            max_len=max_len,
            verify_s=lambda batch_tokens: cost.verify_s(batch_tokens, ctx, num_requests),
            draft_s=policy.draft_s(num_requests, context),
            token_budget=max(policy.max_batch_tokens - num_requests, 0),
            lagged_conf=lagged,
            lagged_max_len=max_len if lagged is not None else None,
            true_accepted=draws.true_accepted,
        )
        return policy.scheduler(inputs)

    def _lagged(self, conf: np.ndarray) -> np.ndarray:
        """Confidences of each request `lag` steps before each step of the block (the prior before its start)."""
        lag = self.policy.lag_steps
        num_steps, num_requests, _ = conf.shape
        source_step = self.steps[None, :] + np.arange(num_steps)[:, None] - lag  # [K, R]
        rows = np.arange(num_requests)[None, :]
        stored = self.history[rows, source_step % lag]
        lagged = np.where((source_step >= 0)[..., None], stored, self.policy.prior_conf)
        if num_steps > lag:
            lagged[lag:] = conf[: num_steps - lag]
        return lagged

    def commit(self, plan: Plan, num_steps: int) -> np.ndarray:
        """Apply the first ``num_steps`` planned steps; return the mask of requests that finished."""
        emitted = plan.emitted[:num_steps].sum(axis=0)
        if self.policy.lag_steps and plan.conf is not None:
            lag = self.policy.lag_steps
            first = max(0, num_steps - lag)
            steps = self.steps[None, :] + np.arange(first, num_steps)[:, None]
            self.history[np.arange(len(self))[None, :], steps % lag] = plan.conf[first:num_steps]
        if plan.step_shift is not None:
            self.step_shift = plan.step_shift[num_steps - 1]
        self.remaining = self.remaining - emitted
        self.context = self.context + emitted
        self.steps = self.steps + num_steps
        return self.remaining <= 0
