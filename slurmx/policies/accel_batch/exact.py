"""Exact optima of tiny accelerator batches, the ground truth the 4-approximation is tested against.

Two independent routes that must agree (digest `accel_batch.md` §1.3, check C1):
- `milp_optimum`: the paper's program (1)-(4) with the `l <= k` fix, one job per slot and a fixed K = J
  positions, the `max` in (2) linearised, solved by scipy's `milp` (HiGHS branch and bound);
- `brute_force_optimum`: every one of the R^J assignments, Johnson's rule on each responder (optimal for
  F2||Cmax), the best largest responder make-span.
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import lil_matrix

from slurmx.policies.accel_batch.model import BatchInstance, flow_shop_makespan, johnson_order

__all__ = ["brute_force_optimum", "milp_optimum"]

_MAX_ASSIGNMENTS = 200_000


def brute_force_optimum(instance: BatchInstance) -> float:
    """min over assignments of max over responders of the Johnson make-span."""
    n_jobs, n_resp = instance.n_jobs, instance.n_responders
    if n_resp**n_jobs > _MAX_ASSIGNMENTS:
        raise ValueError(f"accel brute force: {n_resp}^{n_jobs} assignments is too many; use J <= 8, R <= 3")
    a, b = instance.transmit_s, instance.compute_s
    best = np.inf
    for assignment in itertools.product(range(n_resp), repeat=n_jobs):
        span = 0.0
        for j in range(n_resp):
            jobs = np.array([i for i in range(n_jobs) if assignment[i] == j], dtype=np.int64)
            if len(jobs):
                seq = jobs[johnson_order(a[jobs, j], b[jobs, j])]
                span = max(span, flow_shop_makespan(a[seq, j], b[seq, j]))
            if span >= best:
                break
        best = min(best, span)
    return float(best)


def milp_optimum(instance: BatchInstance) -> float:
    """The corrected program: min T s.t. every job in one (responder, slot), one job per slot, and
    c_j0 >= sum_i (a_ij + b_ij) x_ij0;  c_jk >= c_j(k-1) + sum_i b_ij x_ijk;
    c_jk >= sum_i sum_{l <= k} a_ij x_ijl + sum_i b_ij x_ijk;  c_jk <= T."""
    n_jobs, n_resp = instance.n_jobs, instance.n_responders
    slots = n_jobs
    a, b = instance.transmit_s, instance.compute_s

    def x(i: int, j: int, k: int) -> int:
        return (i * n_resp + j) * slots + k

    n_x = n_jobs * n_resp * slots

    def c(j: int, k: int) -> int:
        return n_x + j * slots + k

    t_var = n_x + n_resp * slots
    n_vars = t_var + 1
    rows: list[dict[int, float]] = []
    lower: list[float] = []
    upper: list[float] = []

    def add(coeffs: dict[int, float], lo: float, hi: float) -> None:
        rows.append(coeffs)
        lower.append(lo)
        upper.append(hi)

    for i in range(n_jobs):
        add({x(i, j, k): 1.0 for j in range(n_resp) for k in range(slots)}, 1.0, 1.0)
    for j in range(n_resp):
        for k in range(slots):
            add({x(i, j, k): 1.0 for i in range(n_jobs)}, -np.inf, 1.0)
            if k + 1 < slots:  # slots fill from the front (symmetry breaking)
                row = {x(i, j, k + 1): 1.0 for i in range(n_jobs)}
                row.update({x(i, j, k): -1.0 for i in range(n_jobs)})
                add(row, -np.inf, 0.0)
            compute_here = {x(i, j, k): -float(b[i, j]) for i in range(n_jobs)}
            if k == 0:
                row = {x(i, j, 0): -float(a[i, j] + b[i, j]) for i in range(n_jobs)}
                row[c(j, 0)] = 1.0
                add(row, 0.0, np.inf)
            else:
                row = dict(compute_here)
                row[c(j, k)] = 1.0
                row[c(j, k - 1)] = -1.0
                add(row, 0.0, np.inf)
                row = dict(compute_here)
                for l_slot in range(k + 1):
                    for i in range(n_jobs):
                        row[x(i, j, l_slot)] = row.get(x(i, j, l_slot), 0.0) - float(a[i, j])
                row[c(j, k)] = 1.0
                add(row, 0.0, np.inf)
            add({c(j, k): 1.0, t_var: -1.0}, -np.inf, 0.0)
    matrix = lil_matrix((len(rows), n_vars))
    for r, coeffs in enumerate(rows):
        for col, value in coeffs.items():
            matrix[r, col] = value
    cost = np.zeros(n_vars)
    cost[t_var] = 1.0
    integrality = np.zeros(n_vars)
    integrality[:n_x] = 1
    bounds = Bounds(np.zeros(n_vars), np.concatenate([np.ones(n_x), np.full(n_vars - n_x, np.inf)]))
    result = milp(cost, constraints=LinearConstraint(matrix.tocsr(), lower, upper), integrality=integrality,
                  bounds=bounds, options={"mip_rel_gap": 1e-9})
    if result.status != 0:
        raise RuntimeError(f"accel MILP: HiGHS status {result.status} ({result.message})")
    return float(result.x[t_var])
