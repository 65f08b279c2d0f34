"""Length distributions against their exact discretised laws; tolerances from the sample size."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter
from scipy import stats

from simlab.config.workload import LengthDist
from simlab.workload.lengths import draw_lengths

ALPHA = 1e-6  # chance that a correct implementation fails one check
Z = stats.norm.isf(ALPHA / 2)
NUM_SAMPLES = 200_000
_length = TypeAdapter(LengthDist)


def draw(spec, num=NUM_SAMPLES, seed=0, pool=None):
    return draw_lengths(_length.validate_python(spec), num, np.random.default_rng(seed), pool)


def rounded_clipped_moments(dist, low, high):
    """Exact mean and sd of clip(rint(X), low, high) for a continuous scipy distribution ``dist``."""
    ks = np.arange(low, high + 1, dtype=np.float64)
    probs = dist.cdf(ks + 0.5) - dist.cdf(ks - 0.5)
    probs[0] = dist.cdf(low + 0.5)  # everything below rounds or clips to low
    probs[-1] = dist.sf(high - 0.5)  # everything above clips to high
    mean = float(np.sum(ks * probs))
    return mean, float(np.sqrt(np.sum((ks - mean) ** 2 * probs)))


def assert_mean_in_ci(samples, mean, sd):
    half_width = Z * sd / np.sqrt(len(samples))
    assert abs(samples.mean() - mean) <= half_width, (samples.mean(), mean, half_width)


def test_constant_and_shorthand():
    assert np.array_equal(draw({"dist": "constant", "value": 7}, 5), np.full(5, 7))
    assert np.array_equal(draw(512, 3), np.full(3, 512))


def test_uniform_is_inclusive_and_flat():
    samples = draw({"dist": "uniform", "low": 3, "high": 9})
    assert samples.dtype == np.int64
    assert samples.min() == 3 and samples.max() == 9
    counts = np.bincount(samples - 3, minlength=7)
    assert stats.chisquare(counts).pvalue > ALPHA


def test_uniform_single_value():
    assert np.array_equal(draw({"dist": "uniform", "low": 5, "high": 5}, 10), np.full(10, 5))


@pytest.mark.parametrize("mean, sigma, cap", [(800.0, 0.8, 8000), (50.0, 1.2, 400), (300.0, 0.0, 1000)])
def test_lognormal_mean_matches_exact_law(mean, sigma, cap):
    samples = draw({"dist": "lognormal", "mean": mean, "sigma": sigma, "max": cap})
    assert samples.min() >= 1 and samples.max() <= cap
    if sigma == 0:
        assert np.all(samples == round(mean))
        return
    mu = np.log(mean) - sigma**2 / 2
    exact_mean, exact_sd = rounded_clipped_moments(stats.lognorm(s=sigma, scale=np.exp(mu)), 1, cap)
    assert_mean_in_ci(samples, exact_mean, exact_sd)


def test_lognormal_unclipped_mean_is_the_arithmetic_mean():
    mean, sigma = 800.0, 0.5
    samples = draw({"dist": "lognormal", "mean": mean, "sigma": sigma})
    sd = mean * np.sqrt(np.expm1(sigma**2))
    # rounding to integers moves the mean by far less than the standard error at this scale
    assert_mean_in_ci(samples, mean, sd)
    log_samples = np.log(samples)
    assert abs(log_samples.std() - sigma) <= Z * sigma / np.sqrt(2 * len(samples))


def test_exponential_mean_matches_exact_law():
    samples = draw({"dist": "exponential", "mean": 200.0, "min": 4, "max": 2000})
    assert samples.min() == 4 and samples.max() <= 2000
    exact_mean, exact_sd = rounded_clipped_moments(stats.expon(scale=200.0), 4, 2000)
    assert_mean_in_ci(samples, exact_mean, exact_sd)


def test_empirical_resamples_the_pool():
    pool = np.array([3, 3, 3, 10, 40], dtype=np.int64)
    samples = draw({"dist": "empirical", "trace": "azure-conv-2023", "column": "prompt"}, pool=pool)
    assert set(np.unique(samples)) == {3, 10, 40}
    for value, p in [(3, 0.6), (10, 0.2), (40, 0.2)]:
        share = np.mean(samples == value)
        assert abs(share - p) <= Z * np.sqrt(p * (1 - p) / len(samples))


def test_empirical_clips_to_bounds():
    pool = np.array([1, 5, 100], dtype=np.int64)
    spec = {"dist": "empirical", "trace": "x", "column": "output", "min": 2, "max": 50}
    assert set(np.unique(draw(spec, 1000, pool=pool))) == {2, 5, 50}


def test_empirical_without_pool_is_an_error():
    with pytest.raises(ValueError, match="pool"):
        draw({"dist": "empirical", "trace": "x", "column": "output"}, 10)


@settings(max_examples=40, deadline=None)
@given(
    mean=st.floats(0.5, 1e5),
    sigma=st.floats(0, 3),
    low=st.integers(1, 50),
    width=st.one_of(st.none(), st.integers(0, 1000)),
    seed=st.integers(0, 2**32),
)
def test_lengths_always_within_bounds(mean, sigma, low, width, seed):
    high = None if width is None else low + width
    for spec in (
        {"dist": "lognormal", "mean": mean, "sigma": sigma, "min": low, "max": high},
        {"dist": "exponential", "mean": mean, "min": low, "max": high},
    ):
        samples = draw(spec, 500, seed)
        assert samples.dtype == np.int64
        assert samples.min() >= low
        if high is not None:
            assert samples.max() <= high
