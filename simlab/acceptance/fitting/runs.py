"""Requests' runs of rounds on the latent grid: layout in batches, and the scaled forward-backward pass.

A run is one request's rounds in step order (a missing step is an empty round; a gap longer than ``MAX_GAP``
starts a new run). Runs are sorted longest first, so the runs still going at slot t are a prefix, and cut into
batches of at most ``MAX_SLOTS_PER_BATCH`` slots to bound memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from simlab.acceptance.fitting.grid import LatentGrid
from simlab.acceptance.logs.parsed import Rounds

MAX_SLOTS_PER_BATCH = 6000
MAX_SLOTS_WITH_CONFIDENCES = 1500  # rounds with confidences carry [positions, states] arrays each
MAX_GAP = 64


@dataclass(frozen=True)
class Batch:
    first_run: int
    end_run: int
    first_round: int  # rounds of the batch are [first_round, end_round) in run order
    end_round: int


class RunLayout:
    """Where every round sits: ``order`` (rounds in run order), run and slot of each, runs' lengths and clusters."""

    def __init__(self, rounds: Rounds, max_slots: int = MAX_SLOTS_PER_BATCH) -> None:
        n = len(rounds)
        if rounds.has_sequences:
            order = np.lexsort((rounds.step, rounds.sequence))
            seq, step = rounds.sequence[order], rounds.step[order]
            new_run = np.ones(n, dtype=bool)
            new_run[1:] = (seq[1:] != seq[:-1]) | (step[1:] - step[:-1] > MAX_GAP)
        else:  # no request structure: every round is a run of its own
            order, step, new_run = np.arange(n), np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool)
        run = np.cumsum(new_run) - 1
        slot = step - step[np.flatnonzero(new_run)][run]
        length = np.zeros(int(run[-1]) + 1 if n else 0, dtype=np.int64)
        np.maximum.at(length, run, slot + 1)
        by_length = np.argsort(-length, kind="stable")
        rank = np.empty_like(by_length)
        rank[by_length] = np.arange(len(by_length))
        run = rank[run]
        regroup = np.lexsort((slot, run))
        self.order = order[regroup]
        self.run = run[regroup]
        self.slot = slot[regroup]
        self.length = length[by_length]
        first_round = np.searchsorted(self.run, np.arange(len(self.length) + 1))
        self.cluster = pd.factorize(pd.Series(rounds.cluster[self.order][first_round[:-1]]).astype(str))[0]
        self.num_clusters = int(self.cluster.max(initial=-1)) + 1
        self.batches: list[Batch] = []
        begin, slots = 0, 0
        for r, size in enumerate(self.length):
            if slots and slots + size > max_slots:
                self.batches.append(Batch(begin, r, int(first_round[begin]), int(first_round[r])))
                begin, slots = r, 0
            slots += int(size)
        if len(self.length):
            self.batches.append(Batch(begin, len(self.length), int(first_round[begin]), int(first_round[-1])))

    @property
    def num_runs(self) -> int:
        return len(self.length)


def forward_backward(layout: RunLayout, batch: Batch, log_emission: np.ndarray, grid: LatentGrid,
                     trans: np.ndarray, dtrans: np.ndarray | None) -> tuple[np.ndarray, float, np.ndarray]:
    """Posterior over states of each round of the batch [rounds, S], the batch's log-likelihood, and each run's
    d loglik / d rho (from the expected transitions and dT/drho; zeros when ``dtrans`` is None)."""
    P, Q, S = grid.num_request, grid.num_step, grid.num_states
    lengths = layout.length[batch.first_run:batch.end_run]
    R, T = len(lengths), int(lengths[0])
    runs = layout.run[batch.first_round:batch.end_round] - batch.first_run
    slots = layout.slot[batch.first_round:batch.end_round]
    peak = log_emission.max(axis=1)
    emit = np.ones((R, T, S))  # an empty round (a missing step) emits 1 everywhere
    emit[runs, slots] = np.exp(log_emission - peak[:, None])
    alpha = np.zeros((R, T, S))
    scale = np.ones((R, T))
    first = np.outer(grid.request_weights, grid.step_weights).ravel()[None, :] * emit[:, 0]
    scale[:, 0] = first.sum(axis=1)
    alpha[:, 0] = first / scale[:, 0:1]
    active = (lengths[None, :] > np.arange(T)[:, None]).sum(axis=1)  # runs longer than t: a prefix
    for t in range(1, T):
        n = active[t]
        pred = (alpha[:n, t - 1].reshape(n * P, Q) @ trans).reshape(n, S)
        pred *= emit[:n, t]
        total = pred.sum(axis=1)
        scale[:n, t] = total
        pred /= total[:, None]
        alpha[:n, t] = pred
    beta = np.ones((R, T, S))
    rho_parts = np.zeros(R)
    for t in range(T - 2, -1, -1):
        n = active[t + 1]
        nxt = emit[:n, t + 1] * beta[:n, t + 1]
        nxt /= scale[:n, t + 1, None]
        nxt = nxt.reshape(n * P, Q)
        beta[:n, t] = (nxt @ trans.T).reshape(n, S)
        if dtrans is not None:
            rho_parts[:n] += ((alpha[:n, t].reshape(n * P, Q) @ dtrans) * nxt).reshape(n, S).sum(axis=1)
    post = alpha[runs, slots]
    post *= beta[runs, slots]
    in_run = np.arange(T)[None, :] < lengths[:, None]
    loglik = float(np.log(scale)[in_run].sum() + peak.sum())
    return post, loglik, rho_parts
