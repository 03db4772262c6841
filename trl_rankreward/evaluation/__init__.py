"""Benchmarks, reports and simulated judges over `judging/` and `rewards/` (no trainer imports).

`probe_judge` and `audit_judge` are the entry points exported here; the benchmark modules are imported by path.
"""

from .._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        ".judge_probe": ("probe_judge", "probe_judge_async", "allowed_methods", "ProbeReport", "ProbeRow", "SwapTest"),
        ".audit": ("audit_judge", "audit_judge_async", "AuditReport", "AuditRow"),
    },
)
