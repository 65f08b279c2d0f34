"""Acceptance models: how likely each drafted position is to be accepted, what the confidence head says,
closed-form expectations, and confidence calibration (STS). See docs/acceptance.md.

- :func:`build_acceptance` / :func:`check_coverage`: config -> :class:`AcceptanceSpec`, with clear errors;
- :mod:`.expected`: exact E[a_j], E[tau] and measured per-position acceptance by quadrature;
- :func:`warmup_sample`: rounds drawn from the model (true c, raw head, chained outcomes);
- :func:`fit_sts` / :func:`apply_sts`: Sequential Temperature Scaling;
- :func:`auc`, :func:`ece`, :func:`confidence_report`, :func:`threshold_sweep`: how good the head is.
"""

from simlab.common.lazy import lazy_exports

_EXPORTS = {
    "DRAFT_METHODS": "simlab.acceptance.build", "build_acceptance": "simlab.acceptance.build",
    "check_coverage": "simlab.acceptance.build",
    "apply_sts": "simlab.acceptance.calibration", "fit_sts": "simlab.acceptance.calibration",
    "expected_conditional_acceptance": "simlab.acceptance.expected",
    "expected_survival": "simlab.acceptance.expected", "expected_tokens_per_round": "simlab.acceptance.expected",
    "iid_tokens_per_round": "simlab.acceptance.expected",
    "auc": "simlab.acceptance.metrics", "ece": "simlab.acceptance.metrics",
    "load_preset": "simlab.acceptance.presets", "shipped_presets": "simlab.acceptance.presets",
    "confidence_report": "simlab.acceptance.head_quality", "threshold_sweep": "simlab.acceptance.head_quality",
    "ANY_DOMAIN": "simlab.acceptance.spec", "AcceptanceSpec": "simlab.acceptance.spec",
    "WarmupSample": "simlab.acceptance.warmup", "warmup_sample": "simlab.acceptance.warmup",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)  # scipy and the presets load on first use

__all__ = [
    "ANY_DOMAIN",
    "AcceptanceSpec",
    "DRAFT_METHODS",
    "WarmupSample",
    "apply_sts",
    "auc",
    "build_acceptance",
    "check_coverage",
    "confidence_report",
    "ece",
    "expected_conditional_acceptance",
    "expected_survival",
    "expected_tokens_per_round",
    "fit_sts",
    "iid_tokens_per_round",
    "load_preset",
    "shipped_presets",
    "threshold_sweep",
    "warmup_sample",
]
