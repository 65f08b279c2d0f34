"""The compiled draws (simlab.acceptance.draw_kernel) equal, bit for bit, the numpy expressions they replaced
(tests/reference/draws_numpy.py), over random rosters and every combination of the model's terms."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from simlab.acceptance.draws import ArmDraws
from simlab.acceptance.tree import TreeDraws, build_tree
from simlab.config.acceptance import ConfidenceConfig, HeterogeneityConfig
from reference.draws_numpy import generate as numpy_generate

GAMMA = 6


def arm_draws(seed, step_sd, token_sd, noise_sd, bias, temperatures, tree=None) -> ArmDraws:
    return ArmDraws(
        seed=seed,
        gamma=GAMMA,
        base_logit=np.array([[2.0, 1.4, 1.0, 0.7, 0.3, -0.2], [0.5, 0.4, 0.2, 0.0, -0.5, -1.0]]),
        heterogeneity=HeterogeneityConfig(
            request_logit_sd=0.5, step_logit_sd=step_sd, step_correlation=0.7, token_logit_sd=token_sd
        ),
        confidence=ConfidenceConfig(noise_logit_sd=noise_sd, bias_logit=bias),
        temperatures=np.linspace(0.8, 1.5, GAMMA) if temperatures else None,
        tree=tree,
    )


def roster(rng: np.random.Generator, draws: ArmDraws):
    num = int(rng.integers(1, 12))
    ids = rng.choice(5000, size=num, replace=False)
    domains = rng.integers(0, 2, size=num)
    logit = draws.base_logit[domains] + rng.normal(0.0, 0.6, size=(num, 1))
    first = np.where(rng.random(num) < 0.3, 0, rng.integers(0, 3000, size=num))
    previous = rng.normal(0.0, 0.8, size=num)
    steps = rng.integers(0, 40, size=num)  # a request may draw no step
    return ids, logit, first, previous, steps


TERMS = list(itertools.product([0.0, 0.6], [0.0, 0.9], [0.0, 0.5], [0.0, 0.3, [0.4, -0.2, 0.1]], [False, True]))


@pytest.mark.parametrize("step_sd,token_sd,noise_sd,bias,temperatures", TERMS)
def test_compiled_draws_equal_the_numpy_draws_bit_for_bit(step_sd, token_sd, noise_sd, bias, temperatures):
    draws = arm_draws(7, step_sd, token_sd, noise_sd, bias, temperatures)
    rng = np.random.default_rng(hash((step_sd, token_sd, noise_sd, str(bias), temperatures)) % 2**32)
    for _ in range(12):
        args = roster(rng, draws)
        new, old = draws.generate(*args), numpy_generate(draws, *args)
        for a, b in zip(new, old):
            assert a.shape == b.shape and a.dtype.kind == b.dtype.kind
            assert np.array_equal(a, b)


def test_a_tree_arms_draws_equal_the_numpy_draws():
    alpha = np.array([0.8, 0.7, 0.6, 0.5, 0.4, 0.3])
    tree = TreeDraws(build_tree(alpha, 0.45, 4, 24, GAMMA), 0.45, 4)
    draws = arm_draws(3, 0.6, 0.9, 0.5, 0.3, True, tree=tree)
    rng = np.random.default_rng(5)
    for _ in range(20):
        args = roster(rng, draws)
        for a, b in zip(draws.generate(*args), numpy_generate(draws, *args)):
            assert np.array_equal(a, b)


def test_extreme_logits_keep_the_numpy_values():
    """Probabilities at 0 and 1 (logits of +-800), where exp overflows: the same values, no warnings raised."""
    draws = arm_draws(1, 0.0, 0.0, 0.0, 0.0, False)
    ids, first, previous, steps = np.array([1, 2]), np.array([0, 9]), np.zeros(2), np.array([5, 5])
    logit = np.array([[800.0] * GAMMA, [-800.0] * GAMMA])
    with np.errstate(all="ignore"):
        old = numpy_generate(draws, ids, logit, first, previous, steps)
    new = draws.generate(ids, logit, first, previous, steps)
    for a, b in zip(new, old):
        assert np.array_equal(a, b)
    assert list(new[1]) == [GAMMA] * 5 + [0] * 5
