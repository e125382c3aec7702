"""Lenstra-Shmoys-Tardos assignment for unrelated machines (R||Cmax), the first phase of Zhao et al.'s algorithm.

Given non-overlapped times `p[i, j] = s_i / r_j + t_ij` (job i on responder j), find the smallest T for which
the *restricted* LP (only edges with p_ij <= T; each responder loaded at most T; each job assigned once) is
feasible, take a vertex of it from HiGHS' simplex, and round it on its support graph, a pseudo-forest, so each
responder gets at most one fractionally assigned job. The rounded assignment's non-overlapped make-span is at
most T_LP + max p_ij <= 2 T_LP (Theorem 2 of the paper; digest `accel_batch.md` §2.1-2.2).

Two searches for T_LP, both exact up to HiGHS' tolerances:

- `search="descent"` (ours, the default): f(T) = the min-T LP over the edges p_ij <= T is non-increasing in
  T, and T is feasible iff f(T) <= T. From a feasible T (a greedy list schedule) one step T <- f(T), then a
  bisection over only the distinct p_ij values left in the bracket. Each LP by column generation (each job's
  cheapest responders first, the rest priced in by the duals). 1-2 LPs on the paper's workload.
- `search="bisect"`: the straightforward prototype: bisection on T to a relative tolerance, re-solving the
  full feasibility LP at every step (about 15 solves). Kept as the benchmark's baseline.

The LP is solved on p scaled by a power of two (exact) that brings its largest finite entry to at most 2^20:
HiGHS refuses coefficients from 1e15 on ("Model error"), and an estimate of 1e15 s is a valid, if absurd, number
(`lp_scale`). T_LP is reported in the original units.

Pure: numpy arrays in, a frozen result out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from scipy.optimize import linprog
from scipy.sparse import coo_matrix, csr_matrix
from scipy.sparse.csgraph import maximum_bipartite_matching

__all__ = [
    "FloatArray",
    "IntArray",
    "LpSolution",
    "LstError",
    "LstResult",
    "greedy_assignment",
    "lower_bound",
    "lp_scale",
    "lst_assign",
    "nonoverlap_makespan",
    "round_vertex",
    "search_bisect",
    "search_descent",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Search = Literal["descent", "bisect"]
_SUPPORT_EPS = 1e-9  # y_ij above this is an edge of the support graph
_REL_TOL = 1e-9  # slack when comparing T values produced by HiGHS
_LP_MAX = 2.0**20  # the largest p_ij handed to HiGHS (its own limit on coefficients is 1e15)


class LstError(RuntimeError):
    """The LP solver failed where the theory says it cannot (a bug or a numerically broken instance)."""


@dataclass(frozen=True, slots=True)
class LpSolution:
    """A vertex of the restricted LP at `t`: `y[i, j]` (dense, zero off the support) and how many LPs it took."""

    t: float
    y: FloatArray
    solves: int


@dataclass(frozen=True, slots=True)
class LstResult:
    """Responder of every job, the LP bound T_LP it was rounded at, and what the search cost."""

    assignment: IntArray
    t_lp: float
    lp_solves: int
    support: int  # nonzeros of the LP vertex (<= J + R for a vertex)
    fractional_jobs: int
    used_matching: bool  # the pseudo-forest walk failed and bipartite matching assigned the split jobs

    def makespan_nonoverlap(self, p: FloatArray) -> float:
        return nonoverlap_makespan(p, self.assignment)


def nonoverlap_makespan(p: FloatArray, assignment: IntArray) -> float:
    """max_j sum_{i -> j} p_ij: the make-span with transmission and computation not overlapped."""
    loads = np.bincount(assignment, weights=p[np.arange(len(assignment)), assignment], minlength=p.shape[1])
    return float(loads.max()) if len(loads) else 0.0


def lower_bound(p: FloatArray) -> float:
    """max(largest job on its best responder, average best load): a lower bound on T_LP and on M2PO's optimum."""
    best = p.min(axis=1)
    return float(max(best.max(), best.sum() / p.shape[1]))


def greedy_assignment(p: FloatArray) -> IntArray:
    """List scheduling, largest job first, each to the responder where it ends earliest: a feasible upper bound."""
    n_jobs, n_resp = p.shape
    loads = np.zeros(n_resp)
    assign = np.zeros(n_jobs, dtype=np.int64)
    for i in np.argsort(-p.min(axis=1), kind="stable"):
        j = int(np.argmin(loads + p[i]))
        assign[i] = j
        loads[j] += p[i, j]
    return assign


