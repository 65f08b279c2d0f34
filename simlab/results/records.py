"""The records of one arm, shared by the simulator and real mode: the columns of the results folder's tables and
the plain arrays :func:`simlab.results.metrics.summarise` reads.

- ``requests.csv``: one row per request (:data:`REQUEST_COLUMNS`);
- ``steps.csv.gz``: one row per engine iteration (:data:`STEP_COLUMNS`): ``num_requests`` counts the decoding
  requests plus the prefilling requests given a chunk, ``decode_requests`` the decoding ones, ``batch_tokens``
  the decode tokens (one anchor plus the verify length per decoding request) plus ``prefill_tokens``;
  ``verify_tokens``, ``accepted_tokens`` and ``emitted_tokens`` sum the decode part; ``kv_tokens`` is the KV in
  use after the iteration's admission (reserved or allocated tokens, plus cached prefix blocks);
  ``drafted_tokens`` the positions drafted (draft length x requests drafting) and ``draft_len`` the step's draft
  length (0 when nothing was drafted);
- ``rounds.csv.gz`` (real mode): one row per request-step (:func:`round_columns`): ``step`` is the request's
  decode step (0 first), ``drafted`` the positions drafted, ``verified`` the verify length, ``accepted`` the
  accepted drafts among the verified, ``conf_k`` the confidence head's raw (uncalibrated) estimate of position
  k (empty when the drafter has no head).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

REQUEST_COLUMNS = ("arm", "id", "arrival_s", "prompt_tokens", "output_tokens", "domain", "first_token_s",
                   "finish_s", "steps", "replica")
STEP_COLUMNS = ("arm", "t_s", "num_requests", "batch_tokens", "verify_tokens", "accepted_tokens", "step_s",
                "decode_requests", "emitted_tokens", "prefill_tokens", "replica", "kv_tokens", "drafted_tokens",
                "draft_len")
ROUND_COLUMNS = ("arm", "id", "domain", "step", "drafted", "verified", "accepted")


def round_columns(gamma: int) -> tuple[str, ...]:
    """The columns of ``rounds.csv.gz`` for drafts of up to ``gamma`` positions."""
    return ROUND_COLUMNS + tuple(f"conf_{k + 1}" for k in range(gamma))


@dataclass(frozen=True)
class RequestTimes:
    """Per request (indexed by request id): arrival, first-token and finish times in seconds."""

    arrival_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray


@dataclass(frozen=True)
class PositionTotals:
    """Per draft position k = 1..G: how often it was verified, reached (verified with every earlier position
    accepted) and accepted."""

    verified: np.ndarray
    reached: np.ndarray
    accepted: np.ndarray

    @classmethod
    def count(cls, verify_len: np.ndarray, accepted_len: np.ndarray, gamma: int) -> "PositionTotals":
        """From the verify lengths and accepted counts of some request-steps."""
        positions = np.arange(1, gamma + 1)[None, :]
        verify_len, accepted_len = np.asarray(verify_len)[:, None], np.asarray(accepted_len)[:, None]
        reached = np.minimum(verify_len, accepted_len + 1)
        return cls(verified=(verify_len >= positions).sum(0), reached=(reached >= positions).sum(0),
                   accepted=(accepted_len >= positions).sum(0))


@dataclass(frozen=True)
class Counters:
    """Arm-wide counts: requests preempted, prompt tokens served from a prefix cache at first admissions."""

    num_preemptions: int = 0
    cached_prompt_tokens: int = 0


@dataclass(frozen=True)
class ArmRecords:
    """One arm's records as plain arrays: what :func:`simlab.results.metrics.summarise` reads (the simulator's
    ``ArmResult`` has the same attributes).

    ``steps`` maps the step columns (without ``arm``) to arrays; ``time_in_system_area`` is the integral over time
    of the requests in the system; ``sim_wall_s`` the wall seconds the arm took (simulated or served)."""

    log: RequestTimes
    steps: Mapping[str, np.ndarray]
    positions: PositionTotals
    time_in_system_area: float
    sim_wall_s: float
    counters: Counters = Counters()
