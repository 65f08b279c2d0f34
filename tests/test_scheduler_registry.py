"""The scheduler registry is the one place that knows scheduler names: everything else derives from it."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest
from pydantic import ValidationError

from simlab.audit.schema import AuditScheduler
from simlab.config.arms import Arm, SchedulerConfig
from simlab.schedulers import REGISTRY, kinds, make_scheduler
from simlab.schedulers.registry import markdown_table

REPO = Path(__file__).resolve().parent.parent


def _union_kinds(annotated) -> list[str]:
    union = typing.get_args(annotated)[0]
    return [typing.get_args(member.model_fields["kind"].annotation)[0] for member in typing.get_args(union)]


def test_config_union_lists_exactly_the_arm_kinds():
    assert _union_kinds(SchedulerConfig) == kinds(arm=True)


def test_audit_union_lists_exactly_the_audit_kinds():
    assert _union_kinds(AuditScheduler) == kinds(audit=True)
    assert "retrospective" in kinds(audit=True) and "retrospective" not in kinds(arm=True)


def test_docs_table_is_generated_from_the_registry():
    text = (REPO / "docs" / "schedulers.md").read_text(encoding="utf-8")
    start = text.index("-->\n", text.index("<!-- registry table")) + len("-->\n")
    end = text.index("<!-- end registry table -->")
    assert text[start:end].strip() == markdown_table(), "run python scripts/update_docs_tables.py"


def test_real_cli_offers_the_real_kinds():
    from simlab.real.cli import _scheduler

    for kind in kinds(real=True):
        params = {"threshold": 0.5} if "threshold" in REGISTRY[kind].params.model_fields else {}
        assert _scheduler(kind, params.get("threshold"), None).kind == kind
    assert "oracle" not in kinds(real=True)


def test_defaults_come_from_the_parameter_model_only():
    for kind, entry in REGISTRY.items():
        required = {name for name, field in entry.params.model_fields.items() if field.is_required()}
        if required:
            with pytest.raises(ValidationError):
                make_scheduler(kind)
            continue
        bound = make_scheduler(kind)
        view = {"sps": bound.sps} if "sps" in entry.params.model_fields else {}  # kept beside the policy's params
        assert {**bound.params, **view} == entry.params().model_dump()
        assert "sps" not in bound.params
    assert make_scheduler("async_topk").lag_steps == 2 and make_scheduler("goodput").lag_steps == 1


def test_unknown_and_invalid_parameters_are_rejected():
    with pytest.raises(ValidationError):
        make_scheduler("hardware_aware", lag_steps=1)
    with pytest.raises(ValidationError):
        make_scheduler("async_topk", lag_steps=0)
    with pytest.raises(KeyError):
        make_scheduler("no_such_kind")


def test_lossless_follows_the_entry():
    assert make_scheduler("goodput", lag_steps=0).lossless is False
    assert make_scheduler("goodput", lag_steps=1).lossless is True
    assert make_scheduler("oracle").lossless is False and not REGISTRY["oracle"].realisable


def test_an_arm_config_round_trips_through_the_registry():
    arm = Arm.model_validate({"method": "dspark", "gamma": 5, "scheduler": {"kind": "async_topk"}})
    assert arm.scheduler.lag_steps == 2
    from simlab.schedulers import from_config

    assert from_config(arm.scheduler).params == {"lag_steps": 2}


def _string_constants_compared(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                elements = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
                for element in elements:
                    if isinstance(element, ast.Constant) and isinstance(element.value, str):
                        found.add(element.value)
    return found


def test_no_code_branches_on_scheduler_names_outside_the_registry():
    names = set(REGISTRY)
    offenders = []
    for path in sorted((REPO / "simlab").rglob("*.py")):
        if path.name == "registry.py" and path.parent.name == "schedulers":
            continue
        hits = _string_constants_compared(ast.parse(path.read_text(encoding="utf-8"))) & names
        if hits:
            offenders.append(f"{path.relative_to(REPO)}: {sorted(hits)}")
    assert not offenders, offenders
