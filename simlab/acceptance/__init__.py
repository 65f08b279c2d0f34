"""Acceptance models: how likely each drafted position is to be accepted, what the confidence head says,
closed-form expectations, and confidence calibration (STS). See docs/acceptance.md.

- :func:`build_acceptance` / :func:`check_coverage`: config -> :class:`AcceptanceSpec`, with clear errors;
- :mod:`.expected`: exact E[a_j], E[tau] and measured per-position acceptance by quadrature;
- :func:`warmup_sample`: rounds drawn from the model (true c, raw head, chained outcomes);
- :func:`fit_sts` / :func:`apply_sts`: Sequential Temperature Scaling;
- :func:`auc`, :func:`ece`, :func:`confidence_report`, :func:`threshold_sweep`: how good the head is.
"""

from simlab.acceptance.build import DRAFT_METHODS, build_acceptance, check_coverage
from simlab.acceptance.calibration import apply_sts, fit_sts
from simlab.acceptance.expected import (
    expected_conditional_acceptance,
    expected_survival,
    expected_tokens_per_round,
    iid_tokens_per_round,
)
from simlab.acceptance.metrics import auc, ece
from simlab.acceptance.presets import load_preset, shipped_presets
from simlab.acceptance.report import confidence_report, threshold_sweep
from simlab.acceptance.spec import ANY_DOMAIN, AcceptanceSpec
from simlab.acceptance.warmup import WarmupSample, warmup_sample

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
