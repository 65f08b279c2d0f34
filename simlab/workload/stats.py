"""Summary statistics of a set of requests: size, span, arrival rate and burstiness, token lengths."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class TraceStats:
    """What a trace (or any open-loop request set) looks like.

    ``rate_per_s`` is ``(num_requests - 1) / duration_s``, one over the mean inter-arrival gap;
    ``gap_cv`` is the coefficient of variation of the gaps (1 for Poisson arrivals, more when bursty).
    """

    num_requests: int
    duration_s: float
    rate_per_s: float
    gap_cv: float
    mean_prompt_tokens: float
    median_prompt_tokens: float
    p99_prompt_tokens: float
    max_prompt_tokens: int
    mean_output_tokens: float
    median_output_tokens: float
    p99_output_tokens: float
    max_output_tokens: int

    def to_dict(self) -> dict:
        """A JSON-able dict of the statistics."""
        return asdict(self)


def trace_stats(arrival_s: np.ndarray, prompt_tokens: np.ndarray, output_tokens: np.ndarray) -> TraceStats:
    """Statistics of requests given by their (sorted) arrival times and token counts."""
    num_requests = len(arrival_s)
    duration_s = float(arrival_s[-1] - arrival_s[0]) if num_requests else 0.0
    gaps_s = np.diff(arrival_s)
    mean_gap_s = float(gaps_s.mean()) if len(gaps_s) else 0.0
    rate_per_s = 1.0 / mean_gap_s if mean_gap_s > 0 else float("nan")
    gap_cv = float(gaps_s.std(ddof=1) / mean_gap_s) if len(gaps_s) > 1 and mean_gap_s > 0 else float("nan")
    return TraceStats(
        num_requests=num_requests,
        duration_s=duration_s,
        rate_per_s=rate_per_s,
        gap_cv=gap_cv,
        mean_prompt_tokens=float(np.mean(prompt_tokens)),
        median_prompt_tokens=float(np.median(prompt_tokens)),
        p99_prompt_tokens=float(np.percentile(prompt_tokens, 99)),
        max_prompt_tokens=int(np.max(prompt_tokens)),
        mean_output_tokens=float(np.mean(output_tokens)),
        median_output_tokens=float(np.median(output_tokens)),
        p99_output_tokens=float(np.percentile(output_tokens, 99)),
        max_output_tokens=int(np.max(output_tokens)),
    )
