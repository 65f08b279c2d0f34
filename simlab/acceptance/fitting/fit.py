"""From a parsed log to a fitted ``kind: positional`` acceptance model (what ``simlab acceptance fit`` writes).

1. Method labels are mapped to simlab's drafter methods, domain labels optionally renamed (``--domain-map``).
2. Measured conditional rates per method x domain, with 95 % Wilson intervals and counts, always.
3. Where the log has per-round detail, the latent model is fitted by maximum likelihood (:mod:`.estimate`); the
   curves written are then sigmoid(base logit), which a positional curve means together with the fitted
   heterogeneity. Without per-round detail the measured rates are the curves, with no heterogeneity.
4. Where the rounds are tied to requests and carry confidences, the base logits are anchored to the outcomes
   (:mod:`.anchor`) and the head's bias becomes per position.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np
from scipy.special import expit

from simlab.acceptance.build import DRAFT_METHODS
from simlab.acceptance.fitting.anchor import MIN_RUNS, AnchoredCurves, anchor_curves
from simlab.acceptance.fitting.estimate import LatentFit, fit_latent
from simlab.acceptance.logs.parsed import MAX_POSITIONS, AcceptanceLog, PositionCounts, Rounds
from simlab.common.errors import InputError

ASSUMED_STEP_CORRELATION = 0.8  # the presets' assumption, used when the log cannot identify it
MIN_REQUESTS = 10  # fewer requests cannot tell request from step heterogeneity
MIN_ROUNDS = 50  # fewer rounds (not tied to requests) cannot pin a shift sd and a head


@dataclass
class FittedAcceptance:
    """Curves per method and domain (probabilities), heterogeneity and head error (None when not fitted),
    the measured counts, the latent fit, and notes for the provenance."""

    curves: dict[str, dict[str, list[float]]]
    counts: dict[tuple[str, str], PositionCounts]
    heterogeneity: Optional[dict[str, float]] = None
    confidence: Optional[dict[str, float]] = None
    latent: Optional[LatentFit] = None
    anchored: Optional[AnchoredCurves] = None
    assumed: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def parse_mapping(items: Optional[list[str]], *, flag: str) -> dict[str, str]:
    """``["a=b", ...]`` (items may also be comma-separated) to {a: b}; a bare ``x`` is stored under ``"*"``: it
    maps every label that has no mapping of its own."""
    out: dict[str, str] = {}
    for item in items or []:
        for part in filter(None, (p.strip() for p in item.split(","))):
            if "=" in part:
                key, value = (x.strip() for x in part.split("=", 1))
                if not key or not value:
                    raise InputError("expected LABEL=NAME", field=flag, value=part, valid="e.g. eagle=eagle3")
                out[key] = value
            else:
                out["*"] = part
    return out


def relabel(log: AcceptanceLog, methods: dict[str, str], domains: dict[str, str]) -> AcceptanceLog:
    """The log with simlab method names and renamed domains (InputError when a method cannot be named)."""
    labels = sorted({m for m, _ in log.counts} | (set(log.rounds.method.tolist()) if log.rounds is not None else set()))

    def method_of(label: str) -> str:
        name = methods.get(label, methods.get("*", label))
        if name in DRAFT_METHODS:
            return name
        given = methods.get(label, methods.get("*")) if (label in methods or "*" in methods) else ...
        choices = ", ".join(DRAFT_METHODS)
        if not label:
            raise InputError("the log does not say which drafter made it", field="--method", value=given,
                             valid=f"--method NAME, NAME one of {choices}")
        raise InputError(f"no simlab method for drafter {label!r}", field="--method", value=given,
                         valid=f"--method NAME or --method {label}=NAME, NAME one of {choices} (drafters in this "
                               f"log: {', '.join(labels)})")

    method_map = {label: method_of(label) for label in labels}
    counts: dict = {}
    for (m, d), value in log.counts.items():
        key = (method_map[m], domains.get(d, d))
        counts[key] = counts[key] + value if key in counts else value
    rounds = log.rounds
    if rounds is not None:
        rounds = rounds.relabel(np.array([method_map[m] for m in rounds.method], dtype=object),
                                np.array([domains.get(d, d) for d in rounds.domain], dtype=object))
    return AcceptanceLog(log.format, log.files, counts, rounds, list(log.notes))


def fit_log(log: AcceptanceLog, *, heterogeneity: bool = True, max_requests: Optional[int] = None, seed: int = 0,
            progress: Optional[Callable[[int, float], None]] = None) -> FittedAcceptance:
    """Fit the (relabelled) log; ``heterogeneity=False`` writes measured rates only."""
    counts = {k: v.trimmed() for k, v in log.counts.items() if len(v.trimmed().reached)}
    if not counts:
        raise InputError("the log holds no judged draft positions", file=log.files[0] if log.files else None,
                         valid="a log of speculative decoding with at least one verified draft")
    for key, value in counts.items():
        if len(value.reached) > MAX_POSITIONS:
            counts[key] = PositionCounts(value.reached[:MAX_POSITIONS], value.accepted[:MAX_POSITIONS], value.kind)
    notes = list(log.notes)
    rounds = log.rounds
    latent = anchored = None
    usable = rounds is not None and (rounds.has_sequences or rounds.has_confidence)
    if heterogeneity and usable and _too_small(rounds):
        notes.append(f"too little per-round detail for the latent model ({len(rounds)} rounds, "
                     f"{len(np.unique(rounds.cluster.astype(str)))} requests; it needs {MIN_REQUESTS} requests, or "
                     f"{MIN_ROUNDS} rounds when rounds are not tied to requests): measured rates, no heterogeneity")
        usable = False
    if heterogeneity and usable:
        rounds = _subsample(rounds, max_requests, seed, notes)
        groups = {k: len(counts[k].reached) for k in counts}
        rounds = rounds.select(np.array([(m, d) in groups for m, d in zip(rounds.method, rounds.domain)]))
        rounds = _cap_positions(rounds, groups)
        latent = fit_latent(rounds, groups, {k: v.rates for k, v in counts.items()}, progress=progress)
        if rounds.has_sequences and "bias_logit" in latent.free:
            anchored = anchor_curves(rounds, groups, latent)
            if anchored is None:
                notes.append(f"fewer than {MIN_RUNS} request runs verified every drafted position: the curves are "
                             "the joint fit's, not anchored to the outcomes")
    elif heterogeneity and rounds is not None and not (rounds.has_sequences or rounds.has_confidence):
        notes.append("rounds are not tied to requests and carry no confidences: heterogeneity cannot be told from "
                     "the positional curve, so none is fitted")
    elif heterogeneity:
        notes.append(f"the {log.format} format has per-position counts only: measured rates, no heterogeneity")
    return _assemble(counts, latent, anchored, rounds, notes)


def _assemble(counts, latent: Optional[LatentFit], anchored: Optional[AnchoredCurves], rounds: Optional[Rounds],
              notes: list[str]) -> FittedAcceptance:
    curves: dict[str, dict[str, list[float]]] = {}
    logits = anchored.logits if anchored is not None else latent.logits if latent is not None else None
    for (method, domain), value in sorted(counts.items()):
        values = expit(logits[(method, domain)]) if logits is not None else value.rates
        curves.setdefault(method, {})[domain] = [round(float(x), 6) for x in np.nan_to_num(values, nan=0.0)]
    if latent is None:
        return FittedAcceptance(curves, counts, notes=notes)
    shared = latent.shared
    assumed: dict[str, str] = {}
    if rounds is not None and rounds.has_sequences:
        het = {k: round(shared[k], 4) for k in ("request_logit_sd", "step_logit_sd", "step_correlation")}
    else:
        total = shared["request_logit_sd"]
        het = {"request_logit_sd": round(total / np.sqrt(2), 4), "step_logit_sd": round(total / np.sqrt(2), 4),
               "step_correlation": ASSUMED_STEP_CORRELATION}
        assumed["request_logit_sd, step_logit_sd"] = (f"rounds are not tied to requests: only the total shift sd "
                                                      f"{total:.4f} is identified, split equally (as the presets do)")
        assumed["step_correlation"] = f"{ASSUMED_STEP_CORRELATION} (the presets' assumption; not identified)"
    het["token_logit_sd"] = round(shared["token_logit_sd"], 4)
    confidence = None
    if "bias_logit" in latent.free:
        bias = [round(b, 4) for b in anchored.bias_logit] if anchored is not None else round(shared["bias_logit"], 4)
        confidence = {"noise_logit_sd": round(shared["noise_logit_sd"], 4), "bias_logit": bias}
    else:
        assumed["token_logit_sd"] = ("0: without confidences chained outcomes cannot tell token noise from a "
                                     "steeper curve")
    return FittedAcceptance(curves, counts, het, confidence, latent, anchored, assumed, notes)


def _too_small(rounds: Rounds) -> bool:
    if rounds.has_sequences:
        return len(np.unique(rounds.cluster.astype(str))) < MIN_REQUESTS
    return len(rounds) < MIN_ROUNDS


def _subsample(rounds: Rounds, max_requests: Optional[int], seed: int, notes: list[str]) -> Rounds:
    if max_requests is None:
        return rounds
    clusters = np.unique(rounds.cluster.astype(str))
    if len(clusters) <= max_requests:
        return rounds
    chosen = np.random.default_rng(seed).choice(clusters, size=max_requests, replace=False)
    notes.append(f"latent model fitted on {max_requests} of {len(clusters)} requests (--max-requests, seed {seed})")
    return rounds.select(np.isin(rounds.cluster.astype(str), chosen))


def _cap_positions(rounds: Rounds, groups: dict[tuple[str, str], int]) -> Rounds:
    """Rounds verifying more positions than their group's curve are cut to it (a judged position beyond the
    curve cannot be fitted)."""
    cap = np.array([groups[(m, d)] for m, d in zip(rounds.method, rounds.domain)], dtype=np.int64)
    verified = np.minimum(rounds.verified, cap)
    accepted = np.minimum(rounds.accepted, verified)
    return Rounds(rounds.method, rounds.domain, rounds.sequence, rounds.cluster, rounds.step, rounds.drafted,
                  verified, accepted, rounds.conf)
