"""Acceptance-fit benchmarks: the latent model's likelihood and a whole fit. Not part of the test suite.

    python benchmarks/bench_acceptance_fit.py            # both
    python benchmarks/bench_acceptance_fit.py evaluate   # or: fit

evaluate  one likelihood + gradient evaluation on 300 requests x 150 output tokens (about 14,000 rounds, gamma 5),
          without and with the head's confidences: CPU seconds, and nanoseconds per round and grid state
fit       `fit_latent` on 120 requests x 80 output tokens without confidences (the default test's size):
          evaluations, CPU seconds, and the estimates with their standard errors (truth: 0.8, 0.9, 0.6)

CPU time (process_time) is reported beside wall time, as the machine may be shared.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from simlab.acceptance import build_acceptance
from simlab.acceptance.fitting.estimate import fit_latent
from simlab.acceptance.fitting.likelihood import RoundsLikelihood
from simlab.acceptance.logs.parsed import Rounds
from simlab.acceptance.synthetic import simulate_rounds
from simlab.config.acceptance import PositionalAcceptance

TRUTH = {
    "kind": "positional",
    "methods": {"dspark": {"chat": [0.8, 0.75, 0.7, 0.66, 0.62], "math": [0.9, 0.86, 0.82, 0.8, 0.76]}},
    "heterogeneity": {"request_logit_sd": 0.8, "step_logit_sd": 0.9, "step_correlation": 0.6, "token_logit_sd": 0.7},
    "confidence": {"noise_logit_sd": 0.8, "bias_logit": 0.4},
}


def _rounds(num_requests: int, output_tokens: int, confidences: bool, token_sd: float = 0.7) -> Rounds:
    truth = {**TRUTH, "heterogeneity": {**TRUTH["heterogeneity"], "token_logit_sd": token_sd}}
    spec = build_acceptance(PositionalAcceptance.model_validate(truth), file=None)
    rounds = simulate_rounds(spec, "dspark", {"chat": 0.5, "math": 0.5}, 5, num_requests, output_tokens, seed=1)
    if confidences:
        return rounds
    return Rounds(rounds.method, rounds.domain, rounds.sequence, rounds.cluster, rounds.step, rounds.drafted,
                  rounds.verified, rounds.accepted, None)


def bench_evaluate() -> None:
    for confidences in (False, True):
        rounds = _rounds(300, 150, confidences)
        groups = {k: len(v.reached) for k, v in rounds.counts().items()}
        lik = RoundsLikelihood(rounds, groups)
        theta = np.concatenate([np.ones(lik.num_logits), [0.8, 0.9, 0.6, 0.7, 0.4, 0.8]])
        lik.evaluate(theta)
        wall, cpu = time.perf_counter(), time.process_time()
        repeats = 3
        for _ in range(repeats):
            lik.evaluate(theta)
        cpu = (time.process_time() - cpu) / repeats
        wall = (time.perf_counter() - wall) / repeats
        per = cpu / (len(rounds) * lik.grid.num_states) * 1e9
        print(f"evaluate ({'with' if confidences else 'without'} confidences): {len(rounds)} rounds, "
              f"{cpu:.2f} CPU s ({wall:.2f} wall s), {per:.0f} ns per round and state")


def bench_fit() -> None:
    rounds = _rounds(120, 80, False, token_sd=0.0)  # outcomes only identify the model without token noise
    counts = rounds.counts()
    wall, cpu = time.perf_counter(), time.process_time()
    fit = fit_latent(rounds, {k: len(v.reached) for k, v in counts.items()}, {k: v.rates for k, v in counts.items()})
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    estimates = ", ".join(f"{n} {fit.shared[n]:.3f} ± {fit.shared_se[n]:.3f}" for n in fit.free)
    print(f"fit: {len(rounds)} rounds, {fit.evaluations} evaluations, {cpu:.1f} CPU s ({wall:.1f} wall s); {estimates}")


if __name__ == "__main__":
    which = sys.argv[1:] or ["evaluate", "fit"]
    for name in which:
        {"evaluate": bench_evaluate, "fit": bench_fit}[name]()
