"""A block: consecutive engine iterations of one replica, planned at once with numpy.

A block's roster is the requests decoding at its start, plus those whose prefill completes in its first step
(they decode from step 1). Requests leave the batch as they finish. No arrival, and no admission, happens inside
a block, so its steps differ only in who is active, how long each may verify and how much context the batch reads.

Draws do not depend on decisions, so they are made once per block; the scheduler runs over all steps at once.
Its inputs at step k (who is active, each request's allowed length, the batch's context) depend on the tokens
emitted before k, so the block is solved as a fixed point: a pass uses guessed emissions, and the steps whose
inputs match those implied by the emissions it produced are exact. Step 0's inputs never depend on a guess, so
a block commits at least one step, and the result equals stepping one iteration at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simlab.engine.decode import ArmPolicy, BlockKernel, DecodeSet
from simlab.hardware.cost_spec import TABLE_CONTEXT
from simlab.schedulers.step_inputs import schedule_inputs

MAX_PASSES = 3


def new_decoders(joiners: list[tuple[int, int, int, int, int]]) -> dict[str, np.ndarray]:
    """Decode-set columns for requests about to decode: (request id, domain, tokens still to emit, KV tokens
    held, decode steps done before: 0 unless the request was preempted and recomputed)."""
    rows = np.array(joiners, dtype=np.int64)
    return {"request_id": rows[:, 0], "remaining": rows[:, 2], "context": rows[:, 3], "steps": rows[:, 4]}


@dataclass
class Roster:
    """The requests of a block: the decode set's rows, then the joiners (``join`` is the first decoding step)."""

    request_id: np.ndarray
    remaining: np.ndarray  # tokens still to emit
    context: np.ndarray  # KV tokens held when decoding (starts)
    steps: np.ndarray  # decode steps done before the block
    join: np.ndarray
    num_decoding: int  # rows that were decoding at the block's start

    @classmethod
    def build(cls, decode: DecodeSet, joiners: list[tuple[int, int, int, int, int]]) -> "Roster":
        """``joiners``: see :func:`new_decoders`."""
        columns = {name: getattr(decode, name) for name in DecodeSet.COLUMNS}  # never written in place
        join = np.zeros(len(decode), dtype=np.int64)
        if joiners:
            extra = new_decoders(joiners)
            columns = {name: np.concatenate([columns[name], extra[name]]) for name in DecodeSet.COLUMNS}
            join = np.concatenate([join, np.ones(len(joiners), dtype=np.int64)])
        return cls(**columns, join=join, num_decoding=len(decode))

    def __len__(self) -> int:
        return len(self.request_id)


