"""Turn an arm config into the engine's policy: scheduler, calibrated acceptance draws and draft cost."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from simlab.acceptance.draws import ArmDraws
from simlab.acceptance.spec import AcceptanceSpec
from simlab.config.arms import Arm
from simlab.engine import ArmPolicy


@dataclass(frozen=True)
class PreparedArm:
    """An arm ready to simulate, with what the summary says about its confidence head."""

    arm: Arm
    policy: ArmPolicy
    confidence: dict | None


def check_tree_arm(index: int, arm: Arm, engine, cost, file) -> None:
    """What a tree arm needs of the engine and the hardware model (InputError otherwise): every request's whole
    tree fits the token budget, and a model that prices a tree's draft."""
    from simlab.common.errors import InputError

    tokens = arm.tree.num_draft_tokens
    if engine.max_num_seqs * tokens > engine.max_batch_tokens:
        raise InputError(
            f"arms[{index}] verifies {tokens} tokens per request: {engine.max_num_seqs} requests need "
            f"{engine.max_num_seqs * tokens} tokens per step", file=file, field="engine.max_batch_tokens",
            value=engine.max_batch_tokens, valid=f"at least {engine.max_num_seqs * tokens}, or a smaller "
            "engine.max_num_seqs")
    if cost.tree_draft_s(arm.method, arm.draft_len, arm.tree.topk, 1, 0.0) is None:
        raise InputError("the hardware model cannot price a draft tree", file=file, field=f"arms[{index}].tree",
                         value="given", valid="a roofline or a table hardware model")


def _tree(arm: Arm, spec: AcceptanceSpec, weights: dict[str, float]):
    """The arm's draft tree (docs/acceptance.md section 8), built from its chain's conditional acceptance over the
    workload's domain mix; ``catch`` from the arm, else the calibrated one."""
    from simlab.acceptance import expected_conditional_acceptance
    from simlab.acceptance.tree import TreeDraws, build_tree
    from simlab.acceptance.tree_fit import calibrated_catch

    alpha = expected_conditional_acceptance(spec, arm.method, weights, arm.draft_len)
    catch = arm.tree.catch if arm.tree.catch is not None else calibrated_catch()
    tree = build_tree(alpha, catch, arm.tree.topk, arm.tree.num_draft_tokens, arm.draft_len)
    return TreeDraws(tree, catch, arm.tree.topk, arm.draft_len)


MAX_HEAD_MODELS = 64  # confidence heads kept by head_model (a few KB each)
_HEAD_MODELS: dict[tuple, tuple[dict, np.ndarray]] = {}


def head_model(spec: AcceptanceSpec, method: str, weights: dict[str, float], gamma: int, *, calibrate: bool,
               seed: int) -> tuple[dict, np.ndarray]:
    """The arm's confidence report (STS fitted on a warm-up sample unless ``calibrate`` is false) and its prior
    confidences [gamma] (the calibrated head's mean over another warm-up sample; lagged schedulers read them
    for requests too young to have lagged ones).

    Both are pure functions of what the key holds, so they are computed once per process for every arm and
    every sweep point that shares it (a sweep's arms of one method and draft length, its points at one domain
    mix): the STS fit and the warm-up samples are most of a small point's build. Callers get their own copies."""
    from simlab.acceptance import apply_sts, confidence_report, warmup_sample

    key = _head_key(spec, method, weights, gamma, calibrate, seed)
    if key not in _HEAD_MODELS:
        report = confidence_report(spec, method, weights, gamma, calibrate=calibrate, seed=seed)
        temperatures = np.asarray(report["temperatures"], dtype=float) if report.get("temperatures") else None
        sample = warmup_sample(spec, method, weights, gamma, min(spec.calibration_samples, 4096), seed + 1)
        conf = sample.conf_raw if temperatures is None else apply_sts(sample.conf_raw, temperatures)
        if len(_HEAD_MODELS) >= MAX_HEAD_MODELS:
            _HEAD_MODELS.pop(next(iter(_HEAD_MODELS)))
        _HEAD_MODELS[key] = (report, np.asarray(conf, dtype=float).mean(axis=0))
    report, prior_conf = _HEAD_MODELS[key]
    return copy.deepcopy(report), prior_conf.copy()


