"""Turn an arm config into the engine's policy: scheduler, calibrated acceptance draws and draft cost."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simlab.acceptance.draws import ArmDraws
from simlab.acceptance.spec import AcceptanceSpec
from simlab.config.arms import Arm
from simlab.engine import ArmPolicy
from simlab.schedulers import from_config


@dataclass(frozen=True)
class PreparedArm:
    """An arm ready to simulate, with what the summary says about its confidence head."""

    arm: Arm
    policy: ArmPolicy
    confidence: dict | None


def domain_weights(domain: np.ndarray, domain_names: tuple[str, ...]) -> dict[str, float]:
    """The workload's share of requests per domain."""
    counts = np.bincount(domain, minlength=len(domain_names)).astype(float)
    return {name: counts[i] / counts.sum() for i, name in enumerate(domain_names) if counts[i] > 0}


def prepare_arm(arm: Arm, spec: AcceptanceSpec, cost, *, domain_names: tuple[str, ...], weights: dict[str, float],
                max_batch_tokens: int, seed: int, output_tokens=None) -> PreparedArm:
    """Build the policy for one arm; fits STS on a warm-up sample unless the arm says ``calibration: none``.
    With recorded acceptance (``spec.recorded``), ``output_tokens`` (the requests' output lengths) binds each
    request to the recording it replays."""
    gamma = arm.draft_len
    method = arm.method
    if gamma == 0:
        policy = ArmPolicy(method, 0, None, None, cost, max_batch_tokens, np.zeros(0))
        return PreparedArm(arm, policy, None)
    from simlab.acceptance import apply_sts, confidence_report, warmup_sample

    report = confidence_report(spec, method, weights, gamma, calibrate=arm.calibration == "sts", seed=seed)
    temperatures = np.asarray(report["temperatures"], dtype=float) if report.get("temperatures") else None
    sample = warmup_sample(spec, method, weights, gamma, min(spec.calibration_samples, 4096), seed + 1)
    conf = sample.conf_raw if temperatures is None else apply_sts(sample.conf_raw, temperatures)
    prior_conf = np.asarray(conf, dtype=float).mean(axis=0)
    draws = ArmDraws(
        seed=seed,
        gamma=gamma,
        base_logit=spec.logits(method, domain_names, gamma),
        heterogeneity=spec.heterogeneity,
        confidence=spec.confidence,
        temperatures=temperatures,
    )
    scheduler = from_config(arm.scheduler)
    replay = spec.recorded.bind(output_tokens, seed) if spec.recorded is not None else None
    policy = ArmPolicy(method, gamma, scheduler, draws, cost, max_batch_tokens, prior_conf, replay)
    return PreparedArm(arm, policy, report)