def _edges(p: FloatArray, limit: float) -> tuple[IntArray, IntArray]:
    rows, cols = np.nonzero(p <= limit)
    return rows.astype(np.int64), cols.astype(np.int64)


def _build_lp(p: FloatArray, rows: IntArray, cols: IntArray, fixed_t: float | None) -> dict[str, object]:
    """linprog arguments over the given edges: min T (fixed_t None) or feasibility at T = fixed_t."""
    n_jobs, n_resp = p.shape
    n_edges = len(rows)
    with_t = fixed_t is None
    n_vars = n_edges + (1 if with_t else 0)
    edge_ids = np.arange(n_edges)
    a_eq = csr_matrix((np.ones(n_edges), (rows, edge_ids)), shape=(n_jobs, n_vars))
    ub_rows, ub_cols, ub_vals = cols, edge_ids, p[rows, cols]
    cost = np.zeros(n_vars)
    if with_t:
        ub_rows = np.concatenate([ub_rows, np.arange(n_resp)])
        ub_cols = np.concatenate([ub_cols, np.full(n_resp, n_edges)])
        ub_vals = np.concatenate([ub_vals, -np.ones(n_resp)])
        b_ub = np.zeros(n_resp)
        cost[-1] = 1.0
    else:
        b_ub = np.full(n_resp, fixed_t)
    a_ub = coo_matrix((ub_vals, (ub_rows, ub_cols)), shape=(n_resp, n_vars)).tocsr()
    return {"c": cost, "A_ub": a_ub, "b_ub": b_ub, "A_eq": a_eq, "b_eq": np.ones(n_jobs), "bounds": (0, None),
            "method": "highs-ds"}


def _run(p: FloatArray, rows: IntArray, cols: IntArray, fixed_t: float | None) -> Any:
    result = linprog(**_build_lp(p, rows, cols, fixed_t))
    if result.status not in (0, 2):
        raise LstError(f"accel LST: HiGHS returned status {result.status} ({result.message})")
    return result


def _dense(p: FloatArray, rows: IntArray, cols: IntArray, x: FloatArray) -> FloatArray:
    y = np.zeros(p.shape)
    y[rows, cols] = x[: len(rows)]
    return y


def _solve_lp(p: FloatArray, limit: float, fixed_t: float | None) -> tuple[float, FloatArray] | None:
    """The full LP over every edge p_ij <= limit (the plain prototype's solve). None if infeasible."""
    rows, cols = _edges(p, limit)
    if len(np.unique(rows)) < p.shape[0]:
        return None  # some job fits nowhere within the limit
    result = _run(p, rows, cols, fixed_t)
    if result.status == 2:
        return None
    t = float(result.x[-1]) if fixed_t is None else fixed_t
    return t, _dense(p, rows, cols, result.x)


def _min_t_columns(p: FloatArray, limit: float, start_width: int = 4) -> tuple[float, FloatArray] | None:
    """min T over the edges p_ij <= limit by column generation; None if some job has no edge.

    Start from each job's `start_width` cheapest allowed responders, solve, price every allowed edge with the
    duals (reduced cost -u_i - w_j p_ij), add the negative ones, repeat. The last restricted basis is a basis
    of the full LP, so the answer is the same vertex-quality optimum at a fraction of the size.
    """
    allowed = p <= limit
    if not np.all(allowed.any(axis=1)):
        return None
    masked = np.where(allowed, p, np.inf)
    width = min(start_width, p.shape[1])
    best = np.argpartition(masked, width - 1, axis=1)[:, :width] if width < p.shape[1] else \
        np.tile(np.arange(p.shape[1]), (p.shape[0], 1))
    chosen = np.zeros(p.shape, dtype=bool)
    chosen[np.arange(p.shape[0])[:, None], best] = True
    chosen &= allowed
    while True:
        rows, cols = np.nonzero(chosen)
        rows, cols = rows.astype(np.int64), cols.astype(np.int64)
        result = _run(p, rows, cols, None)
        if result.status != 0:
            raise LstError(f"accel LST: the min-T LP failed ({result.message})")
        job_dual = np.asarray(result.eqlin.marginals)
        load_dual = np.asarray(result.ineqlin.marginals)
        reduced = -job_dual[:, None] - load_dual[None, :] * np.where(allowed, p, 0.0)
        entering = allowed & ~chosen & (reduced < -1e-9 * max(1.0, float(result.x[-1])))
        if not entering.any():
            return float(result.x[-1]), _dense(p, rows, cols, result.x)
        chosen |= entering


