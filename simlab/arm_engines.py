"""Each arm's engine settings: the scenario's ``engine:`` with what it leaves unset taken from the serving stack's
release (:mod:`simlab.hardware.releases`), per arm, since engines set other limits when speculation is on."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from simlab.config.arms import Arm
from simlab.config.scenario import EngineConfig
from simlab.hardware.graph_sizes import spec_decode_sizes, with_graph_sizes
from simlab.hardware.overlap import with_overlap
from simlab.hardware.releases import ArmEngine, check_methods, resolve_engine


@dataclass(frozen=True)
class ArmEngines:
    """The engine without speculation (what the scenario's shared parts are checked against: KV policy, the
    cache), each arm's effective engine and the cost model its steps are priced on (the scenario's, with the
    CUDA-graph sizes the release captures for that arm), in the scenario's order."""

    base: EngineConfig
    by_arm: list[EngineConfig]
    described: list[ArmEngine]
    costs: list


def _verified_beyond_anchor(arm: Arm) -> int:
    """Tokens a request of ``arm`` verifies beside its anchor: gamma, or a tree's nodes past the root."""
    if arm.tree is not None:
        return arm.tree.num_draft_tokens - 1
    return arm.draft_len


def _apply(engine: EngineConfig, resolved: ArmEngine) -> EngineConfig:
    return engine.model_copy(update=resolved.settings)


def arm_engines(engine: EngineConfig, arms: list[Arm], cost, file=None) -> ArmEngines:
    """The effective engines of ``arms`` on ``cost`` (a cost model; its ``release`` decides unset fields).

    A tree arm verifies every request's whole tree in one step, so where the release's running-request limit
    would not fit that many trees in the token budget, simlab lowers the limit to what fits (said in its
    ``from``); a limit the scenario sets is checked instead (``simlab.arms.check_tree_arm``)."""
    release = cost.release
    if cost.release_named:  # a release the scenario names serves its arms' drafters (the newest known: assumed to)
        check_methods(release, [arm.method for arm in arms], file=file)
    gpu = cost.gpu.name if release is not None else ""
    given = {name: getattr(engine, name) for name in EngineConfig.model_fields}
    fields_set = set(engine.model_fields_set)
    base = resolve_engine(given, fields_set, release, gpu, speculative=False, draft_tokens=0)
    by_arm, described, costs = [], [], []
    for arm in arms:
        speculative = arm.draft_len > 0
        resolved = resolve_engine(given, fields_set, release, gpu, speculative=speculative,
                                  draft_tokens=_verified_beyond_anchor(arm)) if speculative else base
        if arm.tree is not None and "max_num_seqs" not in fields_set:
            fitting = resolved.settings["max_batch_tokens"] // arm.tree.num_draft_tokens
            if resolved.settings["max_num_seqs"] > fitting:
                resolved = dataclasses.replace(
                    resolved, settings={**resolved.settings, "max_num_seqs": fitting},
                    origin={**resolved.origin, "max_num_seqs": "simlab: whole trees within max_batch_tokens"})
        arm_cost = cost
        rule = release.speculative.get("cuda_graph_sizes") if release is not None and speculative else None
        if rule is not None and cost.buckets.enabled:
            sizes = spec_decode_sizes(cost.buckets.sizes, 1 + _verified_beyond_anchor(arm), rule.value)
            arm_cost = with_graph_sizes(cost, sizes)
            resolved = dataclasses.replace(resolved, graph_sizes=sizes)
        if speculative:  # the round's host time: hidden behind the GPU where the release keeps its overlap
            arm_cost, round_host = with_overlap(arm_cost, resolved.overlap_schedule, 1 + _verified_beyond_anchor(arm))
            resolved = dataclasses.replace(resolved, round_host=round_host)
        by_arm.append(_apply(engine, resolved))
        described.append(resolved)
        costs.append(arm_cost)
    return ArmEngines(_apply(engine, base), by_arm, described, costs)
