"""The latent acceptance fit on rounds a real engine logged (the shipped pair, 24 requests of 48 tokens, every
position verified: tests/fixtures/real_rounds, written by simlab validate's calibration part). On these rounds
the likelihood's forward pass underflows at the optimiser's first trial point; the fit must back off and move,
not stop at its starting values and call that convergence."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from simlab.acceptance.fitting import estimate
from simlab.acceptance.fitting.fit import fit_log, relabel
from simlab.acceptance.fitting.likelihood import RoundsLikelihood
from simlab.acceptance.logs import read_logs

FIXTURE = Path(__file__).parent / "fixtures" / "real_rounds"


def test_the_fit_leaves_its_start_on_real_rounds():
    log = relabel(read_logs([FIXTURE], "simlab"), {"*": "dspark"}, {})
    groups = {("dspark", "code"): 7}
    lik = RoundsLikelihood(log.rounds, groups)
    rates = {key: counts.accepted / np.maximum(counts.reached, 1) for key, counts in log.counts.items()}
    start = lik.evaluate(estimate._start(lik, log.rounds, groups, rates, lik.has_head)).loglik
    fitted = fit_log(log, heterogeneity=True).latent
    assert np.isfinite(fitted.loglik)
    assert fitted.loglik > start + 1.0, (fitted.loglik, start, fitted.message)  # a stuck fit equals its start
    assert fitted.shared["step_logit_sd"] != 0.5 and fitted.shared["token_logit_sd"] != fitted.shared["noise_logit_sd"]
