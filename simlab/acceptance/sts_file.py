"""``simlab calibrate``: STS temperatures from logged confidences, scored, as SGLang-readable JSON and a PNG.

The temperatures come from :func:`~simlab.acceptance.calibration.fit_sts` (left to right, each minimising the ECE
of the cumulative product with the earlier positions fixed) on a fit share of the rounds; the scores are computed
on the held-out share, per position j, over the rounds whose verify length reached j:

- ECE (equal-width bins) and Brier score of the cumulative product a_hat_j against the survival indicator S_j,
  before (raw head) and after STS;
- AUC of a_hat_j against S_j, before and after (the product mixes positions, so it may move slightly), and the
  AUC of the per-position confidence against acceptance among rounds that reached j, which STS cannot change
  (temperature scaling is monotone).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from simlab.acceptance.calibration import apply_sts, fit_sts
from simlab.acceptance.logs.parsed import AcceptanceLog, Rounds
from simlab.acceptance.metrics import auc, ece
from simlab.common.errors import InputError

MIN_ROUNDS = 20


@dataclass
class CalibrationResult:
    dataset: str
    temperatures: list[float]
    ece_before: list[float]
    ece_after: list[float]
    brier_before: list[float]
    brier_after: list[float]
    auc_before: list[Optional[float]]
    auc_after: list[Optional[float]]
    auc: list[Optional[float]]  # per-position confidence vs acceptance among rounds that reached the position
    num_scored: list[int]
    num_samples: int
    num_fit: int
    num_eval: int
    num_bins: int
    holdout: float
    seed: int
    files: list[str]
    format: str
    reliability: dict = field(default_factory=dict)  # before/after: per position, per bin (pred, observed, count)


def confidence_rounds(log: AcceptanceLog, method: Optional[str]) -> Rounds:
    rounds = log.rounds
    if rounds is None or not rounds.has_confidence:
        raise InputError("the log has no confidences", file=log.files[0] if log.files else None,
                         valid="rounds with the head's raw confidences (conf_1..conf_G, or STS shards)")
    if method is not None:
        labels = sorted(set(rounds.method.tolist()))
        if method not in labels:
            raise InputError("no rounds of that drafter", field="--method", value=method, valid=", ".join(labels))
        rounds = rounds.select(rounds.method == method)
    return rounds


def usable_positions(rounds: Rounds) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(conf [N, G], chained accepted [N, G], usable [N, G]): position j of a round counts when it was verified
    and the round has confidences for positions 1..j."""
    conf = rounds.conf
    width = conf.shape[1]
    k = np.arange(width)[None, :]
    accepted = k < rounds.accepted[:, None]
    verified = k < np.minimum(rounds.verified, width)[:, None]
    usable = np.logical_and.accumulate(np.isfinite(conf) & verified, axis=1)
    return conf, accepted, usable


def calibrate_rounds(log: AcceptanceLog, *, method: Optional[str] = None, holdout: float = 0.5, num_bins: int = 15,
                     seed: int = 0, dataset: str = "dataset") -> CalibrationResult:
    rounds = confidence_rounds(log, method)
    conf, accepted, usable = usable_positions(rounds)
    keep = usable[:, 0]
    conf, accepted, usable = conf[keep], accepted[keep], usable[keep]
    width = int(np.flatnonzero(usable.any(axis=0)).max(initial=-1)) + 1
    if len(conf) < MIN_ROUNDS or width == 0:
        raise InputError(f"{len(conf)} rounds with confidences", file=log.files[0] if log.files else None,
                         valid=f"at least {MIN_ROUNDS} rounds whose first verified position has a confidence")
    conf, accepted, usable = conf[:, :width], accepted[:, :width], usable[:, :width]
    order = np.random.default_rng(seed).permutation(len(conf))
    num_eval = int(round(holdout * len(conf)))
    fit_rows, eval_rows = (order[num_eval:], order[:num_eval]) if num_eval > 0 else (order, order)
    temperatures = fit_sts(conf[fit_rows], accepted[fit_rows], num_bins=num_bins, usable=usable[fit_rows])
    c, a, u = conf[eval_rows], accepted[eval_rows], usable[eval_rows]
    raw = np.cumprod(np.where(u, c, 1.0), axis=1)
    calibrated = np.cumprod(np.where(u, apply_sts(np.where(u, c, 0.5), temperatures), 1.0), axis=1)
    survival = np.logical_and.accumulate(a, axis=1)
    result = CalibrationResult(
        dataset=dataset, temperatures=[float(t) for t in temperatures], ece_before=[], ece_after=[],
        brier_before=[], brier_after=[], auc_before=[], auc_after=[], auc=[], num_scored=[],
        num_samples=int(len(conf)), num_fit=int(len(fit_rows)), num_eval=int(len(eval_rows)), num_bins=num_bins,
        holdout=float(holdout), seed=seed, files=list(log.files), format=log.format,
        reliability={"before": [], "after": []},
    )
    reached = np.concatenate([np.ones((len(a), 1), dtype=bool), survival[:, :-1]], axis=1) & u
    for j in range(width):
        rows = u[:, j]
        y = survival[rows, j]
        result.num_scored.append(int(rows.sum()))
        for name, pred in (("before", raw[rows, j]), ("after", calibrated[rows, j])):
            if rows.any():
                getattr(result, f"ece_{name}").append(float(ece(pred, y, num_bins)))
                getattr(result, f"brier_{name}").append(float(np.mean((pred - y) ** 2)))
                getattr(result, f"auc_{name}").append(auc(pred, y))
                result.reliability[name].append(_bins(pred, y, num_bins))
            else:
                for metric in ("ece", "brier", "auc"):
                    getattr(result, f"{metric}_{name}").append(None)
                result.reliability[name].append([])
        at = reached[:, j]
        result.auc.append(auc(c[at, j], a[at, j]) if at.any() else None)
    return result


