"""One arm's effective engine settings: the scenario's ``engine:`` with what it leaves unset taken from the
serving stack's release (:mod:`simlab.hardware.releases`): a field the scenario sets is kept; a field it leaves
unset takes the release's default, or its value under speculation for an arm that drafts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from simlab.hardware.releases import ENGINE_FIELDS, LEGACY_DEFAULTS, EngineRelease


@dataclass(frozen=True)
class EngineSettings:
    """One arm's effective engine settings and where each came from (``scenario``, ``<stack> <version>``
    default, or ``... under speculation``)."""

    settings: dict[str, Any]
    origin: dict[str, str]
    overlap_schedule: Optional[bool]  # the release's overlap/async scheduler kept (None: no release)
    lookahead_slots: int
    release: Optional[EngineRelease]
    graph_sizes: Optional[list[int]] = None  # the CUDA-graph sizes its steps pad to, where the release changes them
    round_host: Any = None  # a speculative arm's host time per round, and what overlap hides (hardware.overlap)

    def describe(self) -> dict:
        """METRICS ``engine``: the effective settings, the release and where each came from."""
        out = dict(self.settings)
        out["overlap_schedule"] = self.overlap_schedule
        out["lookahead_slots"] = self.lookahead_slots
        if self.graph_sizes is not None:
            out["cuda_graph_max_tokens"] = max(self.graph_sizes, default=0)
        if self.round_host is not None:
            out.update(self.round_host.describe())
        out["stack_version"] = self.release.label if self.release is not None else None
        out["from"] = dict(self.origin)
        return out


def resolve_engine(given: dict[str, Any], fields_set: set[str], release: Optional[EngineRelease], gpu: str, *,
                   speculative: bool, draft_tokens: int) -> EngineSettings:
    """The effective engine fields of one arm. ``given`` holds the scenario's values of :data:`ENGINE_FIELDS`,
    ``fields_set`` those it wrote. Unset fields take, in order: the release's value under speculation (for an
    arm with ``speculative`` on), its default on ``gpu``, simlab's :data:`LEGACY_DEFAULTS` (no release).
    ``draft_tokens`` is what a request verifies beyond its anchor (gamma, or a tree's nodes): the lookahead KV
    slots a release holds for them."""
    settings, origin = {}, {}
    for name in ENGINE_FIELDS:
        if name in fields_set:
            settings[name], origin[name] = given[name], "scenario"
            continue
        chosen, where = None, None
        if release is not None and speculative and name in release.speculative:
            chosen, where = release.speculative[name], f"{release.label} under speculation"
        elif release is not None and release.default(name, gpu) is not None:
            chosen, where = release.default(name, gpu), f"{release.label} default"
        if chosen is None:
            settings[name], origin[name] = LEGACY_DEFAULTS[name], "simlab default (no engine release)"
        else:
            settings[name], origin[name] = chosen.value, where
    overlap = None
    if given.get("overlap_schedule") is not None:
        overlap, origin["overlap_schedule"] = bool(given["overlap_schedule"]), "scenario"
    elif release is not None:
        chosen = release.speculative.get("overlap_schedule") if speculative else None
        where = f"{release.label} under speculation" if chosen is not None else f"{release.label} default"
        chosen = chosen or release.defaults.get("overlap_schedule")
        if chosen is not None:
            overlap, origin["overlap_schedule"] = bool(chosen.value), where
    # a running request holds KV slots for what it verifies beyond its anchor (simlab's paged KV does so always)
    return EngineSettings(settings, origin, overlap, draft_tokens if speculative else 0, release)
