"""The survival-sorted candidate path shared by the load-aware schedulers.

Every (request r, position j) pair is a candidate worth a_{r,j} = prod_{i<=j} c_hat_{r,i} expected tokens.
Sorting all candidates by a descending (ties by position) keeps each request's admitted positions a prefix,
because a is non-increasing in j. Admitting the first K candidates of the path gives K verify tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_INVALID = -1.0


def survival(conf: np.ndarray, max_len: np.ndarray) -> np.ndarray:
    """a[s, r, j] = prod_{i<=j} conf[s, r, i], with positions beyond max_len marked invalid (-1)."""
    a = np.cumprod(np.clip(conf, 0.0, 1.0), axis=-1)
    positions = np.arange(conf.shape[-1])
    return np.where(positions < max_len[..., None], a, _INVALID)


@dataclass(frozen=True)
class Path:
    """Candidates of each step sorted by survival: ``order`` indexes the flattened [R*G] candidates."""

    order: np.ndarray  # [S, R*G]
    values: np.ndarray  # [S, R*G] survival along the path (invalid ones last, as -1)
    num_valid: np.ndarray  # [S]
    num_requests: int
    gamma: int

    @property
    def gained(self) -> np.ndarray:
        """[S, n] expected tokens R + sum of the first k+1 candidates' survival, for k = 0..n-1."""
        return self.num_requests + np.cumsum(np.maximum(self.values, 0.0), axis=-1)

    def batch_tokens(self) -> np.ndarray:
        """[1, n] batch tokens after admitting k+1 candidates."""
        return (self.num_requests + 1 + np.arange(self.values.shape[-1]))[None, :]

    def lengths(self, num_admitted: np.ndarray) -> np.ndarray:
        """Per-request verify lengths [S, R] when the first ``num_admitted[s]`` candidates are admitted."""
        steps, n = self.order.shape
        admitted = np.arange(n)[None, :] < num_admitted[:, None]
        flat = np.zeros((steps, n), dtype=bool)
        np.put_along_axis(flat, self.order, admitted, axis=-1)
        return flat.reshape(steps, self.num_requests, self.gamma).sum(axis=-1)


def build_path(a: np.ndarray) -> Path:
    """Sort the candidates of each step in ``a`` [S, R, G] by survival, descending (stable: ties by position)."""
    steps, num_requests, gamma = a.shape
    flat = a.reshape(steps, num_requests * gamma)
    order = np.argsort(-flat, axis=-1, kind="stable")
    values = np.take_along_axis(flat, order, axis=-1)
    num_valid = (values > _INVALID / 2).sum(axis=-1)
    return Path(order=order, values=values, num_valid=num_valid, num_requests=num_requests, gamma=gamma)


def cap(num_valid: np.ndarray, token_budget: int | None) -> np.ndarray:
    """How far along each step's path a scheduler may go."""
    return num_valid if token_budget is None else np.minimum(num_valid, max(int(token_budget), 0))


def argmax_budget(objective: np.ndarray, objective0: np.ndarray, limit: np.ndarray) -> np.ndarray:
    """Per step, the K in [0, limit] maximising the objective (K = 0 is ``objective0``); first maximum wins."""
    n = objective.shape[-1]
    masked = np.where(np.arange(n)[None, :] < limit[:, None], objective, -np.inf)
    full = np.concatenate([objective0[:, None], masked], axis=-1)
    return np.argmax(full, axis=-1)


def clip_to_budget(lengths: np.ndarray, a: np.ndarray, token_budget: int | None) -> np.ndarray:
    """Trim lengths whose total exceeds the budget, keeping the highest-survival positions."""
    if token_budget is None:
        return lengths
    over = lengths.sum(axis=-1) > token_budget
    if not over.any():
        return lengths
    positions = np.arange(a.shape[-1])
    chosen = np.where(positions < lengths[..., None], a, _INVALID)
    path = build_path(chosen[over])
    trimmed = path.lengths(np.minimum(path.num_valid, token_budget))
    out = lengths.copy()
    out[over] = trimmed
    return out