def search_descent(p: FloatArray) -> LpSolution:
    """T_LP by one descent step from a greedy schedule, then bisection over the p_ij values left in the bracket.

    Let f(T) be the min-T LP over the edges p_ij <= T (infinite when a job has none); f is non-increasing and
    T is feasible iff f(T) <= T. With `upper` feasible, T_LP >= f(upper), so t = max(f(upper), lower bound)
    is tried next: if f(t) <= t it is T_LP. Otherwise T_LP lies in (t, upper], where only the distinct p_ij
    values v_k (the breakpoints of f) matter: with v* the smallest feasible one and v' the breakpoint just
    below it (or t), T_LP = min(v*, f(v')).
    """
    memo: dict[float, tuple[float, FloatArray] | None] = {}

    def f(limit: float) -> tuple[float, FloatArray] | None:
        if limit not in memo:
            memo[limit] = _min_t_columns(p, limit)
        return memo[limit]

    def feasible(limit: float) -> bool:
        found = f(limit)
        return found is not None and found[0] <= limit * (1 + _REL_TOL)

    upper = nonoverlap_makespan(p, greedy_assignment(p))
    top = f(upper)
    if top is None:
        raise LstError("accel LST: the greedy schedule's make-span is LP-infeasible")
    t = max(top[0], lower_bound(p))
    if t < upper and not np.any((p > t) & (p <= upper)):
        memo[t] = top  # same edges as at `upper`, so f(t) = f(upper) <= t
    if t >= upper or feasible(t):
        found = f(min(t, upper))
        assert found is not None
        return LpSolution(min(t, upper), found[1], len(memo))
    values = np.unique(p[(p > t) & (p <= upper)])
    if len(values) == 0 or not feasible(float(values[-1])):
        values = np.append(values, upper)  # feasible: f(upper) <= upper
    left, right = 0, len(values) - 1
    while left < right:  # smallest feasible breakpoint
        mid = (left + right) // 2
        if feasible(float(values[mid])):
            right = mid
        else:
            left = mid + 1
    v_star = float(values[right])
    below = f(float(values[right - 1]) if right > 0 else t)
    if below is not None and below[0] < v_star:
        return LpSolution(below[0], below[1], len(memo))
    found = f(v_star)
    assert found is not None
    return LpSolution(v_star, found[1], len(memo))


def search_bisect(p: FloatArray, rel_tol: float = 1e-4) -> LpSolution:
    """The plain prototype: bisection on T between the lower bound and a greedy schedule, full LP at every step."""
    lo = lower_bound(p)
    hi = nonoverlap_makespan(p, greedy_assignment(p))
    found = _solve_lp(p, hi, hi)
    solves = 1
    if found is None:
        raise LstError("accel LST: the greedy schedule's make-span is LP-infeasible")
    best_y = found[1]
    while hi > lo * (1 + rel_tol):
        mid = (lo + hi) / 2
        found = _solve_lp(p, mid, mid)
        solves += 1
        if found is None:
            lo = mid
        else:
            hi, best_y = mid, found[1]
    return LpSolution(hi, best_y, solves)


