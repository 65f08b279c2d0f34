"""The requests a simulation replays: arrays in arrival order, with request id = index."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

DEFAULT_DOMAINS: dict[str, float] = {"chat": 1.0}
"""The domain mix used when a workload names none."""


@dataclass(frozen=True)
class Requests:
    """N requests as parallel read-only arrays; request ``i`` is index ``i`` (arrival order).

    ``arrival_s`` is non-decreasing and starts at 0.0 for an open loop; it is all zeros for a closed loop (the
    engine assigns arrivals). Token counts are >= 1. ``domain[i]`` indexes ``domain_names``.
    """

    arrival_s: np.ndarray  # float64 [N]
    prompt_tokens: np.ndarray  # int64 [N]
    output_tokens: np.ndarray  # int64 [N]
    domain: np.ndarray  # int16 [N]
    domain_names: tuple[str, ...]
    prefix_ids: Optional[tuple[np.ndarray, np.ndarray]] = None  # (offsets int64 [N+1], hash ids int64 [M])
    # float64 [N]: the share of each output repeating its context (a trace's overlap column); None: not given
    overlap: Optional[np.ndarray] = None

    def __post_init__(self) -> None:
        fields = {
            "arrival_s": (self.arrival_s, np.float64),
            "prompt_tokens": (self.prompt_tokens, np.int64),
            "output_tokens": (self.output_tokens, np.int64),
            "domain": (self.domain, np.int16),
        }
        num_requests = len(self.arrival_s)
        for name, (array, dtype) in fields.items():
            if not isinstance(array, np.ndarray) or array.dtype != dtype or array.ndim != 1:
                raise TypeError(f"Requests.{name} must be a 1-d {np.dtype(dtype)} array")
            if len(array) != num_requests:
                raise ValueError(f"Requests.{name} has {len(array)} entries, arrival_s has {num_requests}")
            array.setflags(write=False)
        if num_requests and not np.all(np.isfinite(self.arrival_s)):
            raise ValueError("Requests.arrival_s must be finite")
        if num_requests > 1 and np.any(np.diff(self.arrival_s) < 0):
            raise ValueError("Requests.arrival_s must be non-decreasing")
        if num_requests and (self.prompt_tokens.min() < 1 or self.output_tokens.min() < 1):
            raise ValueError("Requests token counts must be >= 1")
        if not self.domain_names:
            raise ValueError("Requests.domain_names must name at least one domain")
        if num_requests and (self.domain.min() < 0 or self.domain.max() >= len(self.domain_names)):
            raise ValueError("Requests.domain must index domain_names")
        if self.overlap is not None:
            if self.overlap.shape != (num_requests,) or not np.all((self.overlap >= 0.0) & (self.overlap <= 1.0)):
                raise ValueError("Requests.overlap must hold a share from 0 to 1 per request")
            self.overlap.setflags(write=False)

    def __len__(self) -> int:
        return len(self.arrival_s)

    def take(self, index: np.ndarray) -> "Requests":
        """The requests at ``index`` (e.g. a sort order or a truncation), prefix ids included."""
        prefix_ids = None
        if self.prefix_ids is not None:
            offsets, ids = self.prefix_ids
            counts = (offsets[1:] - offsets[:-1])[index]
            starts = offsets[:-1][index]
            new_offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
            gather = np.repeat(starts - new_offsets[:-1], counts) + np.arange(int(new_offsets[-1]))
            prefix_ids = (new_offsets, ids[gather])
        return Requests(self.arrival_s[index], self.prompt_tokens[index], self.output_tokens[index],
                        self.domain[index], self.domain_names, prefix_ids,
                        None if self.overlap is None else self.overlap[index])

    def domain_labels(self) -> np.ndarray:
        """The domain name of each request (an object array of str)."""
        return np.asarray(self.domain_names, dtype=object)[self.domain]


@dataclass(frozen=True)
class ClosedLoop:
    """A closed loop: ``concurrency`` users; each sends its next request ``think_time_s`` after the last ends."""

    concurrency: int
    think_time_s: float


@dataclass(frozen=True)
class Workload:
    """The requests to serve, how they arrive, and a JSON-able description of where they came from.

    ``closed_loop`` is None for an open loop (trace replay, poisson, gamma): the requests arrive at
    ``requests.arrival_s``. Otherwise the engine releases them to ``closed_loop.concurrency`` users in id order.
    """

    requests: Requests
    closed_loop: Optional[ClosedLoop]
    source: dict[str, Any]
