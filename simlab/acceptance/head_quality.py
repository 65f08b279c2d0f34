"""How good the confidence head is, before and after STS: per-position AUC and ECE, and a threshold sweep."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import numpy as np

from simlab.acceptance.calibration import apply_sts, fit_sts
from simlab.acceptance.metrics import auc, ece
from simlab.acceptance.spec import AcceptanceSpec
from simlab.acceptance.warmup import WarmupSample, normalised_weights, warmup_sample


def confidence_report(
    spec: AcceptanceSpec,
    method: str,
    domain_weights: Mapping[str, float],
    gamma: int,
    *,
    calibrate: bool,
    seed: int,
) -> dict[str, Any]:
    """Fit STS on half of ``spec.calibration_samples`` warm-up rounds and score the head on the other half.

    Returns JSON-able per-position lists (index k-1 for position k):
      temperatures     STS temperatures (None when ``calibrate`` is false); the engine applies these;
      auc              raw c_hat_k as a predictor of position k's acceptance, over rounds that reached k
                       (None where every such round was accepted or every one rejected);
      ece_raw          ECE of the raw cumulative product a_hat_j against the survival indicator S_j;
      ece_calibrated   the same after STS (None without calibration);
      reached          evaluation rounds that reached position k (the AUC's sample size);
      acceptance_rate  accepted at k / reached k, measured on the evaluation half.
    """
    sample = warmup_sample(spec, method, domain_weights, gamma, spec.calibration_samples, seed)
    half = len(sample) // 2
    fit_half, eval_half = sample.rows(slice(0, half)), sample.rows(slice(half, None))
    temperatures = fit_sts(fit_half.conf_raw, fit_half.accepted) if calibrate else None
    scores = position_scores(eval_half, temperatures)
    return {
        "method": method,
        "gamma": int(gamma),
        "domain_weights": normalised_weights(domain_weights),
        "num_fit": int(len(fit_half)),
        "num_eval": int(len(eval_half)),
        "temperatures": None if temperatures is None else [float(t) for t in temperatures],
        **scores,
    }


def position_scores(sample: WarmupSample, temperatures: Optional[np.ndarray] = None) -> dict[str, list]:
    """Per-position auc, ece_raw, ece_calibrated (None without temperatures), reached and acceptance_rate."""
    reached = _reached(sample.accepted)
    aucs, rates = [], []
    for k in range(sample.accepted.shape[1]):
        rows = reached[:, k]
        aucs.append(auc(sample.conf_raw[rows, k], sample.accepted[rows, k]) if rows.any() else None)
        rates.append(float(sample.accepted[rows, k].mean()) if rows.any() else None)
    survival = sample.survival
    ece_raw = _cumulative_ece(sample.conf_raw, survival)
    ece_cal = None
    if temperatures is not None:
        ece_cal = _cumulative_ece(apply_sts(sample.conf_raw, temperatures), survival)
    return {
        "auc": aucs,
        "ece_raw": ece_raw,
        "ece_calibrated": ece_cal,
        "reached": [int(n) for n in reached.sum(axis=0)],
        "acceptance_rate": rates,
    }


def threshold_sweep(
    sample: WarmupSample, thresholds: Sequence[float], temperatures: Optional[np.ndarray] = None
) -> list[dict[str, float]]:
    """The static-threshold policy (DeepSpec evaluator): verify up to the first position whose per-position
    confidence is below the threshold. Per threshold: verified and accepted drafts per round and their ratio."""
    conf = sample.conf_raw if temperatures is None else apply_sts(sample.conf_raw, temperatures)
    accepted_len = sample.accepted.sum(axis=1)  # chained: the accepted prefix length
    rows = []
    for threshold in thresholds:
        below = conf < threshold
        verify_len = np.where(below.any(axis=1), below.argmax(axis=1), conf.shape[1])
        accepted = np.minimum(accepted_len, verify_len)
        verified_total = float(verify_len.sum())
        rows.append({
            "threshold": float(threshold),
            "verified_per_round": float(verify_len.mean()),
            "accepted_per_round": float(accepted.mean()),
            "acceptance_rate": float(accepted.sum() / verified_total) if verified_total else None,
        })
    return rows


def _reached(accepted: np.ndarray) -> np.ndarray:
    """[N, gamma] bool: position k was reached (positions 1..k-1 all accepted)."""
    return np.concatenate([np.ones((accepted.shape[0], 1), dtype=bool), accepted[:, :-1]], axis=1)


def _cumulative_ece(conf: np.ndarray, survival: np.ndarray) -> list[float]:
    products = np.cumprod(conf, axis=1)
    return [ece(products[:, j], survival[:, j]) for j in range(conf.shape[1])]
