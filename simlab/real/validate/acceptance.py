"""The acceptance model of a real run, fitted from its ``rounds.csv.gz`` by ``simlab acceptance fit``'s code.

The fit (positional conditional rates per method and domain, request and step heterogeneity, the confidence
head's error) lives in :mod:`simlab.acceptance.fitting`; this module is the one place validation calls it, so that
``simlab validate`` and ``simlab acceptance fit FOLDER --format simlab`` fit the same model the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

SCENARIO_FIELDS = ("kind", "methods", "heterogeneity", "confidence")


def fit_acceptance(folder: Path, *, method: str, heterogeneity: bool = True, max_requests: Optional[int] = None,
                   seed: int = 0, command: Optional[str] = None) -> dict:
    """The fitted acceptance document (``kind: positional``, with its provenance) of the real results folder
    ``folder``, every arm's drafter being ``method``. Without ``heterogeneity`` the curves are the measured
    conditional rates alone (no request or step terms, a perfect head): the diagnostic that separates the
    acceptance model's share of an error from the rest."""
    try:
        from simlab.acceptance.fitting.document import fitted_document
        from simlab.acceptance.fitting.fit import fit_log, relabel
        from simlab.acceptance.logs import read_logs
    except ImportError as exc:  # pragma: no cover - until simlab acceptance fit is part of this checkout
        raise RuntimeError("simlab validate needs the acceptance fitter of `simlab acceptance fit` "
                           f"(simlab.acceptance.fitting): {exc}") from None
    log = relabel(read_logs([Path(folder)], "simlab"), {"*": method}, {})
    fitted = fit_log(log, heterogeneity=heterogeneity, max_requests=max_requests, seed=seed)
    return fitted_document(fitted, log, command=command)


def scenario_acceptance(document: dict) -> dict:
    """The part of a fitted document that a scenario's ``acceptance:`` takes."""
    return {key: document[key] for key in SCENARIO_FIELDS if key in document}


__all__ = ["fit_acceptance", "scenario_acceptance"]
