"""What one profiler run measures: the grids, how batch tokens are placed over requests, and the defaults.

No torch here, so that grids can be built, checked and estimated without it.

Verify points are ``(B, C)``: B batch tokens in one target forward, C the TOTAL KV tokens of prior context
that the forward reads (the simulator's ``verify.context_tokens`` axis). B is placed over
``R = ceil(B / q)`` requests, ``q = 1 + gamma`` (a verify of gamma drafts plus the anchor), the tokens spread as
evenly as possible (query lengths differ by at most one; rows are padded to the longest, as in the real engine),
and C is spread evenly over the same R requests (their contexts differ by at most one token).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Optional

from simlab.common.errors import InputError
from simlab.hardware.buckets import VLLM_MAX_CAPTURE_SIZE, vllm_default_capture_sizes

PLACEMENT_NOTE = (
    "B batch tokens are placed over R = ceil(B / q) requests, q = 1 + gamma query tokens per request, spread "
    "evenly (query lengths differ by at most 1; rows padded to the longest, as the real engine pads); the total "
    "context C (KV tokens read, the simulator's context axis) is spread evenly over the same R requests."
)


@dataclass(frozen=True)
class ProfileSpec:
    """Everything a run measures and how (see the module docstring for the verify placement).

    batch_tokens:              verify grid columns (tokens in one target forward).
    context_tokens:            verify grid rows: TOTAL prior-context KV tokens read by the step.
    gamma:                     drafted positions per request; verify requests carry q = 1 + gamma tokens, and
                               the table's draft curves are measured at this gamma.
    draft_gammas:              gammas of the parallel-block sweep recorded in provenance (includes ``gamma``).
    draft_requests:            request counts R of the drafter curves.
    draft_context_per_request: prior context (tokens) of each drafting request (the injected target features).
    prefill_chunks:            single-request prompt chunks timed for ``prefill.per_token_s`` (the largest is used).
    warmup / replays:          untimed runs before, and timed runs (median taken) at, every point.
    use_cuda_graphs:           capture each point in a CUDA graph (CUDA only; eager fallback on failure).
    threads:                   torch CPU threads (pinned with ``torch.set_num_threads``); None keeps torch's.
    time_budget_s:             stop adding points when the next one would end past this many seconds.
    """

    device: str
    dtype: str
    batch_tokens: tuple[int, ...]
    context_tokens: tuple[int, ...]
    gamma: int
    draft_gammas: tuple[int, ...]
    draft_requests: tuple[int, ...]
    draft_context_per_request: int
    prefill_chunks: tuple[int, ...]
    warmup: int = 2
    replays: int = 5
    use_cuda_graphs: bool = True
    threads: Optional[int] = None
    time_budget_s: Optional[float] = None

    @property
    def query_tokens_per_request(self) -> int:
        """q: query tokens of one verifying request (the anchor plus gamma drafts)."""
        return 1 + self.gamma

    @property
    def max_batch_tokens(self) -> int:
        return max(self.batch_tokens)

    def grid(self) -> dict[str, Any]:
        """The grids, JSON-ready (for provenance)."""
        data = asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()
                if k not in ("device", "dtype")}


def spread(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` integers that differ by at most one, larger ones first."""
    if parts <= 0:
        raise ValueError("parts must be positive")
    base, extra = divmod(int(total), parts)
    return [base + 1] * extra + [base] * (parts - extra)


def place_verify(batch_tokens: int, context_tokens: int, query_tokens_per_request: int) -> tuple[list[int], list[int]]:
    """Query lengths and prior contexts of the R requests of one verify point (see the module docstring)."""
    num_requests = math.ceil(batch_tokens / query_tokens_per_request)
    return spread(batch_tokens, num_requests), spread(context_tokens, num_requests)


def powers_of_two(limit: int) -> list[int]:
    """1, 2, 4, ... up to ``limit``, and ``limit`` itself."""
    values, v = [], 1
    while v < limit:
        values.append(v)
        v *= 2
    return values + [limit]


def batch_token_grid(max_batch_tokens: int, *, capture_sizes: bool = True) -> list[int]:
    """Every power of two up to ``max_batch_tokens`` (and it), plus vLLM's default CUDA-graph capture sizes
    below it when ``capture_sizes``."""
    grid = set(powers_of_two(max_batch_tokens))
    if capture_sizes:
        cap = min(VLLM_MAX_CAPTURE_SIZE, max_batch_tokens)
        grid |= set(vllm_default_capture_sizes(cap))
    return sorted(grid)