class Block:
    """K planned steps of a roster; steps 0..num_exact-1 are exact."""

    __slots__ = ("lengths", "accepted", "emitted", "active", "context", "num_exact", "anchors", "batch_tokens",
                 "gamma", "plan", "verify", "priced", "accepted_tokens", "_finish")

    def __init__(self, lengths: np.ndarray, accepted: np.ndarray, emitted: np.ndarray, active: np.ndarray,
                 context: np.ndarray, num_exact: int, gamma: int, plan=None, verify=None, totals=None) -> None:
        """``totals``: (requests decoding [K], positions verified [K], accepted [K], each request's finish step
        [N]) when the caller counted them (compiled code), else they are counted here."""
        self.lengths = lengths  # [K, N] verify lengths
        self.accepted = accepted  # [K, N]
        self.emitted = emitted  # [K, N] tokens emitted (0 where inactive)
        self.active = active  # [K, N] decoding at step k
        self.context = context  # [K] total KV tokens read by the decode part of each step
        self.num_exact = num_exact
        self.verify = verify  # [K, N] a tree's verified nodes per request (None: the lengths)
        if totals is None:
            self.anchors = np.add.reduce(active, axis=1)  # [K] requests decoding at each step
            verified = lengths if verify is None else verify
            self.batch_tokens = self.anchors + np.add.reduce(verified, axis=1)  # [K] decode/verify tokens of a step
            self.accepted_tokens = self._finish = None
        else:
            self.anchors, num_verified, self.accepted_tokens, self._finish = totals
            self.batch_tokens = self.anchors + num_verified
        self.gamma = gamma
        self.plan = plan  # (draft lengths [K], requests drafting [K]) of a scheduler that plans its draft, or None
        self.priced = None  # (verify seconds [K], draft seconds [K]) of the decode part, when compiled code priced them

    def drafted_tokens(self, count: int) -> np.ndarray:
        """[count] draft positions proposed at each step (draft length x requests drafting; a tree's nodes)."""
        if self.verify is not None:
            return np.add.reduce(self.verify[:count], axis=1)
        if self.plan is None:
            return self.gamma * self.anchors[:count]
        return self.plan[0][:count] * self.plan[1][:count]

    def draft_len_column(self, count: int) -> np.ndarray:
        """[count] the draft length of each step, 0 where nobody drafted."""
        if self.plan is None:
            return self.gamma * (self.anchors[:count] > 0)
        draft_len, num_drafting = self.plan
        return np.where(num_drafting[:count] > 0, draft_len[:count], 0)

    def prices(self, policy: ArmPolicy, cost, count: int) -> tuple[np.ndarray, np.ndarray]:
        """Verify and draft seconds [count] of the decode part of the first ``count`` steps, verify timed by
        ``cost``: compiled code's prices where it priced them with that model (the policy's
        :attr:`~simlab.engine.decode.ArmPolicy.verify_priced_by`), else
        :meth:`numpy_prices` (validation times steps with another model than the one its scheduler reads)."""
        if self.priced is not None and cost is policy.verify_priced_by:
            return self.priced[0][:count], self.priced[1][:count]
        return self.numpy_prices(policy, cost, count)

    def numpy_prices(self, policy: ArmPolicy, cost, count: int) -> tuple[np.ndarray, np.ndarray]:
        """``cost``'s verify seconds and the policy's drafter's seconds of the first ``count`` steps, in numpy
        (nothing where nobody decodes)."""
        anchors, context = self.anchors[:count], self.context[:count].astype(float)
        verify_s = np.where(anchors > 0, cost.verify_s(self.batch_tokens[:count], context, np.maximum(anchors, 1)),
                            0.0)
        if self.plan is not None:
            return verify_s, policy.planned_draft_s(self.plan[0][:count], self.plan[1][:count], anchors, context)
        return verify_s, policy.draft_s(anchors, context)

    def step_accepted(self, count: int) -> np.ndarray:
        """[count] positions accepted at each step."""
        if self.accepted_tokens is not None:
            return self.accepted_tokens[:count]
        return np.add.reduce(self.accepted[:count], axis=1)

    def finish_step(self, roster: Roster) -> np.ndarray:
        """[N] the step at whose end each request emits its last token (K if not in the block)."""
        if self._finish is not None:
            return self._finish
        left = roster.remaining[None, :] - np.add.accumulate(self.emitted, axis=0)
        done = self.active & (left <= 0)
        return np.where(np.logical_or.reduce(done, axis=0), done.argmax(axis=0), len(self.active))


