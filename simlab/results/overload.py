"""Warnings that an arm was overloaded, computed from its request records (docs/metrics.md, "Overload warnings").

Two criteria, each a sentence in the arm's ``warnings`` list:

- **queue still growing** (open-loop workloads: a trace, poisson or gamma arrivals). Over the last quarter of the
  arrival period, ``[T - D/4, T]`` with ``T`` the last arrival and ``D`` the span of arrivals, the number of
  requests in the system (arrived, not finished) grew by ``G``. The arm is overloaded when ``A >= 20`` requests
  arrived in that window and ``G > max(0.1 A, 3 sqrt(2 n0))``, with ``n0`` the requests being served at the
  window's start (those in the system, at most ``max_num_seqs`` per replica, at least 1): completions ran below
  90 % of the arrival rate, by more than the count's own fluctuation (in a stable system the number being
  served at two distant times varies about like a Poisson count of mean ``n0``, so their difference has a
  standard deviation near ``sqrt(2 n0)``; a queue behind them that keeps growing is what the test looks for).
- **TTFT dominated by queueing** (every workload). At most ``max_num_seqs`` requests run on a replica, so at any
  time at least ``max(0, N_r(t) - max_num_seqs)`` of the ``N_r(t)`` requests on replica ``r`` wait for a slot.
  The integral of that over time, divided by the number of requests, is a lower bound on the mean wait before
  admission (Little's law); the warning is given when it is at least half of the mean TTFT. (A queue for KV-cache
  space adds to the true wait; the bound does not see it.)
"""

from __future__ import annotations

import math

import numpy as np

MIN_WINDOW_ARRIVALS = 20
GROWTH_FRACTION = 0.1
FLUCTUATION_SIGMAS = 3.0
QUEUE_SHARE_OF_TTFT = 0.5


def overload_warnings(arrival_s: np.ndarray, first_token_s: np.ndarray, finish_s: np.ndarray,
                      replica: np.ndarray, *, max_num_seqs: int, open_loop: bool) -> list[str]:
    """The arm's overload warnings (empty when it was comfortable); times in seconds, one entry per request."""
    done = np.isfinite(arrival_s) & np.isfinite(finish_s)
    arrival_s, first_token_s, finish_s, replica = arrival_s[done], first_token_s[done], finish_s[done], replica[done]
    if arrival_s.size == 0:
        return []
    warnings = []
    if open_loop:
        growing = _growth_warning(arrival_s, finish_s, max_num_seqs * np.unique(replica).size)
        if growing:
            warnings.append(growing)
    queueing = _queueing_warning(arrival_s, first_token_s, finish_s, replica, max_num_seqs)
    if queueing:
        warnings.append(queueing)
    return warnings


def in_system(arrival_s: np.ndarray, finish_s: np.ndarray, t_s: float) -> int:
    """Requests arrived at or before ``t_s`` and not finished by then."""
    return int(np.count_nonzero(arrival_s <= t_s) - np.count_nonzero(finish_s <= t_s))


def _growth_warning(arrival_s: np.ndarray, finish_s: np.ndarray, num_slots: int) -> str | None:
    first, last = float(arrival_s.min()), float(arrival_s.max())
    start = last - (last - first) / 4.0
    arrived = int(np.count_nonzero((arrival_s > start) & (arrival_s <= last)))
    if arrived < MIN_WINDOW_ARRIVALS:
        return None
    finished = int(np.count_nonzero((finish_s > start) & (finish_s <= last)))
    before = in_system(arrival_s, finish_s, start)
    growth = arrived - finished
    serving = max(min(before, num_slots), 1)
    threshold = max(GROWTH_FRACTION * arrived, FLUCTUATION_SIGMAS * math.sqrt(2.0 * serving))
    if growth <= threshold:
        return None
    return (f"overloaded: the queue was still growing when arrivals ended: in the last quarter of the arrivals "
            f"({start:,.0f}-{last:,.0f} s) {arrived:,} requests arrived and {finished:,} finished "
            f"(completions at {finished / arrived:.0%} of the arrival rate), so {growth:,} more were in the system "
            f"at the end ({before:,} -> {before + growth:,})")


def queue_area_s(arrival_s: np.ndarray, finish_s: np.ndarray, replica: np.ndarray, max_num_seqs: int) -> float:
    """The time integral of ``sum_r max(0, N_r(t) - max_num_seqs)`` (request-seconds spent without a slot, at
    least)."""
    area = 0.0
    for r in np.unique(replica):
        mine = replica == r
        times = np.concatenate([arrival_s[mine], finish_s[mine]])
        steps = np.concatenate([np.ones(int(mine.sum()), dtype=np.int64), -np.ones(int(mine.sum()), dtype=np.int64)])
        order = np.argsort(times, kind="stable")
        times, count = times[order], np.cumsum(steps[order])
        waiting = np.maximum(count[:-1] - max_num_seqs, 0)
        area += float(np.dot(waiting, np.diff(times)))
    return area


def _queueing_warning(arrival_s: np.ndarray, first_token_s: np.ndarray, finish_s: np.ndarray,
                      replica: np.ndarray, max_num_seqs: int) -> str | None:
    mean_ttft_s = float(np.mean(first_token_s - arrival_s))
    if not mean_ttft_s > 0:
        return None
    mean_wait_s = queue_area_s(arrival_s, finish_s, replica, max_num_seqs) / arrival_s.size
    if mean_wait_s < QUEUE_SHARE_OF_TTFT * mean_ttft_s:
        return None
    where = " on its replica" if np.unique(replica).size > 1 else ""
    return (f"TTFT dominated by queueing: of the mean TTFT of {mean_ttft_s * 1e3:,.0f} ms, at least "
            f"{mean_wait_s * 1e3:,.0f} ms ({mean_wait_s / mean_ttft_s:.0%}) was spent waiting for one of the "
            f"max_num_seqs = {max_num_seqs} slots{where}")
