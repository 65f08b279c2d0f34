"""Synthetic workloads: Poisson and gamma arrivals, closed loop, domains, determinism, speed."""

import time
from pathlib import Path

import numpy as np
import pytest
from pydantic import TypeAdapter
from scipy import stats

from simlab.config.workload import WorkloadConfig
from simlab.workload import build_workload
from simlab.workload.domains import draw_domains

ALPHA = 1e-6  # chance that a correct implementation fails one check
Z = stats.norm.isf(ALPHA / 2)
_workload = TypeAdapter(WorkloadConfig)


def build(spec, seed=0):
    return build_workload(_workload.validate_python(spec), base_dir=Path("."), seed=seed, file="scenario.yaml")


def open_loop(kind="poisson", num=200_000, rate=20.0, **extra):
    return {"kind": kind, "rate": rate, "num_requests": num, "prompt_tokens": 100, "output_tokens": 10, **extra}


def test_poisson_gaps_are_exponential():
    rate = 20.0
    workload = build(open_loop(rate=rate))
    arrival_s = workload.requests.arrival_s
    assert workload.closed_loop is None
    assert arrival_s[0] == 0.0 and np.all(np.diff(arrival_s) >= 0)
    gaps_s = np.diff(arrival_s)
    mean_gap_s = 1 / rate
    assert abs(gaps_s.mean() - mean_gap_s) <= Z * mean_gap_s / np.sqrt(len(gaps_s))
    assert stats.kstest(gaps_s, stats.expon(scale=mean_gap_s).cdf).pvalue > ALPHA


@pytest.mark.parametrize("cv", [0.5, 1.0, 3.0])
def test_gamma_gaps_have_mean_and_cv(cv):
    rate = 8.0
    gaps_s = np.diff(build(open_loop("gamma", rate=rate, cv=cv)).requests.arrival_s)
    num_gaps = len(gaps_s)
    mean_gap_s = 1 / rate
    assert abs(gaps_s.mean() - mean_gap_s) <= Z * cv * mean_gap_s / np.sqrt(num_gaps)
    sample_cv = gaps_s.std(ddof=1) / gaps_s.mean()
    # delta method for gamma gaps (shape 1/cv^2): sd of the sample cv is cv * sqrt((1 + cv^2) / (2n))
    assert abs(sample_cv - cv) <= Z * cv * np.sqrt((1 + cv**2) / (2 * num_gaps))
    law = stats.gamma(a=1 / cv**2, scale=cv**2 / rate)
    # Gaps far below a microsecond are lost to float resolution once added to arrival times of hours
    # (with cv=3 about 10% of true gaps are below 1 us). Check the share below 1 us with a binomial CI and the
    # shape above it with a KS test against the law conditioned on gap > 1 us.
    tiny_s = 1e-6
    p_tiny = law.cdf(tiny_s)
    assert abs(np.mean(gaps_s <= tiny_s) - p_tiny) <= Z * np.sqrt(p_tiny * (1 - p_tiny) / num_gaps) + 1 / num_gaps
    above = gaps_s[gaps_s > tiny_s]
    conditional_cdf = lambda x: (law.cdf(x) - p_tiny) / (1 - p_tiny)  # noqa: E731
    assert stats.kstest(above, conditional_cdf).pvalue > ALPHA


def test_max_duration_cuts_open_loop():
    workload = build(open_loop(num=1000, rate=10.0, max_duration_s=20.0))
    full = build(open_loop(num=1000, rate=10.0))
    kept = full.requests.arrival_s < 20.0
    assert len(workload.requests) == kept.sum() < 1000
    assert np.array_equal(workload.requests.arrival_s, full.requests.arrival_s[kept])
    assert workload.source["num_requests_asked"] == 1000


