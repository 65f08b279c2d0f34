"""Tiny random models for real-mode tests (float64 by default: exact comparisons need no tolerance games)."""

from __future__ import annotations

import dataclasses

import torch

from simlab.real.config import DrafterConfig, TargetConfig, target_preset


def tiny_target_config(**changes) -> TargetConfig:
    """The tiny preset with optional changes (e.g. a smaller vocabulary)."""
    return dataclasses.replace(target_preset("tiny"), **changes)


def tiny_drafter_config(layout: str = "dspark", **changes) -> DrafterConfig:
    """Two draft layers on the tiny target's two layers."""
    base = dict(num_hidden_layers=2, target_layer_ids=(0, 1), layout=layout, markov_rank=32,
                confidence_head=True, block_size=5)
    base.update(changes)
    return DrafterConfig(**base)


def build_pair(seed: int = 0, *, layout: str = "dspark", dtype=torch.float64, target_changes=None,
               drafter_changes=None, logit_scale: float = 1.0):
    """A random tiny target and drafter. ``logit_scale`` sharpens the target's distributions."""
    from simlab.real.drafter import Drafter
    from simlab.real.target import TargetModel

    torch.manual_seed(seed)
    tc = tiny_target_config(**(target_changes or {}))
    target = TargetModel(tc).to(dtype).eval()
    if logit_scale != 1.0:
        with torch.no_grad():
            target.norm.weight.mul_(logit_scale)
    drafter = Drafter(tiny_drafter_config(layout, **(drafter_changes or {})), tc).to(dtype).eval()
    with torch.no_grad():  # a non-zero Markov head, so that the sequential correction matters
        if drafter.markov_out is not None:
            torch.nn.init.normal_(drafter.markov_out.weight, std=0.5)
    return target, drafter


