"""The cost curves of a real run, fitted from the run's own steps, as a ``kind: table`` hardware profile.

A busy machine makes every step slower by an amount that changes from minute to minute; a profile measured
before a run prices another minute's machine. Fitted from the steps of the run it is compared with, the curves
price the machine as it was during that run (their least-squares fit reproduces the run's total step time when
the steps are the same). The model is the one a table profile can express:

- **draft**: the drafter's measured seconds of each decode step (block forward, Markov sampling, confidence
  head) = ``d0 + d1 * R`` for R decoding requests, written as the ``draft.parallel`` curve over ``R * gamma``;
- **verify**: the rest of a decode-only step (the target forward, verification, the scheduler and the engine's
  own work) = ``a + b * B + c * C`` for B decode tokens and C total context tokens, written as a grid over
  batch tokens and context, which reproduces a linear function exactly (bilinear interpolation);
- **prefill**: ``per_token_s`` = the seconds steps with prefill spent beyond their decode part, per prefill token
  (a ratio of sums, so the run's prefill time is kept in total).

Coefficients are non-negative least squares (``scipy.optimize.nnls``); the raw numbers go to the provenance.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd

from simlab.hardware.base import CostModel
from simlab.hardware.curves import Curve


def fit_cost_table(steps: pd.DataFrame, step_times: pd.DataFrame, *, method: str, gamma: int, name: str,
                   max_batch_tokens: int, max_context_tokens: int, kv_cache_tokens: Optional[int] = None,
                   source: str = "") -> dict:
    """The ``kind: table`` profile mapping of one arm's real steps (``steps`` in the results schema,
    ``step_times`` its row-aligned drafter seconds and context tokens)."""
    from scipy.optimize import nnls

    frame = pd.concat([steps.reset_index(drop=True), step_times.reset_index(drop=True)], axis=1)
    decode = frame["decode_requests"].to_numpy(np.int64)
    draft_s = frame["draft_s"].to_numpy(float)
    rest_s = frame["step_s"].to_numpy(float) - draft_s
    decode_tokens = (frame["batch_tokens"] - frame["prefill_tokens"]).to_numpy(float)
    context = frame["context_tokens"].to_numpy(float)
    prefill = frame["prefill_tokens"].to_numpy(float)
    drafting = (decode > 0) & (gamma > 0) & (method != "none")
    d0 = d1 = 0.0
    if drafting.any():
        (d0, d1), _ = nnls(np.column_stack([np.ones(drafting.sum()), decode[drafting]]), draft_s[drafting])
    only = (decode > 0) & (prefill == 0)
    if only.sum() < 3:
        raise ValueError(f"{name}: {only.sum()} decode-only steps; a verify cost needs at least 3")
    features = np.column_stack([np.ones(only.sum()), decode_tokens[only], context[only]])
    (a, b, c), _ = nnls(features, rest_s[only])

    def verify(batch_tokens, context_tokens):
        return a + b * batch_tokens + c * context_tokens

    with_prefill = prefill > 0
    decode_part = np.where(decode > 0, verify(decode_tokens, context), 0.0)
    spent = float(np.sum((rest_s - decode_part)[with_prefill]))
    per_token_s = max(spent / float(prefill[with_prefill].sum()), 0.0) if with_prefill.any() else 0.0
    batch_axis = [1, max(2, int(max_batch_tokens))]
    context_axis = [0, max(1, int(max_context_tokens))]
    grid = [[max(float(verify(bt, ct)), 1e-9) for bt in batch_axis] for ct in context_axis]
    table: dict = {
        "kind": "table",
        "name": name,
        "verify": {"batch_tokens": batch_axis, "context_tokens": context_axis, "step_s": grid},
        "draft": {},
        "prefill": {"per_token_s": per_token_s},
    }
    if drafting.any():
        top = max(2, int(decode.max()))
        table["draft"]["parallel"] = {"batch_tokens": [gamma, gamma * top], "step_s": [d0 + d1, d0 + d1 * top]}
    if kv_cache_tokens is not None:
        table["kv_cache_tokens"] = int(kv_cache_tokens)
    residual = rest_s[only] - features @ np.array([a, b, c])
    table["provenance"] = {
        "generator": "simlab validate",
        "measured": True,
        "source": source or "fitted from a real run's own steps",
        "model": "draft_s = d0 + d1 R; decode-only step - draft = a + b B + c C; prefill per token (ratio of sums)",
        "coefficients": {"d0": float(d0), "d1": float(d1), "a": float(a), "b": float(b), "c": float(c),
                         "per_token_s": per_token_s},
        "steps": int(len(frame)), "decode_only_steps": int(only.sum()), "prefill_steps": int(with_prefill.sum()),
        "residual_sd_s": float(residual.std()) if residual.size > 1 else 0.0,
    }
    return table


class SchedulerCost(CostModel):
    """The cost model a simulated arm schedules with: the verify curve the real engine's scheduler read (a
    function of batch tokens only), the drafter and prefill costs of ``timing``. The simulated engine times its
    steps with ``timing`` itself; only the scheduler's view of the verify cost is the real scheduler's."""

    def __init__(self, timing: CostModel, verify_curve: Curve) -> None:
        self.timing = timing
        self.curve = verify_curve
        self.name = f"{timing.name}+scheduler-curve"
        self.has_context = False
        self.draft_reads_context = timing.draft_reads_context
        self.buckets = timing.buckets

    def verify_s(self, batch_tokens, context_tokens=0.0, num_requests=1):
        if isinstance(batch_tokens, np.ndarray) or isinstance(context_tokens, np.ndarray):
            b = np.asarray(batch_tokens, dtype=float)
            shape = np.broadcast_shapes(b.shape, np.shape(context_tokens))
            return np.broadcast_to(np.where(b > 0, self.curve(b), 0.0), shape)
        return self.curve.at(float(batch_tokens)) if batch_tokens > 0 else 0.0

    def step_s(self, decode_tokens, context_tokens, num_requests, prefill_tokens=0, prefill_attn_pairs=0.0):
        return self.timing.step_s(decode_tokens, context_tokens, num_requests, prefill_tokens, prefill_attn_pairs)

    def draft_s(self, method, gamma, num_requests, context_tokens=0.0):
        return self.timing.draft_s(method, gamma, num_requests, context_tokens)

    def kv_cache_tokens(self):
        return self.timing.kv_cache_tokens()

    def describe(self) -> dict:
        return {"kind": "scheduler view", "timing": self.timing.describe(),
                "verify_curve": {"batch_tokens": self.curve.xs, "step_s": self.curve.ys}}


__all__ = ["SchedulerCost", "fit_cost_table"]
