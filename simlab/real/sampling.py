"""Lossless verification of drafted tokens (speculative sampling), vectorised over a ragged batch.

At temperature T > 0, drafted token x_k (drawn from p_d,k) is accepted with probability
min(1, p_t,k(x_k) / p_d,k(x_k)); at the first rejection the emitted token is drawn from
norm(max(0, p_t,k - p_d,k)); when all verified drafts are accepted a bonus token is drawn from the target's
next distribution. The emitted sequence is then distributed exactly as the target's. At T = 0 drafts are
accepted while they equal the target's argmax and the target's argmax is emitted after them, which makes the
output token-for-token the target's greedy output.

Randomness comes in as uniforms in [0, 1) supplied by the caller (keyed per request, so a request's draws do
not depend on which other requests share its batch).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def widen(x: torch.Tensor) -> torch.Tensor:
    """``x`` in float32, or kept in float64 when it already is."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


def sample_from_probs(probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draw from each row of ``probs`` [..., V] (need not sum to 1) with ``uniforms`` [...] in [0, 1).

    Tokens of zero probability are never returned.
    """
    cdf = torch.cumsum(probs.double(), dim=-1)
    total = cdf[..., -1:]
    # strictly below the total, so that rounding of u towards 1 cannot select a trailing impossible token
    threshold = torch.minimum(uniforms.double()[..., None] * total, torch.nextafter(total, torch.zeros_like(total)))
    return torch.searchsorted(cdf, threshold, right=True).squeeze(-1).clamp_max(probs.shape[-1] - 1)


def target_probs(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """softmax(logits / T) in float32, or one-hot of the argmax at T = 0."""
    if temperature == 0.0:
        return torch.nn.functional.one_hot(logits.argmax(dim=-1), logits.shape[-1]).to(widen(logits).dtype)
    return torch.softmax(widen(logits) / temperature, dim=-1)


def analytic_acceptance(draft_probs: torch.Tensor, target_probs_: torch.Tensor) -> torch.Tensor:
    """Expected acceptance of each position, 1 - 0.5 * ||p_d - p_t||_1, over the last axis."""
    return 1.0 - 0.5 * (widen(draft_probs) - widen(target_probs_)).abs().sum(dim=-1)


@dataclass(frozen=True)
class VerifyResult:
    """num_accepted [B]: leading drafts accepted (<= verify length); next_token [B]: the token emitted after
    them (residual resample or bonus); target_probs [B, G+1, V]: the target distributions used."""

    num_accepted: torch.Tensor
    next_token: torch.Tensor
    target_probs: torch.Tensor


def verify(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor,
    target_logits: torch.Tensor,
    verify_lengths: torch.Tensor,
    temperature: float,
    accept_uniforms: torch.Tensor | None = None,
    resample_uniforms: torch.Tensor | None = None,
) -> VerifyResult:
    """Verify the first ``verify_lengths[b]`` of ``draft_tokens`` [B, G] against the target.

    draft_probs:     [B, G, V] distributions the drafts were sampled from (ignored at T = 0).
    target_logits:   [B, G', V] with G' >= max(verify_lengths) + 1; row k is the target's logits for the token
                     after the anchor and drafts 1..k (so row 0 judges draft 1, row L gives the bonus).
    accept_uniforms: [B, G] uniforms for the accept tests; resample_uniforms: [B] for the emitted token.
    """
    batch, gamma = draft_tokens.shape
    device = draft_tokens.device
    lengths = verify_lengths.to(device=device, dtype=torch.long)
    positions = torch.arange(gamma, device=device)
    in_verify = positions[None, :] < lengths[:, None]
    probs_t = target_probs(target_logits, temperature)
    judged = probs_t[:, :gamma]
    if judged.shape[1] < gamma:  # fewer target rows than drafts: only the verified ones matter
        pad = judged.new_zeros(batch, gamma - judged.shape[1], judged.shape[2])
        judged = torch.cat([judged, pad], dim=1)
    if temperature == 0.0:
        accepted = draft_tokens == judged.argmax(dim=-1)
    else:
        if accept_uniforms is None or resample_uniforms is None:
            raise ValueError("verification at temperature > 0 needs accept and resample uniforms")
        p_target = torch.gather(judged, 2, draft_tokens[..., None]).squeeze(-1)
        p_draft = torch.gather(widen(draft_probs), 2, draft_tokens[..., None]).squeeze(-1)
        accepted = accept_uniforms.to(device) * p_draft < p_target  # u < p_t / p_d without dividing
    num_accepted = torch.cumprod((accepted & in_verify).long(), dim=1).sum(dim=1)
    rows = torch.arange(batch, device=device)
    next_dist = probs_t[rows, num_accepted]
    if temperature == 0.0:
        next_token = next_dist.argmax(dim=-1)
    else:
        rejected = num_accepted < lengths
        k = num_accepted.clamp_max(gamma - 1) if gamma else num_accepted
        residual = (next_dist - widen(draft_probs)[rows, k]).clamp_min(0.0) if gamma else next_dist
        # a rejection has probability sum(residual) > 0; an all-zero residual (only from rounding) falls back
        usable = rejected & (residual.sum(dim=-1) > 0)
        dist = torch.where(usable[:, None], residual, next_dist)
        next_token = sample_from_probs(dist, resample_uniforms.to(device))
    return VerifyResult(num_accepted=num_accepted, next_token=next_token, target_probs=probs_t)


__all__ = ["VerifyResult", "analytic_acceptance", "sample_from_probs", "target_probs", "verify", "widen"]
