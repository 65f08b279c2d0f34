"""Per-request random streams for real mode, keyed by (seed, stream, request id, round, position).

Built on :func:`simlab.common.crn.keyed_uniform`, so a request's draws are the same whichever requests share its
batch and in whatever order the engine visits them (common random numbers across arms).
"""

from __future__ import annotations

import numpy as np
import torch

from simlab.common.crn import keyed_uniform

# stream ids of real mode (distinct from the simulator's)
DRAFT_SAMPLE = 101  # drawing drafted tokens from p_d
ACCEPT = 102  # accept tests u < p_t / p_d
EMIT = 103  # the token emitted after the accepted drafts (residual / bonus), and the prefill's first token


def uniforms(
    seed: int, stream: int, request_ids: np.ndarray, round_ids: np.ndarray, num_positions: int | None = None,
    *, device: torch.device | str = "cpu",
) -> torch.Tensor:
    """Uniforms in (0, 1): shape [R] when ``num_positions`` is None, else [R, num_positions]."""
    request_ids = np.asarray(request_ids, dtype=np.int64)
    round_ids = np.asarray(round_ids, dtype=np.int64)
    if num_positions is None:
        values = keyed_uniform(seed, stream, request_ids, round_ids)
    else:
        positions = np.arange(num_positions, dtype=np.int64)[None, :]
        values = keyed_uniform(seed, stream, request_ids[:, None], round_ids[:, None], positions)
    return torch.from_numpy(np.ascontiguousarray(values, dtype=np.float64)).to(device)


__all__ = ["ACCEPT", "DRAFT_SAMPLE", "EMIT", "uniforms"]
