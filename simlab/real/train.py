"""Training a small target on a token stream, then a DSpark/DFlash drafter against it.

Both loops run a fixed number of optimizer steps with linear warm-up and cosine decay. Given a time budget
instead of a step count, a loop times its first steps and fixes the total from the measured speed (the step
counts it settled on are returned, so a run can be repeated exactly with ``steps=``). Matmuls run under bf16
autocast on CPU when ``bf16`` is set (master weights stay float32).

Drafter losses (DSpark, per block of gamma predictions, summed over positions k with w_k = exp(-(k-1)/lambda)):

- CE:   -w_k log p_d,k(x*_k)              (x* are the data tokens)
- TV:    w_k ||p_d,k - p_t,k||_1           (p_t: the frozen target's next-token distribution on the same prefix)
- conf: -w_k [c*_k log c_k + (1 - c*_k) log(1 - c_k)],  c*_k = 1 - 0.5 ||p_d,k - p_t,k||_1 (no gradient)

combined as 0.1 CE + 0.9 TV + 1.0 conf. p_d,k includes the Markov bias of the data token x*_{k-1}.
"""

from __future__ import annotations

import math
import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from simlab.real.corpus import sample_windows
from simlab.real.drafter import Drafter
from simlab.real.target import TargetModel

Logger = Callable[[str], None]
CALIBRATION_STEPS = 4
RETIME_EVERY = 20


@dataclass(frozen=True)
class OptimConfig:
    """AdamW with warm-up and cosine decay to ``final_lr_ratio`` of ``lr``."""

    lr: float = 2e-3
    warmup_steps: int = 30
    final_lr_ratio: float = 0.1
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    max_grad_norm: float = 1.0


@dataclass(frozen=True)
class TrainReport:
    """What a training loop did: steps, wall seconds, tokens seen and the mean loss of its last 10% steps."""

    steps: int
    seconds: float
    tokens: int
    final_loss: float
    losses: tuple[float, ...]


@dataclass(frozen=True)
class DrafterLossWeights:
    """alpha_CE, alpha_TV, alpha_conf and the position decay lambda of w_k = exp(-(k-1)/lambda)."""

    ce: float = 0.1
    tv: float = 0.9
    confidence: float = 1.0
    position_decay: float = 4.0

    def position_weights(self, gamma: int, device: torch.device | str = "cpu") -> torch.Tensor:
        """w_k for k = 1..gamma."""
        return torch.exp(-torch.arange(gamma, dtype=torch.float32, device=device) / self.position_decay)


def _autocast(enabled: bool):
    return torch.autocast("cpu", dtype=torch.bfloat16) if enabled else nullcontext()


