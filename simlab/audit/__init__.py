"""Losslessness audit: exact enumeration of speculative decoding under each verify-length scheduler.

>>> from simlab.audit import load_audit, run_audit
>>> result = run_audit(load_audit("scenarios/audit_appendix_a.yaml"))   # doctest: +SKIP
>>> {v.label: str(v.tv) for v in result.verdicts}                       # doctest: +SKIP

See docs/audit.md for the file format and the semantics enumerated.
"""

from simlab.audit.cli import audit_command, main
from simlab.audit.enumeration import (
    AuditResult,
    SchedulerVerdict,
    run_audit,
    scheduler_distribution,
    target_distribution,
    total_variation,
)
from simlab.audit.problem import AuditProblem, build_problem, load_audit
from simlab.audit.report import audit_json, audit_json_text, audit_table

__all__ = [
    "AuditProblem",
    "AuditResult",
    "SchedulerVerdict",
    "audit_command",
    "audit_json",
    "audit_json_text",
    "audit_table",
    "build_problem",
    "load_audit",
    "main",
    "run_audit",
    "scheduler_distribution",
    "target_distribution",
    "total_variation",
]
