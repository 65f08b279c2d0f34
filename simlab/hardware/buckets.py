"""CUDA-graph bucket padding: a decode-only step of B tokens runs the graph captured for the next size >= B.

Engines capture a CUDA graph for a fixed list of batch sizes and pad a smaller batch up to the next captured
size, so cost is a step function of B up to the largest captured size; above it the step runs without a graph
(eagerly or piecewise) on its exact size.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Optional, Sequence, Union

import numpy as np

VLLM_MAX_CAPTURE_SIZE = 512


def vllm_default_capture_sizes(max_capture_size: int = VLLM_MAX_CAPTURE_SIZE) -> list[int]:
    """vLLM's default ``cudagraph_capture_sizes``: 1, 2, 4, then steps of 8 below 256, steps of 16 from 256.

    This is the pattern vLLM documents for ``--max-cudagraph-capture-size`` (default
    ``min(2 * max_num_seqs, 512)``), see docs/hardware.md. With the default cap: 51 sizes up to 512.
    """
    sizes = [s for s in (1, 2, 4) if s <= max_capture_size]
    sizes += list(range(8, min(max_capture_size + 1, 256), 8))
    sizes += list(range(256, max_capture_size + 1, 16))
    return sizes


class Buckets:
    """Pads a batch of B tokens to the next captured size; sizes above the largest are left as they are."""

    __slots__ = ("sizes", "largest", "_sizes_arr", "_padded")

    def __init__(self, sizes: Optional[Sequence[int]]) -> None:
        self.sizes: list[int] = sorted(set(int(s) for s in sizes)) if sizes else []
        self.largest: float = float(self.sizes[-1]) if self.sizes else 0.0
        self._sizes_arr = np.asarray(self.sizes, dtype=float)
        # padded size of every integer batch 0..largest: one gather pads a whole curve of integer batches
        self._padded = np.arange(int(self.largest) + 1, dtype=float)
        if self.sizes:
            self._padded[1:] = self._sizes_arr[np.searchsorted(self._sizes_arr, self._padded[1:], side="left")]

    @classmethod
    def from_config(cls, value: Union[str, Sequence[int], None]) -> "Buckets":
        """``"default"`` (vLLM's sizes), ``"none"`` or None (no padding), or an explicit list."""
        if value is None or value == "none":
            return cls(None)
        if value == "default":
            return cls(vllm_default_capture_sizes())
        return cls(value)  # type: ignore[arg-type]

    @property
    def enabled(self) -> bool:
        return bool(self.sizes)

    def pad(self, batch_tokens: float) -> float:
        """The size whose graph runs a batch of ``batch_tokens`` (one value)."""
        if batch_tokens > self.largest or batch_tokens <= 0:
            return batch_tokens
        return float(self.sizes[bisect_left(self.sizes, batch_tokens)])

    def pad_array(self, batch_tokens: np.ndarray) -> np.ndarray:
        """:meth:`pad` for every element (float array out)."""
        if not self.sizes:
            return np.asarray(batch_tokens, dtype=float)
        if isinstance(batch_tokens, np.ndarray) and batch_tokens.dtype.kind in "iu":
            largest = len(self._padded) - 1
            padded = self._padded[np.minimum(np.maximum(batch_tokens, 0), largest)]
            return np.where(batch_tokens > largest, batch_tokens, padded)
        b = np.asarray(batch_tokens, dtype=float)
        index = np.minimum(self._sizes_arr.searchsorted(b, side="left"), len(self.sizes) - 1)
        return np.where((b <= self.largest) & (b > 0), self._sizes_arr[index], b)

    def to_config(self) -> Optional[list[int]]:
        return list(self.sizes) if self.sizes else None
