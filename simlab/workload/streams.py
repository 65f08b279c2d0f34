"""Seeded random generators for the workload, one independent stream per purpose.

Each purpose has a fixed stream id, so the same scenario seed gives the same requests, and changing one
distribution (say the prompt lengths) never shifts the draws of another (the arrivals).
"""

from __future__ import annotations

import numpy as np

ARRIVAL_GAPS = 0x574B_0001
PROMPT_TOKENS = 0x574B_0002
OUTPUT_TOKENS = 0x574B_0003
DOMAINS = 0x574B_0004


def generator(seed: int, stream: int) -> np.random.Generator:
    """A numpy Generator for ``(seed, stream)``: reproducible, independent across streams and seeds."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), int(stream)]))
