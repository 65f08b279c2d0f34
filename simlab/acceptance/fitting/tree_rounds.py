"""``simlab acceptance fit --tree``: the chain acceptance behind a draft tree's recorded rounds (docs/acceptance.md,
section 8, "Fitting tree runs").

A tree round accepts the longest path the target sampled, so its accepted length L is all a log records of it. Under
the rank model (:mod:`simlab.acceptance.tree`) exactly one node per depth can be accepted, so
``P(L >= j) = sum of path_prob over the tree's nodes at depth j``: the length's distribution is exact given the
chain's conditional acceptance ``alpha_1..alpha_depth`` and ``catch``. Per method and domain the chain follows the
smooth curve of the tree calibration, ``alpha_d = alpha_inf + (alpha_1 - alpha_inf) rho^(d - 1)``, three parameters
fitted by maximum likelihood on the lengths' histogram (a free rate per depth is not identified: many chains give the
same tree histogram). ``catch`` is the calibration's (0.455, fitted on Llama-3.1-8B EAGLE-3) unless ``fit_catch``:
one tree's histogram tells it only weakly from the chain's level (:func:`fit_histograms` takes several shapes'
histograms, which separate them better). Standard errors come from the observed information (a numerical Hessian
of the log-likelihood), the curve's by the delta method.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from simlab.acceptance.logs.parsed import AcceptanceLog
from simlab.acceptance.tree import build_tree, max_tokens
from simlab.acceptance.tree_fit import chain_alpha
from simlab.common.errors import InputError

MIN_ROUNDS = 50
BOUNDS = ((0.01, 0.995), (0.01, 0.995), (0.0, 1.0), (0.001, 0.999))  # alpha_1, alpha_inf, rho, catch


@dataclass(frozen=True)
class TreeShape:
    """The tree the log's rounds verified: ``topk`` wide, ``depth`` deep, ``num_draft_tokens`` with the root."""

    topk: int
    num_draft_tokens: int
    depth: int


@dataclass(frozen=True)
class TreeFit:
    """One method x domain: the chain curve, ``catch``, their standard errors and the histogram."""

    alpha: np.ndarray
    alpha_se: np.ndarray
    params: np.ndarray  # alpha_1, alpha_inf, rho (and catch when fitted)
    params_se: np.ndarray
    catch: float
    catch_fitted: bool
    num_rounds: int
    measured_tokens_per_round: float
    fitted_tokens_per_round: float


def parse_tree(text: str, depth: Optional[int]) -> TreeShape:
    """``TOPK,NUM_DRAFT_TOKENS`` (``--tree``) with ``--gamma`` as the depth; bad input names the flag."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2 or not all(p.isdigit() and int(p) >= 1 for p in parts):
        raise InputError("not a tree", field="--tree", value=text,
                         valid="TOPK,NUM_DRAFT_TOKENS (e.g. 4,16: SGLang's --speculative-eagle-topk and "
                               "--speculative-num-draft-tokens), with --gamma the depth")
    if depth is None:
        raise InputError("a tree needs its depth", field="--gamma", valid="the tree's depth (SGLang's "
                         "--speculative-num-steps), 1 to 16")
    topk, tokens = int(parts[0]), int(parts[1])
    if not 1 <= tokens - 1 <= max_tokens(topk, depth):
        raise InputError(f"{tokens - 1} draft tokens do not fit a tree of depth {depth} and topk {topk}",
                         field="--tree", value=text, valid=f"NUM_DRAFT_TOKENS from 2 to {max_tokens(topk, depth) + 1}")
    return TreeShape(topk, tokens, depth)


def chain(params: np.ndarray, depth: int) -> np.ndarray:
    """The chain's conditional acceptance at depths 1..``depth`` from (alpha_1, alpha_inf, rho[, catch]): the tree
    calibration's curve (:func:`simlab.acceptance.tree_fit.chain_alpha`)."""
    return chain_alpha(params[:3], depth)


