"""Engine releases as data: what vLLM, SGLang and TensorRT-LLM do by default at a release, and what they do
differently when speculative decoding is on (docs/serving-stacks.md, "Engine releases").

A roofline's ``stack`` names the engine and ``stack_version`` its release (left out: the newest simlab knows).
Each release is a file under ``engine_releases/`` (one per engine), every value with its source: the engine's
file and line at that release's tag, or a measurement. :func:`simlab.hardware.engine_settings.resolve_engine`
turns a scenario's ``engine:`` into one arm's effective settings; :mod:`simlab.hardware.release_table` writes
the docs' table of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from simlab.common.errors import InputError

RELEASES_DIR = Path(__file__).resolve().parent / "engine_releases"
ENGINE_FIELDS = ("max_num_seqs", "max_batch_tokens", "prefill_chunk_tokens", "kv_policy", "block_size")
DEFAULT_FIELDS = ENGINE_FIELDS + ("overlap_schedule",)  # an engine's own default (recorded, see EngineSettings)
# what a release may change when speculation is on
SPECULATIVE_FIELDS = DEFAULT_FIELDS + ("lookahead_slots", "cuda_graph_sizes", "lookup_pads_drafts")
GRAPH_SIZE_RULES = ("multiples_of_query_len", "requests_times_query_len")  # simlab.hardware.graph_sizes
LEGACY_DEFAULTS = {"max_num_seqs": 256, "max_batch_tokens": 8192, "prefill_chunk_tokens": None,
                   "kv_policy": "reserve", "block_size": 16}  # without a serving stack (tables, simlab's eager engine)


@dataclass(frozen=True)
class Sourced:
    """One value of a release and where it was read."""

    value: Any
    source: str


@dataclass(frozen=True)
class EngineRelease:
    """One release of one engine: its defaults, per-GPU exceptions and what speculation changes."""

    stack: str
    version: str
    date: str
    ref: str  # the tag or commit its sources were read at
    defaults: dict[str, Sourced]
    gpu_overrides: dict[str, dict[str, Sourced]] = field(default_factory=dict)
    speculative: dict[str, Sourced] = field(default_factory=dict)
    methods: Optional[Sourced] = None  # the drafter methods (simlab's names) it serves; None: not recorded

    @property
    def label(self) -> str:
        return f"{self.stack} {self.version}"

    def serves(self, method: str) -> bool:
        """Whether the release runs the drafter ``method`` (``none`` always; True where it records no methods)."""
        return method == "none" or self.methods is None or method in self.methods.value

    def default(self, name: str, gpu: str) -> Optional[Sourced]:
        """The release's default of engine field ``name`` on ``gpu`` (None where it has none)."""
        return self.gpu_overrides.get(gpu, {}).get(name) or self.defaults.get(name)

    def describe(self) -> dict:
        def plain(values: dict[str, Sourced]) -> dict:
            return {k: {"value": v.value, "source": v.source} for k, v in values.items()}

        return {"stack": self.stack, "version": self.version, "date": self.date, "ref": self.ref,
                **({"methods": {"value": self.methods.value, "source": self.methods.source}} if self.methods else {}),
                "defaults": plain(self.defaults),
                "gpu_overrides": {g: plain(v) for g, v in self.gpu_overrides.items()},
                "speculative": plain(self.speculative)}


def version_key(version: str) -> tuple[int, ...]:
    """A release's numbers in order (``0.5.6.post2`` -> (0, 5, 6, 2)): the order releases come in."""
    return tuple(int(n) for n in re.findall(r"\d+", version))


def _sourced(entry: Any, where: str) -> Sourced:
    if not isinstance(entry, dict) or "value" not in entry or not entry.get("source"):
        raise ValueError(f"{where}: each value needs 'value' and 'source'")
    if where.endswith("cuda_graph_sizes") and entry["value"] not in GRAPH_SIZE_RULES:
        raise ValueError(f"{where}: one of {', '.join(GRAPH_SIZE_RULES)}")
    return Sourced(entry["value"], str(entry["source"]))


def _section(data: Any, allowed: tuple[str, ...], where: str) -> dict[str, Sourced]:
    data = data or {}
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise ValueError(f"{where}: unknown fields {unknown}; valid: {', '.join(allowed)}")
    return {name: _sourced(entry, f"{where}.{name}") for name, entry in data.items()}


@lru_cache(maxsize=1)
def all_releases() -> dict[str, dict[str, EngineRelease]]:
    """Every release simlab knows: ``{stack: {version: EngineRelease}}``, versions oldest first."""
    from simlab.common.yaml_file import read_yaml

    out: dict[str, dict[str, EngineRelease]] = {}
    for path in sorted(RELEASES_DIR.glob("*.yaml")):
        stack = path.stem
        releases = {}
        for version, entry in (read_yaml(path, what="engine releases") or {}).items():
            where = f"{path.name}: {version}"
            releases[str(version)] = EngineRelease(
                stack, str(version), str(entry["date"]), str(entry["ref"]),
                _section(entry.get("defaults"), DEFAULT_FIELDS, f"{where}.defaults"),
                {gpu: _section(v, ENGINE_FIELDS, f"{where}.gpu_overrides.{gpu}")
                 for gpu, v in (entry.get("gpu_overrides") or {}).items()},
                _section(entry.get("speculative"), SPECULATIVE_FIELDS, f"{where}.speculative"),
                _sourced(entry["methods"], f"{where}.methods") if "methods" in entry else None)
        out[stack] = dict(sorted(releases.items(), key=lambda kv: version_key(kv[0])))
    return out


def known_versions(stack: str) -> list[str]:
    """The releases of ``stack`` simlab knows, oldest first (empty for a stack without releases)."""
    return list(all_releases().get(stack, {}))


def get_release(stack: str, version: Optional[str], *, file: Optional[str] = None,
                field: str = "hardware.stack_version") -> Optional[EngineRelease]:
    """The release ``version`` of ``stack`` (None: the newest known); None for a stack without releases (simlab's
    eager engine), where a given version is an :class:`InputError`. An unknown version names the known ones."""
    releases = all_releases().get(stack)
    if not releases:
        if version is not None:
            raise InputError(f"the {stack} stack has no releases", file=file, field=field, value=version,
                             valid="leave stack_version out, or a stack with releases: "
                                   + ", ".join(sorted(all_releases())))
        return None
    if version is None:
        return releases[next(reversed(releases))]
    release = releases.get(str(version))
    if release is None:
        raise InputError(f"unknown {stack} release", file=file, field=field, value=version,
                         valid=f"one of {', '.join(releases)} (the releases simlab knows for {stack})")
    return release


def check_methods(release: Optional[EngineRelease], methods: list[str], *, file: Optional[str] = None) -> None:
    """Every arm's drafter ``methods`` (in the scenario's order) is one the release serves (InputError naming the
    arm's field and the release's methods otherwise)."""
    if release is None:
        return
    for index, method in enumerate(methods):
        if not release.serves(method):
            served = ", ".join(["none", *release.methods.value])
            raise InputError(f"{release.label} does not serve this drafter", file=file, field=f"arms[{index}].method",
                             value=method, valid=f"one of {served} at {release.label} "
                                                 f"({release.methods.source}), or another hardware.stack_version")
