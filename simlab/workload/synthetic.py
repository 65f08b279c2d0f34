"""Synthetic workloads: open-loop Poisson or gamma arrivals, or a closed loop of users, with drawn lengths."""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from simlab.config.workload import ClosedLoopWorkload, EmpiricalLength, GammaWorkload, PoissonWorkload
from simlab.workload.domains import draw_domains
from simlab.workload.lengths import LengthConfig, describe_length, draw_lengths
from simlab.workload.requests import DEFAULT_DOMAINS, ClosedLoop, Requests, Workload
from simlab.workload.streams import ARRIVAL_GAPS, OUTPUT_TOKENS, PROMPT_TOKENS, generator

PoolReader = Callable[[EmpiricalLength, str], np.ndarray]
"""Reads the lengths an empirical distribution resamples, given its config and its field name
(``prompt_tokens`` or ``output_tokens``)."""


def poisson_arrivals_s(rate: float, num_requests: int, rng: np.random.Generator) -> np.ndarray:
    """Arrival times of a Poisson process at ``rate`` per second; the first request arrives at 0.0."""
    return _arrivals_from_gaps(rng.exponential(1.0 / rate, size=max(num_requests - 1, 0)))


def gamma_arrivals_s(rate: float, cv: float, num_requests: int, rng: np.random.Generator) -> np.ndarray:
    """Arrivals with gamma gaps of mean ``1/rate`` and coefficient of variation ``cv`` (cv=1 is Poisson).

    Shape ``k = 1/cv**2`` and scale ``cv**2/rate`` give mean ``1/rate`` and standard deviation ``cv/rate``.
    """
    shape = 1.0 / cv**2
    return _arrivals_from_gaps(rng.gamma(shape, cv**2 / rate, size=max(num_requests - 1, 0)))


def _arrivals_from_gaps(gaps_s: np.ndarray) -> np.ndarray:
    arrival_s = np.empty(len(gaps_s) + 1, dtype=np.float64)
    arrival_s[0] = 0.0
    np.cumsum(gaps_s, out=arrival_s[1:])
    return arrival_s


def build_open_loop(
    cfg: PoissonWorkload | GammaWorkload, *, seed: int, read_pool: Optional[PoolReader] = None
) -> Workload:
    """``num_requests`` open-loop requests; with ``max_duration_s``, only those arriving before it."""
    rng = generator(seed, ARRIVAL_GAPS)
    if isinstance(cfg, GammaWorkload):
        arrival_s = gamma_arrivals_s(cfg.rate, cfg.cv, cfg.num_requests, rng)
    else:
        arrival_s = poisson_arrivals_s(cfg.rate, cfg.num_requests, rng)
    if cfg.max_duration_s is not None:
        arrival_s = arrival_s[arrival_s < cfg.max_duration_s]
    requests = _requests(cfg, arrival_s, seed, read_pool)
    source = {
        "kind": cfg.kind,
        "rate": cfg.rate,
        **({"cv": cfg.cv} if isinstance(cfg, GammaWorkload) else {}),
        "num_requests": len(requests),
        "num_requests_asked": cfg.num_requests,
        "max_duration_s": cfg.max_duration_s,
        **_source_common(cfg, seed),
    }
    return Workload(requests=requests, closed_loop=None, source=source)


def build_closed_loop(
    cfg: ClosedLoopWorkload, *, seed: int, read_pool: Optional[PoolReader] = None
) -> Workload:
    """``num_requests`` requests served by ``concurrency`` users; arrivals are zeros (the engine sets them)."""
    arrival_s = np.zeros(cfg.num_requests, dtype=np.float64)
    requests = _requests(cfg, arrival_s, seed, read_pool)
    source = {
        "kind": cfg.kind,
        "concurrency": cfg.concurrency,
        "think_time_s": cfg.think_time_s,
        "num_requests": len(requests),
        **_source_common(cfg, seed),
    }
    return Workload(
        requests=requests,
        closed_loop=ClosedLoop(concurrency=cfg.concurrency, think_time_s=float(cfg.think_time_s)),
        source=source,
    )


def _requests(
    cfg: PoissonWorkload | GammaWorkload | ClosedLoopWorkload,
    arrival_s: np.ndarray,
    seed: int,
    read_pool: Optional[PoolReader],
) -> Requests:
    num_requests = len(arrival_s)
    prompt = _draw(cfg.prompt_tokens, "prompt_tokens", num_requests, generator(seed, PROMPT_TOKENS), read_pool)
    output = _draw(cfg.output_tokens, "output_tokens", num_requests, generator(seed, OUTPUT_TOKENS), read_pool)
    domain, names = draw_domains(cfg.domains or DEFAULT_DOMAINS, num_requests, seed)
    return Requests(arrival_s=arrival_s, prompt_tokens=prompt, output_tokens=output, domain=domain,
                    domain_names=names)


def _draw(
    cfg: LengthConfig, field: str, num_requests: int, rng: np.random.Generator, read_pool: Optional[PoolReader]
) -> np.ndarray:
    pool = None
    if isinstance(cfg, EmpiricalLength):
        if read_pool is None:
            raise ValueError(f"{field}: an empirical length distribution needs read_pool to read its trace")
        pool = read_pool(cfg, field)
    return draw_lengths(cfg, num_requests, rng, pool)


def _source_common(cfg: PoissonWorkload | GammaWorkload | ClosedLoopWorkload, seed: int) -> dict:
    return {
        "seed": seed,
        "prompt_tokens": describe_length(cfg.prompt_tokens),
        "output_tokens": describe_length(cfg.output_tokens),
        "domains": dict(cfg.domains or DEFAULT_DOMAINS),
    }
