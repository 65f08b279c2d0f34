"""The resolved acceptance model that the engine draws from (built from any ``acceptance:`` config)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from simlab.config.acceptance import ConfidenceConfig, HeterogeneityConfig

ANY_DOMAIN = "*"


@dataclass(frozen=True)
class AcceptanceSpec:
    """Base logit curves L[method][domain][k] plus heterogeneity and confidence-head error.

    ``base_logit[method][domain]`` is a float array over positions k = 1..len (0-based index k-1); +inf means
    the position is always accepted. A domain key ``"*"`` serves every domain (iid models).
    The true conditional acceptance is sigmoid(L_k + delta_r + z_{r,t} + eps_{r,t,k}) (see docs/acceptance.md).
    """

    base_logit: dict[str, dict[str, np.ndarray]]
    heterogeneity: HeterogeneityConfig = HeterogeneityConfig()
    confidence: ConfidenceConfig = ConfidenceConfig()
    calibration_samples: int = 20000
    source: dict[str, Any] = field(default_factory=dict)
    recorded: Any = None  # simlab.acceptance.replay.RecordedAcceptance: outcomes replayed from recordings
    # a lookup drafter's chance that a round finds a match, per method and domain (simlab.acceptance.other_drafters)
    match_prob: dict[str, dict[str, float]] = field(default_factory=dict)
    # methods whose curves are simlab's shipped ones for other drafters: drawn without heterogeneity, the head exact
    plain_methods: frozenset = frozenset()

    def for_method(self, method: str) -> "AcceptanceSpec":
        """The spec ``method``'s rounds are drawn from: for simlab's shipped curves of another drafter
        (``plain_methods``), no heterogeneity and an exact confidence head (their curves are measured means with
        no per-request spread to draw); otherwise this spec."""
        if method not in self.plain_methods:
            return self
        return dataclasses.replace(self, heterogeneity=HeterogeneityConfig(), confidence=ConfidenceConfig())

    def match(self, method: str, domain: str) -> float:
        """The chance that a round of ``method`` in ``domain`` proposes anything (a lookup drafter finds a match);
        1 for every other method."""
        by_domain = self.match_prob.get(method)
        if by_domain is None:
            return 1.0
        return float(by_domain[domain] if domain in by_domain else by_domain[ANY_DOMAIN])

    def match_probs(self, method: str, domains: Sequence[str]) -> Any:
        """[len(domains)] each domain's chance that a round of ``method`` finds a match, or None where every round
        proposes (not a lookup drafter's shipped curves)."""
        if method not in self.match_prob:
            return None
        return np.array([self.match(method, d) for d in domains], dtype=float)

    def curve(self, method: str, domain: str, gamma: int) -> np.ndarray:
        """L_1..L_gamma for one method and domain (KeyError/ValueError when not covered)."""
        by_domain = self.base_logit[method]
        values = by_domain[domain] if domain in by_domain else by_domain[ANY_DOMAIN]
        if len(values) < gamma:
            raise ValueError(f"curve has {len(values)} positions, gamma is {gamma}")
        return np.asarray(values[:gamma], dtype=float)

    def logits(self, method: str, domains: Sequence[str], gamma: int) -> np.ndarray:
        """[len(domains), gamma] base logits for each domain in order."""
        return np.stack([self.curve(method, d, gamma) for d in domains]) if domains else np.zeros((0, gamma))