def test_closed_loop():
    spec = {"kind": "closed_loop", "concurrency": 32, "num_requests": 640, "think_time_s": 0.25,
            "prompt_tokens": {"dist": "constant", "value": 512}, "output_tokens": {"dist": "constant", "value": 256},
            "domains": {"math": 0.5, "code": 0.5}}
    workload = build(spec, seed=5)
    assert workload.closed_loop.concurrency == 32 and workload.closed_loop.think_time_s == 0.25
    assert len(workload.requests) == 640
    assert np.all(workload.requests.arrival_s == 0.0)
    assert np.all(workload.requests.prompt_tokens == 512) and np.all(workload.requests.output_tokens == 256)
    assert workload.requests.domain_names == ("math", "code")


def test_same_seed_same_requests_and_different_seed_different():
    spec = open_loop("gamma", num=5000, cv=2.0, domains={"a": 1, "b": 1})
    spec["prompt_tokens"] = {"dist": "lognormal", "mean": 800, "sigma": 0.8}
    spec["output_tokens"] = {"dist": "uniform", "low": 1, "high": 1000}
    first, again, other = build(spec, seed=7), build(spec, seed=7), build(spec, seed=8)
    for name in ("arrival_s", "prompt_tokens", "output_tokens", "domain"):
        assert np.array_equal(getattr(first.requests, name), getattr(again.requests, name))
        assert not np.array_equal(getattr(first.requests, name), getattr(other.requests, name))


def test_streams_are_independent_of_each_other():
    base = open_loop(num=2000)
    changed = {**base, "output_tokens": {"dist": "exponential", "mean": 50}}
    a, b = build(base, seed=3), build(changed, seed=3)
    assert np.array_equal(a.requests.arrival_s, b.requests.arrival_s)
    assert np.array_equal(a.requests.prompt_tokens, b.requests.prompt_tokens)


def test_domain_mix_proportions_within_binomial_ci():
    mix = {"math": 0.3, "code": 0.3, "chat": 0.4}
    num = 100_000
    domain, names = draw_domains({k: v * 10 for k, v in mix.items()}, num, seed=1)  # weights are normalised
    assert names == ("math", "code", "chat") and domain.dtype == np.int16
    for index, name in enumerate(names):
        p = mix[name]
        assert abs(np.mean(domain == index) - p) <= Z * np.sqrt(p * (1 - p) / num)


def test_domain_draws_do_not_depend_on_count():
    long, _ = draw_domains({"a": 1, "b": 2}, 1000, seed=4)
    short, _ = draw_domains({"a": 1, "b": 2}, 10, seed=4)
    assert np.array_equal(long[:10], short)


def test_default_domain_is_chat():
    workload = build(open_loop(num=10))
    assert workload.requests.domain_names == ("chat",) and np.all(workload.requests.domain == 0)


def test_empirical_lengths_from_a_shipped_trace():
    spec = open_loop(num=50_000)
    spec["output_tokens"] = {"dist": "empirical", "trace": "azure-conv-2023", "column": "output"}
    spec["prompt_tokens"] = {"dist": "empirical", "trace": "azure-code-2023", "column": "prompt", "max": 4000}
    requests = build(spec).requests
    from simlab.workload import read_trace, shipped_traces

    conv = read_trace(shipped_traces()["azure-conv-2023"].path)
    assert set(np.unique(requests.output_tokens)) <= set(np.unique(conv.output_tokens))
    sd = conv.output_tokens.std()
    assert abs(requests.output_tokens.mean() - conv.output_tokens.mean()) <= Z * sd / np.sqrt(len(requests))
    assert requests.prompt_tokens.max() <= 4000


def test_one_million_requests_generate_fast():
    spec = open_loop("gamma", num=1_000_000, rate=100.0, cv=2.0, domains={"a": 1, "b": 2, "c": 3})
    spec["prompt_tokens"] = {"dist": "lognormal", "mean": 800, "sigma": 0.8, "max": 8000}
    spec["output_tokens"] = {"dist": "uniform", "low": 50, "high": 600}
    build(open_loop(num=10))  # warm up imports
    start = time.perf_counter()
    workload = build(spec)
    elapsed_s = time.perf_counter() - start
    assert len(workload.requests) == 1_000_000
    assert elapsed_s < 1.0, f"1M synthetic requests took {elapsed_s:.2f} s"
