"""The package's import graph, read from every import statement in simlab/ (module level or inside a function):
no import circles, and no floor importing one above it (docs/architecture.md, "The map")."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "simlab"

# the floors of docs/architecture.md: a module imports its own package and lower floors only
FLOORS = {
    "common": 0,
    "schedulers": 1,
    "config": 2,
    "workload": 3, "hardware": 3, "acceptance": 3, "results": 3, "audit": 3,
    "engine": 4,
    "runner": 5,  # the composition root: runner.py, arms.py, arm_engines.py, pools.py, progress.py
    "real": 6, "calibration": 6,
    "studies": 7, "simlab": 7,  # simlab: the package's own __init__ (the library API)
    "cli": 8,  # cli.py and __main__.py
}
ROOT_MODULES = {"runner": "runner", "arms": "runner", "arm_engines": "runner", "pools": "runner", "progress": "runner",
                "cli": "cli",
                "__main__": "cli"}


def _modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _resolve(name: str, modules: dict) -> str | None:
    """The module an imported name lives in: the longest dotted prefix that is a module of the package."""
    parts = name.split(".")
    while parts:
        if ".".join(parts) in modules:
            return ".".join(parts)
        parts.pop()
    return None


def import_graph() -> dict[str, set[str]]:
    """Module -> the simlab modules it imports. ``from a import b`` counts ``a.b`` when that is a module, else
    ``a``; the parent packages Python runs implicitly are not counted."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(_resolve(alias.name, modules) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(here[:len(here) - node.level + 1] + ([base] if base else []))
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.add(full if full in modules else _resolve(base, modules))
        graph[name] = {t for t in targets if t is not None and t != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def package_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "simlab"
    return ROOT_MODULES.get(parts[1], parts[1])


def test_the_graph_reader_sees_every_kind_of_import():
    graph = import_graph()
    assert "simlab.common.errors" in graph["simlab.cli"]  # module level, absolute
    assert "simlab.studies.cli" in graph["simlab.cli"]  # inside a function
    assert "simlab.runner" in graph["simlab"]  # inside the package's __getattr__
    assert "simlab.hardware.roofline" in graph["simlab.hardware.roofline_build"]
    assert len(graph) > 200


def test_circles_are_found_when_there_are_some():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles():
    assert circles(import_graph()) == []


@pytest.mark.parametrize("package", sorted(FLOORS))
def test_no_floor_imports_one_above_it(package):
    graph = import_graph()
    assert {package_of(m) for m in graph} <= set(FLOORS), "a new package needs its floor in FLOORS and the docs"
    upward = sorted(
        f"{module} imports {target}"
        for module, targets in graph.items() if package_of(module) == package
        for target in targets
        if package_of(target) != package and FLOORS[package_of(target)] >= FLOORS[package]
    )
    assert upward == []


def test_only_command_modules_import_command_modules():
    """A package's cli.py is mounted by simlab/cli.py (or run by a ``__main__``); no library module reaches one."""
    graph = import_graph()
    command_modules = {m for m in graph if m.endswith(".cli")}
    importers = sorted(f"{module} imports {target}" for module, targets in graph.items()
                       for target in targets & command_modules
                       if module.rsplit(".", 1)[-1] not in ("cli", "__main__"))
    assert importers == []
