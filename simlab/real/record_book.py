"""What the real engine records while it runs, in the simulator's schema (:mod:`simlab.results.records`).

Rows are kept as plain lists while the engine runs and turned into DataFrames once at the end
(:meth:`RecordBook.result`). Beside the schema's tables the book keeps what only a real run knows: per step the
drafter's share of the time and the context the step read (``step_times``), and per round the engine's view of
it (``round_details``: start time, context, limit, tokens emitted, the analytic acceptance of each verified
position ``1 - 0.5 ||p_d - p_t||_1`` at the engine's temperature, NaN beyond the verify length).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from typing import Optional

import numpy as np
import pandas as pd

from simlab.results.records import REQUEST_COLUMNS, STEP_COLUMNS, round_columns

STEP_TIME_COLUMNS = ("draft_s", "context_tokens")
ROUND_DETAIL_COLUMNS = ("t_s", "context_tokens", "max_len", "emitted_tokens")


@dataclass
class RecordBook:
    """Accumulates one run's rows; :meth:`result` turns them into an :class:`~simlab.real.result.EngineResult`."""

    arm: str
    gamma: int
    _requests: list[dict] = field(default_factory=list)
    _steps: list[dict] = field(default_factory=list)
    _rounds: list[dict] = field(default_factory=list)

    def add_request(self, live, finish_s: float) -> None:
        """A finished request (the engine's live state of it)."""
        self._requests.append({
            "arm": self.arm, "id": live.request.id, "arrival_s": live.arrival_s, "prompt_tokens": live.prompt_tokens,
            "output_tokens": len(live.tokens), "domain": live.request.domain, "first_token_s": live.first_token_s,
            "finish_s": finish_s, "steps": live.steps, "replica": 0,
        })

    def add_step(self, **row) -> None:
        """One iteration: the schema's step columns (without ``arm`` and ``replica``) and the step times."""
        self._steps.append({"arm": self.arm, "replica": 0, **row})

    def add_rounds(self, *, ids: np.ndarray, domains: list[str], steps: np.ndarray, drafted: int, verified: np.ndarray,
                   accepted: np.ndarray, confidence: np.ndarray, t_s: float, context_tokens: np.ndarray,
                   max_len: np.ndarray, emitted: np.ndarray, accept_prob: np.ndarray) -> None:
        """The request-steps of one iteration (arrays over its R decoding requests; confidence and
        accept_prob [R, G])."""
        self._rounds.append(dict(
            id=ids, domain=np.asarray(domains, dtype=object), step=steps, drafted=np.full(len(ids), drafted),
            verified=verified, accepted=accepted, confidence=confidence, t_s=np.full(len(ids), t_s),
            context_tokens=context_tokens, max_len=max_len, emitted_tokens=emitted, accept_prob=accept_prob,
        ))

    def result(self, outputs: dict[int, list[int]], *, wall_s: float, kv_capacity: int, max_num_seqs: int,
               open_loop: bool, engine: Optional[dict] = None):
        """The run's :class:`~simlab.real.result.EngineResult`."""
        from simlab.real.result import EngineResult

        requests = pd.DataFrame(self._requests, columns=list(REQUEST_COLUMNS))
        if not requests.empty:
            requests = requests.sort_values("id", kind="stable").reset_index(drop=True)
        steps_all = pd.DataFrame(self._steps, columns=[*STEP_COLUMNS, *STEP_TIME_COLUMNS])
        rounds, details = self._round_frames()
        return EngineResult(
            outputs=outputs, requests=requests, steps=steps_all[list(STEP_COLUMNS)].copy(),
            rounds=rounds, step_times=steps_all[list(STEP_TIME_COLUMNS)].copy(), round_details=details,
            wall_s=wall_s, gamma=self.gamma, arm=self.arm, kv_capacity=kv_capacity, max_num_seqs=max_num_seqs,
            open_loop=open_loop, engine=engine,
        )

    def _round_frames(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        gamma = self.gamma
        conf_cols = [f"conf_{k + 1}" for k in range(gamma)]
        prob_cols = [f"accept_prob_{k + 1}" for k in range(gamma)]
        if not self._rounds:
            return (pd.DataFrame(columns=list(round_columns(gamma))),
                    pd.DataFrame(columns=[*ROUND_DETAIL_COLUMNS, *prob_cols]))
        part = {name: np.concatenate([p[name] for p in self._rounds])
                for name in ("id", "domain", "step", "drafted", "verified", "accepted", *ROUND_DETAIL_COLUMNS)}
        num_rows = len(part["id"])
        conf = np.concatenate([p["confidence"] for p in self._rounds]).reshape(num_rows, gamma)
        prob = np.concatenate([p["accept_prob"] for p in self._rounds]).reshape(num_rows, gamma)
        rounds = pd.DataFrame({"arm": np.full(num_rows, self.arm, dtype=object),
                               **{c: part[c] for c in ("id", "domain", "step", "drafted", "verified", "accepted")},
                               **{c: conf[:, k] for k, c in enumerate(conf_cols)}})
        details = pd.DataFrame({**{c: part[c] for c in ROUND_DETAIL_COLUMNS},
                                **{c: prob[:, k] for k, c in enumerate(prob_cols)}})
        return rounds, details


__all__ = ["ROUND_DETAIL_COLUMNS", "RecordBook", "STEP_TIME_COLUMNS"]
