"""Losslessness audit: exact enumeration of speculative decoding under each verify-length scheduler.

>>> from simlab.audit import load_audit, run_audit
>>> result = run_audit(load_audit("scenarios/audit_appendix_a.yaml"))   # doctest: +SKIP
>>> {v.label: str(v.tv) for v in result.verdicts}                       # doctest: +SKIP

See docs/audit.md for the file format and the semantics enumerated.
"""

from simlab.common.lazy import lazy_exports

_EXPORTS = {
    "audit_command": "simlab.audit.cli", "main": "simlab.audit.cli",
    "AuditResult": "simlab.audit.enumeration", "SchedulerVerdict": "simlab.audit.enumeration",
    "run_audit": "simlab.audit.enumeration", "scheduler_distribution": "simlab.audit.enumeration",
    "target_distribution": "simlab.audit.enumeration", "total_variation": "simlab.audit.enumeration",
    "AuditProblem": "simlab.audit.problem", "build_problem": "simlab.audit.problem",
    "load_audit": "simlab.audit.problem",
    "audit_json": "simlab.audit.document", "audit_json_text": "simlab.audit.document",
    "audit_table": "simlab.audit.document",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

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
