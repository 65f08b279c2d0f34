"""Curves anchored to outcomes: the base logits refitted from the accept/reject outcomes alone.

The joint fit (:mod:`.estimate`) explains a round's outcomes and the head's confidences together. Each round
carries up to γ confidences but only one to three judged outcomes, so where the head is not the logistic,
scalar-bias head the model assumes (a real head's offset differs by position; its spread is not the token
noise's), the confidences pull the base logits away from what the outcomes say, and the model then predicts more
(or fewer) tokens per round than the log measured.

Anchoring keeps the joint fit's shared parameters (heterogeneity, token and head noise) and refits every group's
base logits L_k by maximum likelihood on the outcomes alone; the head's bias becomes per position,
``bias_k = bias + (L_k(joint) - L_k(anchored))`` (averaged over groups, weighted by confidences), so the head's
confidences keep the per-position level the joint fit gave them while acceptance follows the outcomes.

Outcomes alone are an unbiased basis only where the verify length did not depend on the confidences: the fit
uses the request runs in which every round verified every drafted position, except for a trailing stretch capped
by the tokens the request still needed (a ``fixed`` arm, or simlab validate's calibration part).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from simlab.acceptance.fitting.estimate import LOGIT_BOUND, LatentFit, group_logits, maximise, sandwich_errors
from simlab.acceptance.fitting.likelihood import SHARED, RoundsLikelihood
from simlab.acceptance.logs.parsed import Rounds

MIN_RUNS = 10  # fewer full runs cannot pin the curves


@dataclass
class AnchoredCurves:
    """Base logits refitted on outcomes (with standard errors), the per-position head bias, and what they were
    fitted on."""

    logits: dict[tuple[str, str], np.ndarray]
    logit_se: dict[tuple[str, str], Optional[np.ndarray]]
    bias_logit: list[float]
    num_rounds: int
    num_runs: int
    se_method: str
    converged: bool


def full_runs(rounds: Rounds, groups: dict[tuple[str, str], int]) -> np.ndarray:
    """Rows of the runs (one request under one arm) whose verify lengths were not chosen: every round verified
    min(drafted, the group's positions), except a trailing stretch of non-increasing, smaller lengths (the cap of
    the tokens the request still needed)."""
    cap = np.minimum(rounds.drafted, [groups[(m, d)] for m, d in zip(rounds.method, rounds.domain)])
    order = np.lexsort((rounds.step, rounds.sequence))
    seq, short, verified = rounds.sequence[order], rounds.verified[order] < cap[order], rounds.verified[order]
    starts = np.flatnonzero(np.r_[True, seq[1:] != seq[:-1]])
    ends = np.r_[starts[1:], len(seq)]
    keep = np.zeros(len(rounds), dtype=bool)
    for lo, hi in zip(starts, ends):
        tail = np.flatnonzero(short[lo:hi])
        if len(tail) == 0:
            keep[order[lo:hi]] = True
            continue
        first = lo + tail[0]
        if short[first:hi].all() and np.all(np.diff(verified[first:hi]) <= 0):
            keep[order[lo:hi]] = True
    return keep


def anchor_curves(rounds: Rounds, groups: dict[tuple[str, str], int], latent: LatentFit) -> Optional[AnchoredCurves]:
    """The anchored curves (module docstring), or None when fewer than ``MIN_RUNS`` runs have unchosen verify
    lengths."""
    keep = full_runs(rounds, groups)
    if len(np.unique(rounds.sequence[keep])) < MIN_RUNS:
        return None
    chosen = rounds.select(keep)
    outcomes = Rounds(chosen.method, chosen.domain, chosen.sequence, chosen.cluster, chosen.step, chosen.drafted,
                      chosen.verified, chosen.accepted, None)
    lik = RoundsLikelihood(outcomes, groups)
    theta0 = np.concatenate([np.concatenate([latent.logits[k] for k in groups]),
                             [latent.shared[name] for name in SHARED]])
    free = np.arange(lik.num_logits)
    bounds = [(-LOGIT_BOUND, LOGIT_BOUND)] * lik.num_logits
    theta, result, _ = maximise(lik, theta0, free, bounds, options={"maxiter": 500, "ftol": 1e-12, "gtol": 1e-7})
    final = lik.evaluate(theta, scores=True)
    se, se_method = sandwich_errors(lik, theta, free, final, bounds, objective_count=[0])
    logits, logit_se = group_logits(lik, groups, theta, se)
    bias = _per_position_bias(rounds, groups, latent, logits)
    return AnchoredCurves(logits, logit_se, bias, len(outcomes), len(np.unique(outcomes.sequence)), se_method,
                          bool(result.success))


def _per_position_bias(rounds: Rounds, groups, latent: LatentFit, anchored) -> list[float]:
    """bias + the confidence-weighted mean over groups of L(joint) - L(anchored), per position."""
    size = max(groups.values())
    moved, weight = np.zeros(size), np.zeros(size)
    for key, n in groups.items():
        rows = (rounds.method == key[0]) & (rounds.domain == key[1])
        count = np.isfinite(rounds.conf[rows, :n]).sum(axis=0)  # anchoring follows a fit with confidences
        count = np.pad(count, (0, n - len(count))).astype(float)
        moved[:n] += count * (latent.logits[key] - anchored[key])
        weight[:n] += count
    shift = np.divide(moved, weight, out=np.zeros(size), where=weight > 0)
    return [float(latent.shared["bias_logit"] + x) for x in shift]
