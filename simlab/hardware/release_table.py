"""The table of docs/serving-stacks.md, "Engine releases", written from the release files."""

from __future__ import annotations

from typing import Optional

from simlab.hardware.releases import SPECULATIVE_FIELDS, Sourced, all_releases


def markdown_table() -> str:
    """The table of docs/serving-stacks.md, "Engine releases": every release, its defaults and what speculation
    changes, each value with its source (generated: ``scripts/update_docs_tables.py``)."""
    rows = ["| stack | release | field | default | under speculation | source |", "|---|---|---|---|---|---|"]
    for stack, by_version in all_releases().items():
        for version, release in by_version.items():
            names = [n for n in SPECULATIVE_FIELDS if n in release.defaults or n in release.speculative]
            for name in names:
                default, spec = release.defaults.get(name), release.speculative.get(name)
                sources = "; ".join(dict.fromkeys(s.source for s in (default, spec) if s is not None))
                rows.append(f"| {stack} | {version} ({release.date}, `{release.ref}`) | `{name}` | "
                            f"{_show(default)} | {_show(spec)} | {sources} |")
            for gpu, values in release.gpu_overrides.items():
                for name, value in values.items():
                    rows.append(f"| {stack} | {version} | `{name}` on {gpu} | {value.value} | | {value.source} |")
    return "\n".join(rows)


def _show(value: Optional[Sourced]) -> str:
    if value is None:
        return ""
    return "null" if value.value is None else str(value.value).lower() if isinstance(value.value, bool) else \
        str(value.value)
