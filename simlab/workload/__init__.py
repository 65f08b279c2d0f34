"""Workloads: the requests a simulation serves, from a trace or drawn from distributions.

``build_workload(cfg, base_dir=..., seed=..., file=...)`` turns a validated workload config into a
:class:`Workload`: arrays of requests in arrival order (request id = index), the closed-loop settings when the
workload is a closed loop, and a JSON-able description of its source.
"""

from simlab.common.lazy import lazy_exports

_EXPORTS = {
    "build_workload": "simlab.workload.build",
    "DEFAULT_DOMAINS": "simlab.workload.requests", "ClosedLoop": "simlab.workload.requests",
    "Requests": "simlab.workload.requests", "Workload": "simlab.workload.requests",
    "TraceStats": "simlab.workload.stats", "trace_stats": "simlab.workload.stats",
    "ShippedTrace": "simlab.workload.trace_index", "TraceLocation": "simlab.workload.trace_index",
    "locate_trace": "simlab.workload.trace_index", "shipped_traces": "simlab.workload.trace_index",
    "TraceOrigin": "simlab.workload.traces", "TraceTable": "simlab.workload.traces",
    "read_trace": "simlab.workload.traces",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "DEFAULT_DOMAINS",
    "ClosedLoop",
    "Requests",
    "ShippedTrace",
    "TraceLocation",
    "TraceOrigin",
    "TraceStats",
    "TraceTable",
    "Workload",
    "build_workload",
    "locate_trace",
    "read_trace",
    "shipped_traces",
    "trace_stats",
]