def _bins(pred: np.ndarray, outcome: np.ndarray, num_bins: int) -> list[list[float]]:
    """[[mean predicted, observed rate, count], ...] per non-empty equal-width bin."""
    index = np.clip((pred * num_bins).astype(np.int64), 0, num_bins - 1)
    count = np.bincount(index, minlength=num_bins)
    mean_pred = np.bincount(index, pred, minlength=num_bins)
    mean_obs = np.bincount(index, outcome.astype(float), minlength=num_bins)
    return [[float(mean_pred[b] / count[b]), float(mean_obs[b] / count[b]), int(count[b])]
            for b in range(num_bins) if count[b] > 0]


def sts_json(result: CalibrationResult, *, command: Optional[str] = None) -> str:
    """The STS file: ``temperatures``, ``ece_before``, ``ece_after``, ``num_samples`` and ``dataset`` as SGLang reads
    them, plus the other scores and a ``generator`` key (simlab's own files carry one)."""
    from simlab.common.json_text import dumps
    from simlab.common.version import __version__

    doc = {
        "generator": f"simlab {__version__} calibrate",
        "dataset": result.dataset,
        "temperatures": [round(t, 6) for t in result.temperatures],
        "ece_before": result.ece_before,
        "ece_after": result.ece_after,
        "num_samples": result.num_samples,
        "brier_before": result.brier_before,
        "brier_after": result.brier_after,
        "auc_before": result.auc_before,
        "auc_after": result.auc_after,
        "auc_per_position": result.auc,
        "num_scored_per_position": result.num_scored,
        "num_fit": result.num_fit,
        "num_eval": result.num_eval,
        "holdout": result.holdout,
        "num_bins": result.num_bins,
        "seed": result.seed,
        "method": "sequential temperature scaling: per position, left to right, the temperature minimising the ECE "
                  "of the cumulative product with earlier positions fixed; scores on the held-out rounds",
        "format": result.format,
        "logs": result.files,
    }
    if command:
        doc["command"] = command
    return dumps(doc)


def reliability_png(result: CalibrationResult) -> bytes:
    """Reliability diagram per position: observed survival against the predicted cumulative product, before and
    after STS, with the bins' sizes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from simlab.common.version import __version__

    positions = len(result.temperatures)
    cols = min(4, positions)
    rows = (positions + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 3.4 * rows), squeeze=False)
    for j in range(rows * cols):
        ax = axes[j // cols][j % cols]
        if j >= positions:
            ax.axis("off")
            continue
        ax.plot([0, 1], [0, 1], "--", color="0.6", linewidth=1)
        for name, color in (("before", "tab:red"), ("after", "tab:blue")):
            points = result.reliability[name][j]
            if points:
                p, o, n = (np.array(x) for x in zip(*points))
                ece_value = getattr(result, f"ece_{name}")[j]
                ax.plot(p, o, "o-", color=color, markersize=3, linewidth=1.2,
                        label=f"{name} STS (ECE {ece_value:.3f})")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_title(f"position {j + 1}: T = {result.temperatures[j]:.2f} (n = {result.num_scored[j]})", fontsize=9)
        ax.set_xlabel("predicted survival (cumulative product)", fontsize=8)
        ax.set_ylabel("observed survival", fontsize=8)
        ax.legend(fontsize=7, loc="upper left")
        ax.grid(alpha=0.3)
    fig.suptitle(
        f"{result.dataset}: reliability before and after STS (held-out rounds: {result.num_eval})", fontsize=10
    )
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, metadata={"Software": f"simlab {__version__} calibrate"})
    plt.close(fig)
    return buffer.getvalue()