def _head_key(spec: AcceptanceSpec, method: str, weights: dict[str, float], gamma: int, calibrate: bool,
              seed: int) -> tuple:
    """Everything :func:`head_model` reads: the method's base logits over the mix's domains, the heterogeneity
    and confidence-head models, the sample size, the mix itself (in its order), the draft length and the seed."""
    domains = tuple(weights)
    logits = spec.logits(method, domains, gamma)
    return (method, int(gamma), bool(calibrate), int(seed), tuple((d, float(w)) for d, w in weights.items()),
            logits.tobytes(), spec.heterogeneity.model_dump_json(), spec.confidence.model_dump_json(),
            int(spec.calibration_samples))


def lookup_pads(cost) -> bool:
    """Whether the cost model's release verifies a lookup drafter's full draft in a round without a match (its
    ``speculative.lookup_pads_drafts``; False where it records none)."""
    release = getattr(cost, "release", None)
    rule = release.speculative.get("lookup_pads_drafts") if release is not None else None
    return bool(rule.value) if rule is not None else False


def domain_weights(domain: np.ndarray, domain_names: tuple[str, ...]) -> dict[str, float]:
    """The workload's share of requests per domain."""
    counts = np.bincount(domain, minlength=len(domain_names)).astype(float)
    return {name: counts[i] / counts.sum() for i, name in enumerate(domain_names) if counts[i] > 0}


def prepare_arm(arm: Arm, spec: AcceptanceSpec, scheduler, scheduler_cost, step_cost, *,
                domain_names: tuple[str, ...], weights: dict[str, float], max_batch_tokens: int, seed: int,
                output_tokens=None) -> PreparedArm:
    """Build the policy for one arm; fits STS on a warm-up sample unless the arm says ``calibration: none``.
    ``scheduler`` and ``scheduler_cost`` are the arm's (:func:`simlab.arm_engines.arm_scheduler`), ``step_cost``
    the cost model its steps are timed on. With recorded acceptance (``spec.recorded``), ``output_tokens`` (the
    requests' output lengths) binds each request to the recording it replays."""
    gamma = arm.draft_len
    method = arm.method
    spec = spec.for_method(method)  # simlab's shipped curves of a lookup drafter or a draft model: no spread
    if gamma == 0:
        policy = ArmPolicy(method, 0, None, None, step_cost, max_batch_tokens, np.zeros(0))
        return PreparedArm(arm, policy, None)
    report, prior_conf = head_model(spec, method, weights, gamma, calibrate=arm.calibration == "sts", seed=seed)
    temperatures = np.asarray(report["temperatures"], dtype=float) if report.get("temperatures") else None
    tree = _tree(arm, spec, weights) if arm.tree is not None else None
    draws = ArmDraws(
        seed=seed,
        gamma=gamma,
        base_logit=spec.logits(method, domain_names, gamma),
        heterogeneity=spec.heterogeneity,
        confidence=spec.confidence,
        temperatures=temperatures,
        tree=tree,
        match_prob=None if spec.recorded is not None else spec.match_probs(method, domain_names),
        pads=lookup_pads(step_cost),
    )
    replay = spec.recorded.bind(output_tokens, seed) if spec.recorded is not None else None
    policy = ArmPolicy(method, gamma, scheduler, draws, scheduler_cost, max_batch_tokens, prior_conf, replay, tree,
                       step_cost=step_cost, max_concurrency=arm.max_concurrency or 0,
                       max_drafting=arm.max_drafting or 0)
    return PreparedArm(arm, policy, report)