def length_probs(alpha: np.ndarray, catch: float, shape: TreeShape) -> np.ndarray:
    """[depth + 1] P(accepted = 0..depth) of one round of ``shape``."""
    tree = build_tree(alpha, catch, shape.topk, shape.num_draft_tokens, shape.depth)
    at_least = np.zeros(shape.depth + 2)
    np.add.at(at_least, tree.depth[1:], tree.path_prob[1:])
    at_least[0] = 1.0
    return np.clip(at_least[:-1] - at_least[1:], 1e-300, None)


def _negative_log_likelihood(x: np.ndarray, counts: list[np.ndarray], shapes: list[TreeShape], catch: Optional[float]
                             ) -> float:
    c = float(x[3]) if catch is None else catch
    total = 0.0
    for histogram, shape in zip(counts, shapes):
        total -= float(histogram @ np.log(length_probs(chain(x, shape.depth), c, shape)))
    return total


def _hessian(f, x: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Central-difference Hessian, steps kept inside the bounds."""
    n = len(x)
    h = np.minimum(1e-4, np.minimum(x - lower, upper - x) / 2 + 1e-9)
    out = np.zeros((n, n))
    for i in range(n):
        for j in range(i, n):
            e_i, e_j = np.eye(n)[i] * h[i], np.eye(n)[j] * h[j]
            value = (f(x + e_i + e_j) - f(x + e_i - e_j) - f(x - e_i + e_j) + f(x - e_i - e_j)) / (4 * h[i] * h[j])
            out[i, j] = out[j, i] = value
    return out


def fit_histograms(counts: list[np.ndarray], shapes: list[TreeShape], *, catch: Optional[float]) -> TreeFit:
    """Maximum likelihood on the accepted-length histograms of one method x domain (one per tree shape)."""
    from scipy.optimize import minimize

    fit_catch = catch is None
    n = 4 if fit_catch else 3
    lower, upper = np.array([b[0] for b in BOUNDS[:n]]), np.array([b[1] for b in BOUNDS[:n]])

    def f(x: np.ndarray) -> float:
        return _negative_log_likelihood(np.clip(x, lower, upper), counts, shapes, catch)

    best = None
    for start in ([0.8, 0.6, 0.7, 0.45], [0.6, 0.4, 0.5, 0.3], [0.9, 0.8, 0.3, 0.6]):  # the likelihood has kinks
        result = minimize(f, np.array(start[:n]), method="Nelder-Mead",
                          options={"xatol": 1e-7, "fatol": 1e-9, "maxiter": 4000})
        if best is None or result.fun < best.fun:
            best = result
    x = np.clip(best.x, lower, upper)
    covariance = np.linalg.pinv(_hessian(f, x, lower, upper))
    params_se = np.sqrt(np.clip(np.diag(covariance), 0.0, None))
    depth = max(s.depth for s in shapes)
    jacobian = np.zeros((depth, n))
    for i in range(n):  # the curve's sensitivity to each parameter, for the delta method
        step = np.eye(n)[i] * 1e-6
        jacobian[:, i] = (chain(x + step, depth) - chain(x - step, depth)) / 2e-6
    alpha_se = np.sqrt(np.clip(np.einsum("di,ij,dj->d", jacobian, covariance, jacobian), 0.0, None))
    c = float(x[3]) if fit_catch else float(catch)
    rounds = float(sum(h.sum() for h in counts))
    measured = sum(float(h @ np.arange(len(h))) for h in counts) / rounds + 1.0
    fitted = sum(float(h.sum() * (length_probs(chain(x, s.depth), c, s) @ np.arange(s.depth + 1)))
                 for h, s in zip(counts, shapes)) / rounds + 1.0
    return TreeFit(chain(x, depth), alpha_se, x, params_se, c, fit_catch, int(rounds), measured, fitted)


def fit_tree_log(log: AcceptanceLog, shape: TreeShape, *, fit_catch: bool = False
                 ) -> dict[tuple[str, str], TreeFit]:
    """Per (method, domain) of the log's rounds, all of one tree ``shape``: the chain behind the tree."""
    from simlab.acceptance.tree_fit import calibrated_catch

    rounds = log.rounds
    if rounds is None or len(rounds) == 0:
        raise InputError("a tree fit needs the log's rounds (accepted lengths per round)", file=", ".join(log.files),
                         valid="a format with per-round detail (csv, simlab rounds.csv.gz, specdecode-bench)")
    too_long = rounds.accepted > shape.depth
    if too_long.any():
        raise InputError(f"a round accepts {int(rounds.accepted[too_long].max())} drafts, deeper than the tree",
                         file=", ".join(log.files), field="accepted", valid=f"at most --gamma {shape.depth}")
    out = {}
    for key in sorted({(str(m), str(d)) for m, d in zip(rounds.method, rounds.domain)}):
        mine = (rounds.method == key[0]) & (rounds.domain == key[1])
        histogram = np.bincount(rounds.accepted[mine].astype(int), minlength=shape.depth + 1).astype(float)
        if histogram.sum() < MIN_ROUNDS:
            raise InputError(f"too few rounds to fit a tree: {int(histogram.sum())} for {key[0]} x {key[1]}",
                             file=", ".join(log.files), valid=f"at least {MIN_ROUNDS} rounds per method and domain")
        out[key] = fit_histograms([histogram], [shape], catch=None if fit_catch else calibrated_catch())
    return out


def tree_document(fits: dict[tuple[str, str], TreeFit], shape: TreeShape, log: AcceptanceLog,
                  command: Optional[str] = None) -> dict[str, Any]:
    """A ``kind: positional`` acceptance of the chain rates, with the tree, ``catch`` and the fit in provenance."""
    from datetime import datetime, timezone

    from simlab.common.version import __version__

    methods: dict[str, dict[str, list[float]]] = {}
    fit: dict[str, Any] = {}
    for (method, domain), f in fits.items():
        methods.setdefault(method, {})[domain] = [round(float(a), 6) for a in f.alpha]
        names = ["alpha_1", "alpha_inf", "rho"] + (["catch"] if f.catch_fitted else [])
        fit.setdefault(method, {})[domain] = {
            "rounds": f.num_rounds,
            "parameters": {n: round(float(v), 6) for n, v in zip(names, f.params)},
            "standard_errors": {n: round(float(v), 6) for n, v in zip(names, f.params_se)},
            "alpha_standard_errors": [round(float(v), 6) for v in f.alpha_se],
            "tokens_per_round": {"measured": round(f.measured_tokens_per_round, 4),
                                 "fitted": round(f.fitted_tokens_per_round, 4)},
        }
    catches = sorted({round(f.catch, 6) for f in fits.values()})
    provenance: dict[str, Any] = {
        "generator": f"simlab {__version__} acceptance fit --tree",
        "written": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "format": log.format, "logs": list(log.files),
        "tree": {"topk": shape.topk, "num_draft_tokens": shape.num_draft_tokens, "depth": shape.depth,
                 "catch": catches[0] if len(catches) == 1 else catches,
                 "catch_from": "fitted" if any(f.catch_fitted for f in fits.values()) else
                 "the tree calibration (simlab.acceptance.tree_fit)"},
        "use": f"an eagle3 arm with gamma: {shape.depth} and tree: {{topk: {shape.topk}, num_draft_tokens: "
               f"{shape.num_draft_tokens}, catch: {catches[0]}}}",
        "model": "chain alpha_d = alpha_inf + (alpha_1 - alpha_inf) rho^(d-1), maximum likelihood on the accepted "
                 "lengths under the rank model (docs/acceptance.md section 8)",
        "fit": fit,
    }
    if command:
        provenance["command"] = command
    return {"kind": "positional", "methods": methods, "provenance": provenance}
