"""The host time of a lookup drafter's round (``ngram``: prompt lookup; ``suffix``: suffix decoding): no drafter on
the GPU, a lookup per request and round, so a round costs ``num_requests`` x a per-request time (suffix: per
speculated token and per request). From public measurements (docs/roofline.md, "Lookup drafters and draft models"):
n-gram, 0.5875 % of the verify step (SpecDecode-Bench's fitted simulator, predictor.py ``ngram_draft_percentage``,
Llama-3.1-8B on an H100: about 0.11 ms at 64 requests); suffix decoding, 6.3 us per speculated token and 4.1 us
per request to update its tree (Arctic Inference's suffix simulator after its PRs 211 and 212; vLLM 0.15.0 loops
over the requests one at a time, ``suffix_decoding.py:48-88``, so the time grows with the batch).
"""

from __future__ import annotations

LOOKUP_METHODS = ("ngram", "suffix")
NGRAM_REQUEST_S = 1.7e-6  # 0.5875 % of SpecDecode-Bench's fitted verify step at 64 requests x 512 context / 64
SUFFIX_TOKEN_S = 6.3e-6  # Arctic Inference PR 212: spec_ms_per_tok 0.006288
SUFFIX_REQUEST_S = 4.1e-6  # Arctic Inference PR 212: update_ms_per_tok 0.004126 (one output token a round and more)


def lookup_s(method: str, gamma: int, num_requests: float) -> float:
    """Host seconds of one lookup round over ``num_requests`` requests proposing up to ``gamma`` tokens each."""
    if method == "ngram":
        return num_requests * NGRAM_REQUEST_S
    if method == "suffix":
        return num_requests * (gamma * SUFFIX_TOKEN_S + SUFFIX_REQUEST_S)
    raise ValueError(f"not a lookup drafter: {method!r}")
