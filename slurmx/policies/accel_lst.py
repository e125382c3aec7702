"""Re-exports `slurmx.policies.accel_batch.lst` (the LST assignment) for importers not yet moved."""

from slurmx.policies.accel_batch.lst import (
    FloatArray,
    IntArray,
    LpSolution,
    LstError,
    LstResult,
    Search,
    greedy_assignment,
    lower_bound,
    lst_assign,
    nonoverlap_makespan,
    round_vertex,
    search_bisect,
    search_descent,
)

__all__ = [
    "FloatArray",
    "IntArray",
    "LpSolution",
    "LstError",
    "LstResult",
    "Search",
    "greedy_assignment",
    "lower_bound",
    "lst_assign",
    "nonoverlap_makespan",
    "round_vertex",
    "search_bisect",
    "search_descent",
]
