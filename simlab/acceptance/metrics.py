"""Scores of a probability estimate against binary outcomes: ranking (AUC) and calibration (ECE)."""

from __future__ import annotations

from typing import Optional

import numpy as np
from scipy.stats import rankdata


def auc(scores: np.ndarray, labels: np.ndarray) -> Optional[float]:
    """Area under the ROC curve: P(score of a positive > score of a negative), ties counting one half.

    Mann–Whitney U from average ranks. None when there is no positive or no negative.
    """
    scores = np.asarray(scores, dtype=float).ravel()
    labels = np.asarray(labels, dtype=bool).ravel()
    if scores.shape != labels.shape:
        raise ValueError(f"scores and labels differ in size: {scores.shape} vs {labels.shape}")
    num_pos = int(labels.sum())
    num_neg = labels.size - num_pos
    if num_pos == 0 or num_neg == 0:
        return None
    ranks = rankdata(scores)  # average ranks for ties
    u_pos = ranks[labels].sum() - num_pos * (num_pos + 1) / 2.0
    return float(u_pos / (num_pos * num_neg))


def ece(probs: np.ndarray, outcomes: np.ndarray, num_bins: int = 15) -> float:
    """Expected calibration error: sum over equal-width bins of (share of rows) * |mean prob - mean outcome|.

    Bins split [0, 1] into ``num_bins`` equal parts; a probability of exactly 1 falls in the last bin.
    ``probs`` may carry leading batch dimensions ``[..., N]``: one ECE per leading index is returned then.
    """
    probs = np.asarray(probs, dtype=float)
    outcomes = np.asarray(outcomes, dtype=float)
    if probs.shape[-1] != outcomes.shape[-1]:
        raise ValueError(f"probs and outcomes differ in length: {probs.shape} vs {outcomes.shape}")
    if probs.shape[-1] == 0:
        raise ValueError("ECE of no rows")
    lead = probs.shape[:-1]
    flat = probs.reshape(-1, probs.shape[-1])
    y = np.broadcast_to(outcomes, probs.shape).reshape(flat.shape)
    bins = np.clip((flat * num_bins).astype(np.int64), 0, num_bins - 1)
    offset = (np.arange(flat.shape[0]) * num_bins)[:, None]
    size = flat.shape[0] * num_bins
    sum_p = np.bincount((bins + offset).ravel(), weights=flat.ravel(), minlength=size).reshape(-1, num_bins)
    sum_y = np.bincount((bins + offset).ravel(), weights=y.ravel(), minlength=size).reshape(-1, num_bins)
    gaps = np.abs(sum_p - sum_y).sum(axis=1) / flat.shape[1]
    return float(gaps[0]) if not lead else gaps.reshape(lead)