def plan_block(policy: ArmPolicy, roster: Roster, num_steps: int, store=None, *, compiled: bool = True,
               stop_at_finish: bool = False) -> Block:
    """Plan up to ``num_steps`` steps of the roster (fewer are exact when inputs drift; at least one is).

    ``store`` (the arm's :class:`~simlab.engine.drawstore.DrawStore`) holds the draws when drafting. Arms that
    :meth:`ArmPolicy.block_kernel` serves are stepped by compiled code (every step exact), unless ``compiled``
    is false (the tests compare the two); with ``stop_at_finish`` compiled code stops after the first step in
    which a request emits its last token (the block would end there)."""
    kernel = policy.block_kernel() if compiled else None
    if kernel is not None:
        return _compiled_block(policy, roster, num_steps, store, kernel, stop_at_finish)
    since_join = np.arange(num_steps)[:, None] - roster.join[None, :]
    decode_step = roster.steps[None, :] + since_join  # each request's own decode step (its random streams' key)
    joined = since_join >= 0
    inputs = _Inputs(policy, roster, joined)
    if policy.gamma == 0:
        emitted = inputs.plain_emissions()
        active, _, context = inputs(emitted)
        zeros = np.zeros_like(emitted)
        return Block(zeros, zeros, emitted, active, context, num_steps, 0)
    # a request decodes at most `remaining` more steps: later rows of the block are never read (it is inactive
    # there), so they repeat its last possible step instead of asking the store for draws nobody needs
    own_step = np.minimum(np.maximum(decode_step, roster.steps[None, :]),
                          (roster.steps + roster.remaining - 1)[None, :])
    draws = store.gather(roster.request_id, own_step, roster.remaining)
    inputs.proposed = draws["proposed"]  # a lookup drafter's rounds without a match propose nothing
    # the store may hold fewer steps than the block spans for requests expected to finish sooner: a step where
    # such a request is still active is not exact
    lacking = own_step - own_step[0] >= draws["held"][None, :] if num_steps > 1 else None
    outcomes = _Outcomes(policy, roster, joined, draws)
    # first guess: every drafted position verified (what load-aware schedulers do at low load); a single step's
    # inputs do not depend on emissions
    guess = 0 * decode_step
    if num_steps > 1:
        guess = outcomes.first_guess()
    active, max_len, context = inputs(guess)
    true_accepted = outcomes.given(guess)
    for _ in range(MAX_PASSES if num_steps > 1 else 1):
        lengths, plan = _schedule(policy, true_accepted, draws, active, max_len, context)
        accepted = np.minimum(true_accepted, lengths)
        emitted = np.where(active, accepted + 1, 0)
        if num_steps == 1:
            num_exact, actual_context = 1, context
            break
        actual_active, actual_max_len, actual_context = inputs(emitted)
        differs = (np.logical_or.reduce(actual_max_len != max_len, axis=1)
                   | np.logical_or.reduce(actual_active != active, axis=1))
        if policy.reads_context:
            differs |= actual_context != context
        if outcomes.replayed:  # recorded outcomes depend on where each request is in its output
            differs |= np.logical_or.reduce(_before(emitted) != _before(guess), axis=1)
        undrawn = np.logical_or.reduce(actual_active & lacking, axis=1)
        num_exact = int(differs.argmax()) if np.logical_or.reduce(differs) else num_steps
        if np.logical_or.reduce(undrawn[:num_exact]):
            num_exact = int(undrawn.argmax())  # more passes cannot get past it
            break
        if num_exact == num_steps:
            break
        # the next pass guesses these emissions: its inputs are the ones they imply
        active, max_len, context = actual_active, actual_max_len, actual_context
        guess = emitted
        true_accepted = outcomes.given(guess)
    # costs read the context the emissions imply (the guess's may differ where decisions ignore context)
    verify = policy.verify_tokens(lengths) if policy.tree is not None else None
    return Block(lengths, accepted, emitted, active, actual_context, num_exact, policy.gamma, plan, verify)


def _compiled_block(policy: ArmPolicy, roster: Roster, num_steps: int, store, kernel: BlockKernel,
                    stop_at_finish: bool) -> Block:
    """The block stepped in order by compiled code (:mod:`simlab.engine.block_kernel`), which reads the draws
    from the store's rows."""
    from simlab.engine.block_kernel import run_block

    code, threshold, cumulative, slo_ms, lagged, cost, draft_spec, price, verified_by_length = kernel
    steps, remaining, join = roster.steps, roster.remaining, roster.join
    # the first and the last decode step of each request the block may reach (see plan_block's own_step)
    last_step = steps + remaining - 1
    first = np.minimum(steps, last_step)
    last = np.minimum(np.maximum(steps + (num_steps - 1) - join, steps), last_step)
    base, end, start = store.ready(roster.request_id, first, last, remaining, num_steps == 1)
    priced = price is not None
    price_cost = cost
    if priced:  # the engine's verify spec; the drafter's equals the scheduler's where it reads one
        price_cost, draft_spec = price
    # a draft cost that ignores context: its seconds by draft length and requests drafting (else the spec prices it)
    reads_grid = (priced or policy.scheduler.entry.reads_draft_cost) and (
        draft_spec.size == 0 or draft_spec[0] == TABLE_CONTEXT)  # a table's grid, maybe with its context term
    grid = policy.draft_grid(len(roster)) if reads_grid else _NO_DRAFT
    plans_draft = policy.plans_draft
    (lengths, accepted, emitted, active, context, draft_len, num_drafting, num_exact, verify_s, draft_s,
     totals) = run_block(
        code, policy.gamma, policy.max_batch_tokens, threshold, cumulative, slo_ms, lagged, stop_at_finish,
        num_steps, remaining, roster.context, join, steps, base, end, start, store.lag_steps, store.conf,
        store.true_accepted, store.proposed, policy.prior_conf, (grid, draft_spec), cost, price_cost, priced,
        plans_draft, verified_by_length, policy.max_concurrency, policy.max_drafting)
    verify = policy.verify_tokens(lengths) if policy.tree is not None else None
    block = Block(lengths, accepted, emitted, active, context, num_exact, policy.gamma,
                  (draft_len, num_drafting) if plans_draft else None, verify, totals=totals)
    if priced:
        block.priced = (verify_s, draft_s)
    return block


