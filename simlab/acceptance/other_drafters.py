"""The acceptance simlab ships for the drafters beside the trained heads (``other_drafters.yaml`` next to this
module): prompt lookup (``ngram``), suffix decoding (``suffix``) and a small draft model (``draft_model``).

A lookup drafter's round finds the context repeating with probability ``match`` (per domain); a round without a
match proposes nothing (:class:`simlab.acceptance.draws.ArmDraws`). Given a match, or for a draft model every round,
draft position k is accepted with probability ``conditional[k-1]`` once the positions before it are: these curves
carry no heterogeneity of their own (their bursts are the matches), and their confidence head is the curve itself.
docs/acceptance.md, "Lookup drafters and draft models".
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

OTHER_DRAFTERS_FILE = Path(__file__).resolve().parent / "other_drafters.yaml"
OTHER_METHODS = ("draft_model", "ngram", "suffix")
LOOKUP_METHODS = ("ngram", "suffix")


@dataclass(frozen=True)
class OtherCurves:
    """One method's shipped curves: per domain its chance of a match and its conditional acceptance, and the
    source they were derived from."""

    method: str
    match: dict[str, float]
    conditional: dict[str, np.ndarray]
    source: str

    @property
    def domains(self) -> tuple[str, ...]:
        return tuple(self.match)


@lru_cache(maxsize=1)
def shipped_curves() -> dict[str, OtherCurves]:
    """Every method's shipped curves, read once (``same_as`` resolved)."""
    from simlab.common.yaml_file import read_yaml

    data = read_yaml(OTHER_DRAFTERS_FILE, what="other drafters' acceptance")
    out: dict[str, OtherCurves] = {}
    for method in OTHER_METHODS:
        entry = data[method]
        match, conditional = {}, {}
        for domain, curve in entry["domains"].items():
            if "same_as" in curve:  # another method's curve for this domain
                curve = data[curve["same_as"]]["domains"][domain]
            if "same_as_domain" in curve:  # this method's curve for another domain
                curve = entry["domains"][curve["same_as_domain"]]
            values = np.asarray(curve["conditional"], dtype=float)
            if not (0.0 < float(curve["match"]) <= 1.0 and np.all((values >= 0.0) & (values <= 1.0))):
                raise ValueError(f"{OTHER_DRAFTERS_FILE.name}: {method}.{domain}: probabilities out of range")
            match[str(domain)], conditional[str(domain)] = float(curve["match"]), values
        out[method] = OtherCurves(method, match, conditional, " ".join(str(entry["source"]).split()))
    return out


def shipped_tokens_per_round(method: str, domain: str, gamma: int) -> float:
    """Tokens a round of ``gamma`` drafts emits on average under the shipped curves when every proposed position is
    verified: 1 + match x (c_1 + c_1 c_2 + ... + c_1 ... c_gamma), the closed form the simulator's draws follow
    (:func:`simlab.acceptance.expected.expected_tokens_per_round` gives the same from a scenario's spec)."""
    curves = shipped_curves()[method]
    key = domain if domain in curves.match else "*"
    survival = np.multiply.accumulate(curves.conditional[key][:gamma])
    return 1.0 + curves.match[key] * float(survival.sum())