def capture_buckets(batch_tokens: tuple[int, ...]) -> list[int]:
    """The CUDA-graph sizes an engine would pad to: vLLM's default sizes that the grid measured."""
    measured = set(batch_tokens)
    return [s for s in vllm_default_capture_sizes(min(VLLM_MAX_CAPTURE_SIZE, max(batch_tokens))) if s in measured]


def parse_int_list(text: str, *, option: str, minimum: int = 0) -> tuple[int, ...]:
    """``"512,2048"`` -> (512, 2048), sorted and unique; InputError naming ``option`` otherwise."""
    try:
        values = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise InputError("not a comma-separated list of integers", field=option, value=text,
                         valid=f"integers >= {minimum}, e.g. 512,2048,8192") from None
    if not values or values[0] < minimum:
        raise InputError(f"every value must be an integer >= {minimum}", field=option, value=text,
                         valid=f"integers >= {minimum}, e.g. 512,2048,8192")
    return tuple(values)


# Grids by purpose. ``quick`` is for tests and dry runs: a few points on a tiny model in seconds.
QUICK_BATCH_TOKENS = (1, 2, 4, 8, 16, 32, 64)
QUICK_CONTEXTS = (0, 256)
DEFAULT_CONTEXTS = {"cuda": (512, 2048, 8192, 32768), "cpu": (0, 512, 2048)}
DEFAULT_MAX_BATCH_TOKENS = {"cuda": 8192, "cpu": 512}
DEFAULT_DRAFT_CONTEXT = 1024  # per request, as the roofline export samples its drafter curves


def build_spec(
    *,
    device: str,
    dtype: str,
    gamma: int,
    quick: bool = False,
    max_batch_tokens: Optional[int] = None,
    contexts: Optional[tuple[int, ...]] = None,
    draft_gammas: Optional[tuple[int, ...]] = None,
    draft_context_per_request: Optional[int] = None,
    prefill_tokens: Optional[int] = None,
    warmup: Optional[int] = None,
    replays: Optional[int] = None,
    use_cuda_graphs: bool = True,
    threads: Optional[int] = None,
    time_budget_s: Optional[float] = None,
) -> ProfileSpec:
    """A :class:`ProfileSpec` from the command's options (None: the default for ``device`` / ``quick``)."""
    kind = "cuda" if device.startswith("cuda") else "cpu"
    if quick:
        limit = max_batch_tokens or max(QUICK_BATCH_TOKENS)
        batch = tuple(b for b in QUICK_BATCH_TOKENS if b < limit) + (limit,)
    else:
        batch = tuple(batch_token_grid(max_batch_tokens or DEFAULT_MAX_BATCH_TOKENS[kind]))
    q = 1 + gamma
    max_requests = max(1, max(batch) // q)
    requests = tuple(powers_of_two(max_requests))
    if draft_gammas is None:
        draft_gammas = (gamma,) if quick else tuple(sorted({2, 4, gamma, 16}))
    draft_gammas = tuple(sorted(set(draft_gammas) | {gamma}))
    chunk = prefill_tokens or (min(64, max(batch)) if quick else min(2048, max(batch)))
    if contexts is None:
        contexts = QUICK_CONTEXTS if quick else DEFAULT_CONTEXTS[kind]
    return ProfileSpec(
        device=device, dtype=dtype, batch_tokens=batch, context_tokens=tuple(contexts),
        gamma=gamma, draft_gammas=draft_gammas, draft_requests=requests,
        draft_context_per_request=(draft_context_per_request if draft_context_per_request is not None
                                   else (32 if quick else DEFAULT_DRAFT_CONTEXT)),
        prefill_chunks=tuple(sorted({chunk // 4, chunk} - {0})),
        warmup=warmup if warmup is not None else (1 if quick else 2),
        replays=replays if replays is not None else (3 if quick else 5),
        use_cuda_graphs=use_cuda_graphs and kind == "cuda", threads=threads, time_budget_s=time_budget_s,
    )


__all__ = [
    "PLACEMENT_NOTE", "ProfileSpec", "batch_token_grid", "build_spec", "capture_buckets", "parse_int_list",
    "place_verify", "powers_of_two", "spread",
]