def round_vertex(y: FloatArray, p: FloatArray, t_lp: float) -> tuple[IntArray, int, bool]:
    """Round an LP vertex: integral jobs keep their responder; split jobs go one per responder.

    The split jobs and their responders form a pseudo-forest: peel leaves (a responder with one split job
    takes it; a job left with one responder goes there), then match what is left, even cycles, alternately.
    If a walk ever strands a job (a non-vertex or noisy solution), bipartite matching over the support assigns
    the split jobs instead. Returns (assignment, split job count, whether matching was needed).
    """
    n_jobs = y.shape[0]
    support = y > _SUPPORT_EPS
    degree = support.sum(axis=1)
    assign = np.full(n_jobs, -1, dtype=np.int64)
    whole = degree == 1
    assign[whole] = np.argmax(support[whole], axis=1)
    split = [int(i) for i in np.nonzero(degree >= 2)[0]]
    if not split:
        return assign, 0, False
    loads = np.bincount(assign[whole], weights=p[np.nonzero(whole)[0], assign[whole]], minlength=p.shape[1])
    walked = _walk_pseudo_forest({i: [int(j) for j in np.nonzero(support[i])[0]] for i in split},
                                 lambda i, j: float(loads[j] + p[i, j]))
    used_matching = walked is None
    if walked is None:
        walked = _match(split, support)
    for i, j in walked.items():
        assign[i] = j
    if np.any(assign < 0):
        raise LstError("accel LST: a job has no responder after rounding (the LP solution is not a vertex)")
    return assign, len(split), used_matching


def _walk_pseudo_forest(neighbours: dict[int, list[int]], cost: Callable[[int, int], float]
                        ) -> dict[int, int] | None:
    """Leaf peeling on the bipartite graph split jobs - responders; None when a job is stranded.

    A leaf and its only neighbour belong to some maximum matching, so peeling them is safe; when no leaf is
    left every component is an even cycle, and taking any one edge of it turns the rest into a path. Among
    the safe choices, the one with the smallest `cost` (the responder's resulting load) goes first: the
    bound does not care which, the make-span does.
    """
    job_adj = {i: set(js) for i, js in neighbours.items()}
    resp_adj: dict[int, set[int]] = {}
    for i, js in neighbours.items():
        for j in js:
            resp_adj.setdefault(j, set()).add(i)
    chosen: dict[int, int] = {}

    def take(i: int, j: int) -> None:
        chosen[i] = j
        for other in job_adj.pop(i):
            resp_adj[other].discard(i)
        for other_job in resp_adj.pop(j):
            job_adj[other_job].discard(j)

    while job_adj:
        leaves = [(cost(next(iter(jobs)), j), j) for j, jobs in resp_adj.items() if len(jobs) == 1]
        if leaves:
            _, leaf = min(leaves)
            take(next(iter(resp_adj[leaf])), leaf)
            continue
        lone = min(job_adj, key=lambda i: (len(job_adj[i]), i))
        if not job_adj[lone]:
            return None
        take(lone, min(job_adj[lone], key=lambda j: (cost(lone, j), j)))
    return chosen


def _match(split: Sequence[int], support: npt.NDArray[np.bool_]) -> dict[int, int]:
    graph = csr_matrix(support[list(split)].astype(np.int8))
    match = maximum_bipartite_matching(graph, perm_type="column")
    if np.any(match < 0):
        raise LstError("accel LST: no matching saturates the split jobs (the LP solution is not a vertex)")
    return {int(i): int(j) for i, j in zip(split, match, strict=True)}


def lp_scale(p: FloatArray) -> float:
    """The power of two p is divided by before the LP: 1 unless its largest finite entry exceeds 2^20 (dividing by
    a power of two is exact, so instances within range are solved exactly as before)."""
    finite = p[np.isfinite(p)]
    top = float(finite.max()) if finite.size else 0.0
    return 1.0 if top <= _LP_MAX else float(2.0 ** np.ceil(np.log2(top / _LP_MAX)))


def lst_assign(p: FloatArray, search: Search = "descent", rel_tol: float = 1e-4) -> LstResult:
    """The whole first phase: T_LP, its vertex, the rounded assignment. `p` is jobs x responders, all > 0."""
    if p.ndim != 2 or p.shape[0] == 0 or p.shape[1] == 0:
        raise ValueError(f"accel LST: p must be a non-empty jobs x responders matrix, got shape {p.shape}")
    if not np.all(np.isfinite(p.min(axis=1))):
        raise ValueError("accel LST: every job needs at least one responder with a finite time")
    scale = lp_scale(p)
    scaled = p / scale if scale != 1.0 else p
    solution = search_descent(scaled) if search == "descent" else search_bisect(scaled, rel_tol)
    assign, n_split, used_matching = round_vertex(solution.y, scaled, solution.t)
    support = int(np.count_nonzero(solution.y > _SUPPORT_EPS))
    return LstResult(assign, solution.t * scale, solution.solves, support, n_split, used_matching)
