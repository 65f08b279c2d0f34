"""How much of a validation error sampling alone explains: standard errors from the runs' own sample sizes.

A real run measures its metrics on a finite number of rounds, the calibration part (the same requests on random
streams of its own) fits the acceptance model on another, and the simulation draws its own outcomes; each moves
the compared numbers by chance. The relative standard error of the simulated-minus-real difference combines:

- real against fit: the difference of the held-out run's and the calibration run's pooled tau (sum emitted /
  sum rounds), requests as paired clusters (the same prompts in both parts);
- simulated: the spread of the simulated metric over its acceptance seeds / sqrt(seeds).

Throughput and mean TPOT move with tau at given step costs, so they carry tau's sampling error plus their own
simulated spread (the machine's timing noise is what fitting the costs from the same run absorbs, not sampling).

A bound derived from the sample size is ``Z`` standard errors; the test bound of a metric is the larger of the
target (5 %) and that (docs/validation.md)."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

Z = 4.0


def pooled_tau_relative_se(rounds: pd.DataFrame, emitted: pd.Series) -> float:
    """Relative standard error of tokens per round pooled over requests (clustered by request)."""
    if rounds.empty:
        return 0.0
    per_request = pd.DataFrame({"id": rounds["id"].to_numpy(), "emitted": emitted.to_numpy()}).groupby("id")
    e, n = per_request["emitted"].sum().to_numpy(float), per_request.size().to_numpy(float)
    tau = e.sum() / n.sum()
    if len(e) < 2:
        return 0.0
    se = math.sqrt(len(e) / (len(e) - 1) * float(np.sum((e - tau * n) ** 2))) / n.sum()
    return se / tau


def paired_tau_relative_se(ids: pd.Series, emitted: pd.Series, other_ids: pd.Series, other_emitted: pd.Series
                           ) -> float:
    """Relative standard error of the difference of two runs' pooled tau over the same requests: each request
    contributes its linearised share to both, and the paired contributions are differenced before the spread is
    taken (a request's prompt makes it easy or hard in both runs)."""
    def shares(request_ids, values) -> pd.Series:
        frame = pd.DataFrame({"id": np.asarray(request_ids), "e": np.asarray(values, dtype=float)}).groupby("id")
        e, n = frame["e"].sum(), frame.size().astype(float)
        tau = e.sum() / n.sum()
        return (e - tau * n) / n.sum(), tau

    a, tau_a = shares(ids, emitted)
    b, tau_b = shares(other_ids, other_emitted)
    joined = pd.concat([a.rename("a"), b.rename("b")], axis=1).fillna(0.0)
    if len(joined) < 2:
        return 0.0
    u = (joined["a"] - joined["b"]).to_numpy()
    return math.sqrt(len(u) / (len(u) - 1) * float(np.sum(u * u))) / tau_a


def tpot_relative_se(requests: pd.DataFrame) -> float:
    """Relative standard error of the mean TPOT over the requests that have one."""
    multi = requests[requests["output_tokens"] > 1]
    if len(multi) < 2:
        return 0.0
    tpot = (multi["finish_s"] - multi["first_token_s"]) / (multi["output_tokens"] - 1)
    return float(tpot.std(ddof=1) / math.sqrt(len(tpot)) / tpot.mean())


def simulated_relative_se(values: Sequence[float]) -> float:
    """Relative standard error of the mean of a metric over simulated seeds."""
    values = np.asarray([v for v in values if v is not None], dtype=float)
    if len(values) < 2 or values.mean() == 0:
        return 0.0
    return float(values.std(ddof=1) / math.sqrt(len(values)) / abs(values.mean()))


def combine(*parts: float) -> float:
    """Independent relative standard errors combined."""
    return math.sqrt(sum(p * p for p in parts))


__all__ = ["Z", "combine", "paired_tau_relative_se", "pooled_tau_relative_se", "simulated_relative_se",
           "tpot_relative_se"]