_NO_DRAFT = np.zeros((1, 1))


class _Inputs:
    """A step's inputs implied by the emissions of the block's earlier steps."""

    def __init__(self, policy: ArmPolicy, roster: Roster, joined: np.ndarray) -> None:
        self.gamma = policy.gamma
        self.limit = policy.max_concurrency
        self.most_drafting = policy.max_drafting
        self.roster = roster
        self.joined = joined
        self.proposed = None  # [K, N] positions each step's draft proposes (the draws'), once gathered

    def __call__(self, emitted: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """active [K, N], allowed lengths [K, N] and total context [K]."""
        before = np.add.accumulate(emitted, axis=0) - emitted
        left = self.roster.remaining[None, :] - before
        active = self.joined & (left > 0)
        most = self.gamma if self.proposed is None else np.minimum(self.proposed, self.gamma)
        max_len = np.where(active, np.minimum(left - 1, most), 0)
        if self.limit:  # speculation off where more requests decode than the arm's max_concurrency
            max_len = np.where((np.add.reduce(active, axis=1) <= self.limit)[:, None], max_len, 0)
        if self.most_drafting:  # only the first max_drafting requests decoding (in admission order) draft
            max_len = np.where(np.add.accumulate(active, axis=1) <= self.most_drafting, max_len, 0)
        context = np.add.reduce(np.where(active, self.roster.context[None, :] + before, 0), axis=1)
        return active, max_len, context

    def plain_emissions(self) -> np.ndarray:
        """Without drafting every active request emits one token per step: emissions are known in advance."""
        joined = self.joined
        before = np.add.accumulate(joined, axis=0) - joined
        return (joined & (self.roster.remaining[None, :] - before > 0)).astype(np.int64)


def _before(emitted: np.ndarray) -> np.ndarray:
    """[K, N] tokens each request emitted in the block's steps before step k."""
    return np.add.accumulate(emitted, axis=0) - emitted


class _Outcomes:
    """How many drafted positions the target accepts at each step (if all were verified): the draws', or with
    recorded acceptance (``acceptance: {kind: trace}``) the recording's at each request's output position,
    which depends on what earlier steps emitted."""

    def __init__(self, policy: ArmPolicy, roster: Roster, joined: np.ndarray, draws: dict) -> None:
        self.replay = policy.replay
        self.replayed = self.replay is not None
        self.gamma = policy.gamma
        self.roster, self.joined, self.draws = roster, joined, draws
        if self.replayed:
            self.position0 = self.replay.output_tokens[roster.request_id] - roster.remaining  # tokens emitted so far

    def given(self, guess: np.ndarray) -> np.ndarray:
        """[K, N] accepted-if-all-verified at each step, when the block's steps emit ``guess``."""
        if not self.replayed:
            return self.draws["true_accepted"]
        position = self.position0[None, :] + _before(guess)
        return self.replay.true_accepted(self.roster.request_id[None, :], position, self.gamma)

    def first_guess(self) -> np.ndarray:
        """Every drafted position verified, step by step (a recording's outcome depends on the position)."""
        joined, gamma = self.joined, self.gamma
        if not self.replayed:
            return np.where(joined, np.minimum(self.draws["true_accepted"], gamma) + 1, 0)
        roster = self.roster
        guess = np.zeros(joined.shape, dtype=np.int64)
        before = np.zeros(len(roster), dtype=np.int64)
        for k in range(joined.shape[0]):
            left = roster.remaining - before
            active = joined[k] & (left > 0)
            accepted = self.replay.true_accepted(roster.request_id, self.position0 + before, gamma)
            guess[k] = np.where(active, np.minimum(accepted, np.minimum(left - 1, gamma)) + 1, 0)
            before += guess[k]
        return guess


def _schedule(policy: ArmPolicy, true_accepted, draws, active, max_len, context):
    """Verify lengths [K, N] of every step, and the draft plan (lengths [K], requests drafting [K]) of a
    scheduler that plans its draft (None: every decoding request drafts gamma)."""
    num_rows = active.shape[1]
    anchors = np.add.reduce(active, axis=1)
    varying = bool(np.logical_or.reduce(anchors != num_rows))
    batch = np.maximum(anchors, 1)  # a step with no request decoding schedules nothing; avoid 0/0
    ctx = context[:, None].astype(float)
    requests = batch[:, None] if varying else num_rows
    cost = policy.cost
    scheduler = policy.scheduler
    inputs = schedule_inputs(  # lagged schedulers: confidences `lag` decode steps earlier, else the prior
        scheduler,
        conf=draws["conf"],
        max_len=max_len,
        verify_s=lambda batch_tokens: cost.verify_s(batch_tokens, ctx, requests),
        draft_s=policy.draft_s(batch, context.astype(float)) if scheduler.entry.reads_draft_cost else 0.0,
        token_budget=np.maximum(policy.max_batch_tokens - anchors, 0),
        lagged_conf=draws.get("lagged_conf"),
        lagged_known=draws.get("lagged_known"),
        prior_conf=policy.prior_conf,
        true_accepted=true_accepted,
        num_requests=batch if varying else None,
    )
    limit = policy.max_concurrency
    if not scheduler.plans_draft:
        if not limit and not policy.max_drafting:
            return scheduler(inputs), None
        on = ((anchors <= limit) if limit else True) & (anchors > 0)
        drafting = np.minimum(anchors, policy.max_drafting) if policy.max_drafting else anchors
        return scheduler(inputs), (np.where(on, policy.gamma, 0), np.where(on, drafting, 0))
    total = context.astype(float)

    def draft_cost(draft_len: np.ndarray, num_drafting: np.ndarray) -> np.ndarray:
        return policy.planned_draft_s(draft_len, num_drafting, anchors, total)

    inputs.draft_cost = draft_cost
    draft_len, drafting, inputs.min_budget = scheduler.plan_draft(inputs)
    if limit:
        off = anchors > limit
        draft_len, drafting = np.where(off, 0, draft_len), drafting & ~off[:, None]
    inputs.max_len = np.where(drafting, np.minimum(max_len, draft_len[:, None]), 0)
    num_drafting = np.add.reduce(drafting, axis=1)
    inputs.draft_s = draft_cost(draft_len, num_drafting)
    return scheduler(inputs), (draft_len, num_drafting)


def commit_block(decode: DecodeSet, roster: Roster, block: Block, count: int) -> np.ndarray:
    """Apply the first ``count`` steps: update the decode set (add joiners, drop finished requests).

    Returns the roster rows that finished."""
    emitted = np.add.reduce(block.emitted[:count], axis=0)
    active = block.active[:count]
    state = {
        "request_id": roster.request_id,
        "remaining": roster.remaining - emitted,
        "context": roster.context + emitted,
        "steps": roster.steps + np.add.reduce(active, axis=0),
    }
    finished = state["remaining"] <= 0
    if decode.store is not None and np.logical_or.reduce(finished):
        decode.store.release(roster.request_id[finished])
    if np.logical_or.reduce(finished) or len(roster) > roster.num_decoding:
        stays = ~finished
        decode.overwrite({name: value[stays] for name, value in state.items()})
    else:
        decode.overwrite(state)
    return finished
