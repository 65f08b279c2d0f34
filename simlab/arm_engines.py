"""Each arm's engine, resolved once: the scenario's ``engine:`` with what it leaves unset taken from the serving
stack's release (:mod:`simlab.hardware.engine_settings`), per arm since engines set other limits when speculation
is on; the cost model the engine times its steps on (the release's CUDA-graph sizes for that arm, its overlap
scheduler); its scheduler and the view of those steps the scheduler reads (its ``sps``). The runner and the
engine read these; nothing patches an arm's cost model elsewhere."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional

from simlab.config.arms import Arm
from simlab.config.scenario import EngineConfig
from simlab.hardware.engine_settings import EngineSettings, resolve_engine
from simlab.hardware.graph_sizes import spec_decode_sizes, with_graph_sizes
from simlab.hardware.operations_table import with_verify_queries
from simlab.hardware.other_drafters import other_drafter_cost
from simlab.hardware.overlap import with_overlap
from simlab.hardware.releases import check_methods
from simlab.hardware.sps_view import scheduler_view
from simlab.schedulers import Scheduler, from_config


@dataclass(frozen=True)
class ArmEngine:
    """One arm's engine: its effective limits (``config``), where each setting came from (``settings``: the
    release's values, graph sizes, the round's host time), the cost model its steps are timed on
    (``step_cost``), its scheduler (None: no drafting) and the cost model that scheduler reads
    (``scheduler_cost``: its view of the steps; ``step_cost`` itself where it reads none)."""

    config: EngineConfig
    settings: EngineSettings
    step_cost: Any
    scheduler: Optional[Scheduler]
    scheduler_cost: Any
    kv_cache_tokens: Optional[int] = None  # a draft model's arm: the KV left beside its weights and KV ("auto")


@dataclass(frozen=True)
class ArmEngines:
    """The engine without speculation (what the scenario's shared parts are checked against: KV policy, the
    cache) and each arm's :class:`ArmEngine`, in the scenario's order."""

    base: EngineConfig
    arms: list[ArmEngine]


def arm_scheduler(arm: Arm, cost) -> tuple[Optional[Scheduler], Any]:
    """``arm``'s scheduler (None where it does not draft) and the cost model it reads: its engine's view of
    ``cost`` (:func:`simlab.hardware.sps_view.scheduler_view`) where it reads the verify cost, else ``cost``."""
    if arm.draft_len == 0:
        return None, cost
    scheduler = from_config(arm.scheduler)
    if not scheduler.entry.reads_verify_cost:
        return scheduler, cost
    return scheduler, scheduler_view(cost, scheduler.sps)


def _verified_beyond_anchor(arm: Arm) -> int:
    """Tokens a request of ``arm`` verifies beside its anchor: gamma, or a tree's nodes past the root."""
    if arm.tree is not None:
        return arm.tree.num_draft_tokens - 1
    return arm.draft_len


def _apply(engine: EngineConfig, resolved: EngineSettings) -> EngineConfig:
    return engine.model_copy(update=resolved.settings)


def arm_engines(engine: EngineConfig, arms: list[Arm], cost, file=None) -> ArmEngines:
    """The engines of ``arms`` on ``cost`` (a cost model; its ``release`` decides unset fields).

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
    resolved_arms = []
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
        step_cost = cost
        if speculative:  # kind: operations prices a verify as its requests' queries over their context
            step_cost = with_verify_queries(cost, 1 + _verified_beyond_anchor(arm))
        rule = release.speculative.get("cuda_graph_sizes") if release is not None and speculative else None
        if rule is not None and cost.buckets.enabled:
            sizes = spec_decode_sizes(cost.buckets.sizes, 1 + _verified_beyond_anchor(arm), rule.value)
            step_cost = with_graph_sizes(step_cost, sizes)  # an operations arm's table keeps its verify queries
            resolved = dataclasses.replace(resolved, graph_sizes=sizes)
        if speculative:  # the round's host time: hidden behind the GPU where the release keeps its overlap
            step_cost, round_host = with_overlap(step_cost, resolved.overlap_schedule, 1 + _verified_beyond_anchor(arm),
                                                 arm.method)
            resolved = dataclasses.replace(resolved, round_host=round_host)
        step_cost = other_drafter_cost(arm, len(resolved_arms), step_cost, file)
        kv_tokens = step_cost.kv_cache_tokens() if arm.method == "draft_model" else None
        scheduler, scheduler_cost = arm_scheduler(arm, step_cost)
        resolved_arms.append(ArmEngine(_apply(engine, resolved), resolved, step_cost, scheduler, scheduler_cost,
                                       kv_tokens))
    return ArmEngines(_apply(engine, base), resolved_arms)