def _lr_at(step: int, total: int, optim: OptimConfig) -> float:
    if step < optim.warmup_steps:
        return optim.lr * (step + 1) / optim.warmup_steps
    progress = min(1.0, (step - optim.warmup_steps) / max(1, total - optim.warmup_steps))
    return optim.lr * (optim.final_lr_ratio + (1 - optim.final_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def _run_loop(
    parameters: list[torch.nn.Parameter],
    step_loss: Callable[[int], torch.Tensor],
    *,
    steps: int | None,
    seconds: float | None,
    optim: OptimConfig,
    tokens_per_step: int,
    log: Logger | None,
    name: str,
) -> TrainReport:
    """Optimise ``step_loss(step)`` for ``steps`` steps, or as many as fit in ``seconds``."""
    if (steps is None) == (seconds is None):
        raise ValueError("give exactly one of steps and seconds")
    optimizer = torch.optim.AdamW(parameters, lr=optim.lr, betas=optim.betas, weight_decay=optim.weight_decay)
    total = steps if steps is not None else optim.warmup_steps  # provisional until the first timing
    losses: list[float] = []
    step_ends: list[float] = []
    start = time.perf_counter()
    step = 0
    while True:
        retime = step == CALIBRATION_STEPS or (step > CALIBRATION_STEPS and step % RETIME_EVERY == 0)
        if seconds is not None and retime:
            # re-estimate from the recent speed, so that a change of machine load moves the end, not the budget
            recent = step_ends[-RETIME_EVERY:]
            before = step_ends[-len(recent) - 1] if len(step_ends) > len(recent) else 0.0
            per_step = (recent[-1] - before) / len(recent)
            total = step + max(0, int((seconds - step_ends[-1]) / per_step))
            if log and step == CALIBRATION_STEPS:
                log(f"{name}: {per_step:.3f} s/step -> about {total} steps in {seconds:.0f} s")
        if step >= total:
            break
        for group in optimizer.param_groups:
            group["lr"] = _lr_at(step, total, optim)
        loss = step_loss(step)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(parameters, optim.max_grad_norm)
        optimizer.step()
        losses.append(float(loss.detach()))
        step_ends.append(time.perf_counter() - start)
        step += 1
        if log and (step % 50 == 0 or step == total):
            log(f"{name}: step {step}/{total} loss {np.mean(losses[-50:]):.4f} ({step_ends[-1]:.0f} s)")
    tail = losses[-max(1, len(losses) // 10):]
    return TrainReport(steps=step, seconds=time.perf_counter() - start, tokens=step * tokens_per_step,
                       final_loss=float(np.mean(tail)), losses=tuple(losses))


def train_target(
    model: TargetModel,
    tokens: np.ndarray,
    *,
    steps: int | None = None,
    seconds: float | None = None,
    batch_size: int = 16,
    seq_len: int = 256,
    seed: int = 0,
    optim: OptimConfig = OptimConfig(),
    bf16: bool = True,
    log: Logger | None = None,
) -> TrainReport:
    """Next-token cross-entropy on random windows of ``tokens``."""
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    model.train()
    vocab = model.config.vocab_size

    def step_loss(_step: int) -> torch.Tensor:
        batch = torch.from_numpy(sample_windows(tokens, batch_size, seq_len + 1, rng))
        with _autocast(bf16):
            logits = model.logits(model(batch[:, :-1]).hidden)
        return F.cross_entropy(logits.reshape(-1, vocab), batch[:, 1:].reshape(-1))

    report = _run_loop(list(model.parameters()), step_loss, steps=steps, seconds=seconds, optim=optim,
                       tokens_per_step=batch_size * seq_len, log=log, name="target")
    model.eval()
    return report


@torch.no_grad()
def evaluate_target_loss(
    model: TargetModel, tokens: np.ndarray, *, num_windows: int = 64, seq_len: int = 256, seed: int = 0,
    bf16: bool = False,
) -> float:
    """Mean next-token cross-entropy (nats per token) on ``num_windows`` random windows."""
    rng = np.random.default_rng(seed)
    batch = torch.from_numpy(sample_windows(tokens, num_windows, seq_len + 1, rng))
    total = 0.0
    for chunk in batch.split(16):
        with _autocast(bf16):
            logits = model.logits(model(chunk[:, :-1]).hidden)
        total += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), chunk[:, 1:].reshape(-1),
                                       reduction="sum"))
    return total / (batch.shape[0] * seq_len)


@dataclass(frozen=True)
class DrafterLosses:
    """The weighted total and its three parts (per block, summed over positions), plus the mean
    analytic acceptance c* per position (a diagnostic)."""

    total: torch.Tensor
    ce: torch.Tensor
    tv: torch.Tensor
    confidence: torch.Tensor
    acceptance: torch.Tensor


def drafter_losses(
    drafter: Drafter,
    target: TargetModel,
    token_ids: torch.Tensor,
    anchors: torch.Tensor,
    gamma: int,
    weights: DrafterLossWeights = DrafterLossWeights(),
    *,
    bf16: bool = False,
) -> DrafterLosses:
    """DSpark losses for blocks starting at ``anchors`` [N, A] of sequences ``token_ids`` [N, S]
    (needs anchors + gamma < S). The target should be frozen (:func:`freeze`): its embedding and LM head are
    on the drafter's path and would otherwise collect gradients."""
    offsets = torch.arange(gamma, device=token_ids.device)
    previous_pos = anchors[..., None] + offsets  # x*_{k-1} positions, also where p_t,k is read
    previous = torch.gather(token_ids, 1, previous_pos.flatten(1)).view_as(previous_pos)
    labels = torch.gather(token_ids, 1, (previous_pos + 1).flatten(1)).view_as(previous_pos)
    with torch.no_grad(), _autocast(bf16):
        out = target(token_ids, hidden_layer_ids=drafter.target_layer_ids)
        rows = torch.arange(token_ids.shape[0], device=token_ids.device)[:, None, None]
        p_target = torch.softmax(target.logits(out.hidden[rows, previous_pos]), dim=-1)
    with _autocast(bf16):
        hidden = drafter.training_forward(target, out.layer_hidden, token_ids, anchors, gamma)
        logits = target.logits(hidden)
        bias = drafter.markov_bias(previous)
        if bias is not None:
            logits = logits + bias
        confidence_logit = drafter.confidence_logit(hidden, previous)
    log_p = torch.log_softmax(logits.float(), dim=-1)
    p_draft = log_p.exp()
    w = weights.position_weights(gamma, token_ids.device)
    ce = -(torch.gather(log_p, -1, labels[..., None]).squeeze(-1) * w).sum(-1).mean()
    l1 = (p_draft - p_target).abs().sum(-1)
    tv = (l1 * w).sum(-1).mean()
    acceptance = (1.0 - 0.5 * l1).detach().clamp(0.0, 1.0)
    if confidence_logit is not None:
        bce = F.binary_cross_entropy_with_logits(confidence_logit.float(), acceptance, reduction="none")
        conf = (bce * w).sum(-1).mean()
    else:
        conf = torch.zeros((), device=token_ids.device)
    total = weights.ce * ce + weights.tv * tv + weights.confidence * conf
    return DrafterLosses(total=total, ce=ce.detach(), tv=tv.detach(), confidence=conf.detach(),
                         acceptance=acceptance.flatten(0, 1).mean(0))


def sample_anchors(
    batch_size: int, seq_len: int, num_anchors: int, gamma: int, generator: torch.Generator
) -> torch.Tensor:
    """[batch_size, num_anchors] distinct block starts in [1, seq_len - gamma - 1] per sequence."""
    span = seq_len - gamma - 1
    if num_anchors > span:
        raise ValueError(f"{num_anchors} anchors do not fit in sequences of {seq_len} with gamma {gamma}")
    return torch.rand(batch_size, span, generator=generator).argsort(dim=1)[:, :num_anchors] + 1


def freeze(model: torch.nn.Module) -> torch.nn.Module:
    """Evaluation mode and no gradients: the target (embedding and LM head included) while a drafter trains."""
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def train_drafter(
    drafter: Drafter,
    target: TargetModel,
    tokens: np.ndarray,
    *,
    steps: int | None = None,
    seconds: float | None = None,
    gamma: int = 7,
    batch_size: int = 8,
    seq_len: int = 256,
    num_anchors: int = 24,
    seed: int = 0,
    weights: DrafterLossWeights = DrafterLossWeights(),
    optim: OptimConfig = OptimConfig(),
    bf16: bool = True,
    log: Logger | None = None,
) -> TrainReport:
    """Train the drafter (target frozen, embedding and LM head shared) on random windows of ``tokens``."""
    rng = np.random.default_rng(seed)
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    freeze(target)
    drafter.train()

    def step_loss(_step: int) -> torch.Tensor:
        batch = torch.from_numpy(sample_windows(tokens, batch_size, seq_len, rng))
        anchors = sample_anchors(batch_size, seq_len, num_anchors, gamma, generator)
        return drafter_losses(drafter, target, batch, anchors, gamma, weights, bf16=bf16).total

    report = _run_loop([p for p in drafter.parameters() if p.requires_grad], step_loss, steps=steps,
                       seconds=seconds, optim=optim, tokens_per_step=batch_size * seq_len, log=log, name="drafter")
    drafter.eval()
    return report


__all__ = [
    "DrafterLossWeights", "DrafterLosses", "OptimConfig", "TrainReport", "drafter_losses", "evaluate_target_loss",
    "freeze", "sample_anchors", "train_drafter", "train_target",
]
