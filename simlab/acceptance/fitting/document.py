"""The fitted acceptance file: one ``kind: positional`` mapping that a scenario's ``acceptance:`` may name.

The simulator reads ``methods``, ``heterogeneity`` and ``confidence``; ``provenance`` records the log, the
measured conditional rates with 95 % Wilson intervals and counts, and the fit (estimates with standard errors).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Optional

import numpy as np
import yaml

from simlab.acceptance.fitting.fit import FittedAcceptance
from simlab.acceptance.fitting.rates import rate_table
from simlab.acceptance.logs.parsed import AcceptanceLog


def fitted_document(fitted: FittedAcceptance, log: AcceptanceLog, *, command: Optional[str] = None) -> dict:
    """The mapping written to the file (it validates as a ``kind: positional`` acceptance)."""
    from simlab.common.version import __version__

    doc: dict[str, Any] = {"kind": "positional", "methods": fitted.curves}
    if fitted.heterogeneity is not None:
        doc["heterogeneity"] = dict(fitted.heterogeneity)
    if fitted.confidence is not None:
        doc["confidence"] = dict(fitted.confidence)
    measured: dict = {}
    for (method, domain), counts in sorted(fitted.counts.items()):
        measured.setdefault(method, {})[domain] = rate_table(counts)
    provenance: dict[str, Any] = {
        "generator": f"simlab {__version__} acceptance fit",
        "written": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "format": log.format,
        "logs": list(log.files),
    }
    if command:
        provenance["command"] = command
    if fitted.anchored is not None:
        provenance["curves"] = ("sigmoid of the base logits refitted on the outcomes alone, with the joint fit's "
                                "heterogeneity (together they reproduce the measured rates); the head's bias per "
                                "position keeps its confidences where the joint fit put them")
    elif fitted.latent is not None:
        provenance["curves"] = ("sigmoid of the fitted base logits (with the heterogeneity below they reproduce the "
                                "measured rates)")
    else:
        provenance["curves"] = "measured conditional rates"
    provenance["measured"] = measured
    if fitted.latent is not None:
        provenance["fit"] = _fit_section(fitted)
    if fitted.assumed:
        provenance["assumed"] = dict(fitted.assumed)
    if fitted.notes:
        provenance["notes"] = list(fitted.notes)
    doc["provenance"] = provenance
    return doc


def _fit_section(fitted: FittedAcceptance) -> dict:
    fit = fitted.latent
    base: dict = {}
    for (method, domain), values in sorted(fit.logits.items()):
        se = fit.logit_se[(method, domain)]
        base.setdefault(method, {})[domain] = {"value": _round(values),
                                               "se": _round(se) if se is not None else None}
    parameters = {name: {"value": round(fit.shared[name], 5), "se": _round_one(fit.shared_se[name])}
                  for name in fit.free}
    section = {
        "method": "maximum likelihood: latent request and AR(1) step terms summed out on a grid (forward-backward "
                  "per request), L-BFGS-B",
        "num_rounds": fit.num_rounds, "num_requests": fit.num_clusters, "num_runs": fit.num_runs,
        "loglik": round(fit.loglik, 3), "converged": fit.converged, "optimizer": fit.message,
        "evaluations": fit.evaluations, "standard_errors": fit.se_method,
        "at_bound": fit.at_bound or None, "base_logit": base, "parameters": parameters,
    }
    anchored = fitted.anchored
    if anchored is not None:
        refitted: dict = {}
        for (method, domain), values in sorted(anchored.logits.items()):
            se = anchored.logit_se[(method, domain)]
            refitted.setdefault(method, {})[domain] = {"value": _round(values),
                                                       "se": _round(se) if se is not None else None}
        section["anchored"] = {
            "method": "base logits refitted on the outcomes alone, the shared parameters fixed at the joint fit's",
            "num_rounds": anchored.num_rounds, "num_runs": anchored.num_runs, "converged": anchored.converged,
            "standard_errors": anchored.se_method, "base_logit": refitted,
            "bias_logit": [round(b, 5) for b in anchored.bias_logit],
        }
    return section


def _round(values) -> list:
    return [None if not np.isfinite(v) else round(float(v), 5) for v in np.asarray(values, dtype=float)]


def _round_one(value: Optional[float]) -> Optional[float]:
    return None if value is None or not np.isfinite(value) else round(float(value), 5)


def fitted_yaml(doc: dict, *, command: Optional[str] = None) -> str:
    """YAML text starting with ``# written by simlab acceptance fit`` (so simlab may replace it later)."""
    header = [
        "# written by simlab acceptance fit" + (f": {command}" if command else ""),
        "# A kind: positional acceptance model. Name this file in a scenario: acceptance: PATH (relative to the",
        "# scenario file). methods/heterogeneity/confidence are what the simulator uses; provenance documents them.",
    ]
    body = yaml.safe_dump(_plain(doc), sort_keys=False, default_flow_style=None, width=120, allow_unicode=True)
    return "\n".join(header) + "\n" + body


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value
