"""Records written by the real engine, in the simulator's schema (see the contract's results folder).

- ``requests``: one row per request: arm, id, arrival_s, prompt_tokens, output_tokens, domain, first_token_s,
  finish_s, steps (decode rounds the request took part in).
- ``steps``: one row per engine step: arm, t_s (step start, seconds since the engine started), num_requests,
  batch_tokens (target query tokens: prompt tokens for a prefill, sum of 1 + verify length for a decode
  round), verify_tokens, accepted_tokens (drafts accepted, bonus excluded), step_s; plus kind
  (``prefill``/``decode``), draft_s and target_s (the two parts of a decode step).
- ``request_steps``: one row per request and decode round: arm, id, round, t_s, context_tokens, max_len,
  verify_len, accepted_len, emitted_tokens, then conf_1..conf_G (the confidence head's c_k) and
  accept_prob_1..accept_prob_G (analytic acceptance 1 - 0.5 ||p_d - p_t||_1, NaN beyond the verify length).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

REQUEST_COLUMNS = (
    "arm", "id", "arrival_s", "prompt_tokens", "output_tokens", "domain", "first_token_s", "finish_s", "steps",
)
STEP_COLUMNS = (
    "arm", "t_s", "num_requests", "batch_tokens", "verify_tokens", "accepted_tokens", "step_s",
    "kind", "draft_s", "target_s",
)


@dataclass
class RecordBook:
    """Accumulates per-step arrays; :meth:`frames` turns them into DataFrames once at the end."""

    arm: str
    gamma: int
    _requests: list[dict] = field(default_factory=list)
    _steps: list[dict] = field(default_factory=list)
    _request_steps: list[dict[str, np.ndarray]] = field(default_factory=list)

    def add_request(self, **row) -> None:
        """One finished request (keys: REQUEST_COLUMNS without ``arm``)."""
        self._requests.append({"arm": self.arm, **row})

    def add_step(self, **row) -> None:
        """One engine step (keys: STEP_COLUMNS without ``arm``)."""
        self._steps.append({"arm": self.arm, **row})

    def add_request_steps(
        self, *, ids: np.ndarray, rounds: np.ndarray, t_s: float, context_tokens: np.ndarray, max_len: np.ndarray,
        verify_len: np.ndarray, accepted_len: np.ndarray, emitted_tokens: np.ndarray, confidence: np.ndarray,
        accept_prob: np.ndarray,
    ) -> None:
        """The per-request rows of one decode round (arrays over its R requests; confidence/accept_prob [R, G])."""
        self._request_steps.append(dict(
            id=ids, round=rounds, t_s=np.full(len(ids), t_s), context_tokens=context_tokens, max_len=max_len,
            verify_len=verify_len, accepted_len=accepted_len, emitted_tokens=emitted_tokens,
            confidence=confidence, accept_prob=accept_prob,
        ))

    def frames(self) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        """(requests, steps, request_steps) DataFrames."""
        requests = pd.DataFrame(self._requests, columns=list(REQUEST_COLUMNS))
        if not requests.empty:
            requests = requests.sort_values("id", kind="stable").reset_index(drop=True)
        steps = pd.DataFrame(self._steps, columns=list(STEP_COLUMNS))
        conf_cols = [f"conf_{k + 1}" for k in range(self.gamma)]
        prob_cols = [f"accept_prob_{k + 1}" for k in range(self.gamma)]
        scalar_cols = [
            "id", "round", "t_s", "context_tokens", "max_len", "verify_len", "accepted_len", "emitted_tokens",
        ]
        if self._request_steps:
            parts = {c: np.concatenate([p[c] for p in self._request_steps]) for c in scalar_cols}
            num_rows = len(parts["id"])
            conf = np.concatenate([p["confidence"] for p in self._request_steps]).reshape(num_rows, self.gamma)
            prob = np.concatenate([p["accept_prob"] for p in self._request_steps]).reshape(num_rows, self.gamma)
            data = {"arm": np.full(num_rows, self.arm, dtype=object), **parts}
            data.update({c: conf[:, k] for k, c in enumerate(conf_cols)})
            data.update({c: prob[:, k] for k, c in enumerate(prob_cols)})
            request_steps = pd.DataFrame(data)
        else:
            request_steps = pd.DataFrame(columns=["arm", *scalar_cols, *conf_cols, *prob_cols])
        return requests, steps, request_steps


def write_records(
    out_dir: str | Path, requests: pd.DataFrame, steps: pd.DataFrame, request_steps: pd.DataFrame
) -> Path:
    """Write requests.csv, steps.csv and request_steps.csv into ``out_dir`` (created)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    requests.to_csv(out / "requests.csv", index=False)
    steps.to_csv(out / "steps.csv", index=False)
    request_steps.to_csv(out / "request_steps.csv", index=False)
    return out


__all__ = ["REQUEST_COLUMNS", "RecordBook", "STEP_COLUMNS", "write_records"]
