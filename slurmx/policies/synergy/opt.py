"""Synergy-OPT: the super-machine ILP (upper bound) and the second LP that spreads jobs over servers.

LP1 (`synergy.md` §3.4): pick one (CPU, memory) grid point per job maximising the sum of normalised
throughputs, under the cluster's total CPU and memory, never below a job's proportional throughput. Jobs
with the same GPU count and the same matrix are interchangeable, so by default the ILP counts how many jobs
of each such class take each point (a few hundred integer variables instead of jobs x 45 binaries: the same
optimum, found in milliseconds). `aggregate=False` solves the paper's per-job formulation (for the tests'
brute-force check and the benchmark's "OPT as published" timing). LP2 places the LP1 demands fractionally on
servers; a simplex vertex splits at most 3s jobs (Theorem A.2).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, linprog, milp
from scipy.sparse import coo_matrix

__all__ = ["OptJob", "OptResult", "SpreadResult", "fair_points", "spread", "super_machine"]

_EPS = 1e-6


@dataclass(frozen=True, slots=True)
class OptJob:
    """A job as OPT sees it: GPUs and its admissible grid points (CPU per GPU, GB per GPU, relative throughput)."""

    gpus: int
    points: tuple[tuple[float, float, float], ...]


@dataclass(frozen=True, slots=True)
class OptResult:
    """LP1's choice per job (CPU per GPU, GB per GPU, throughput) and the objective."""

    choice: tuple[tuple[float, float, float], ...]
    objective: float


def fair_points(
    matrix: Sequence[Sequence[float]],
    cpu_grid: Sequence[float],
    mem_grid: Sequence[float],
    prop: float,
    max_cpus_per_gpu: float,
    max_mem_per_gpu: float,
) -> tuple[tuple[float, float, float], ...]:
    """Grid points at or above the proportional throughput `prop` that fit the per-GPU caps, without the
    dominated ones (more CPU and memory for no more throughput), as (cpu, mem, throughput / prop)."""
    points = [(c, m, matrix[r][k] / prop)
              for r, c in enumerate(cpu_grid) for k, m in enumerate(mem_grid)
              if matrix[r][k] >= prop - _EPS and c <= max_cpus_per_gpu + _EPS and m <= max_mem_per_gpu + _EPS]
    kept = [p for p in points
            if not any(q != p and q[0] <= p[0] and q[1] <= p[1] and q[2] >= p[2] for q in points)]
    return tuple(sorted(kept))


def super_machine(jobs: Sequence[OptJob], total_cpus: float, total_mem: float, *, integral: bool = True,
                  aggregate: bool = True, time_limit_s: float | None = None) -> OptResult:
    """Solve LP1 (ILP when `integral`, else its relaxation, whose fractional choice is reported as the mix's
    throughput-weighted mean point). Always feasible: every job's proportional point is admissible."""
    if not jobs:
        return OptResult((), 0.0)
    best = [max(job.points, key=lambda p: (p[2], -p[0], -p[1])) for job in jobs]
    if (sum(b[0] * j.gpus for b, j in zip(best, jobs, strict=True)) <= total_cpus + _EPS
            and sum(b[1] * j.gpus for b, j in zip(best, jobs, strict=True)) <= total_mem + _EPS):
        return OptResult(tuple(best), sum(b[2] for b in best))  # nothing contended: every job at its best point
    classes: dict[OptJob, list[int]] = {}
    if aggregate:
        for i, job in enumerate(jobs):
            classes.setdefault(job, []).append(i)
        keys = list(classes)
        counts = [len(classes[k]) for k in keys]
    else:
        keys = list(jobs)
        counts = [1] * len(jobs)
    x, objective = _solve(tuple(zip(keys, counts, strict=True)), total_cpus, total_mem, integral, time_limit_s)
    starts = list(itertools.accumulate((len(k.points) for k in keys), initial=0))
    choice: list[tuple[float, float, float]] = [(0.0, 0.0, 0.0)] * len(jobs)
    for r, key in enumerate(keys):
        lo = starts[r]
        amounts = [(key.points[p][2], p, x[lo + p]) for p in range(len(key.points))]
        members = classes[key] if aggregate else [r]
        if not integral:  # relaxation: report the fractional mix as one averaged point per job
            total = max(sum(a for *_, a in amounts), _EPS)
            avg = tuple(sum(key.points[p][d] * a for _, p, a in amounts) / total for d in range(3))
            for i in members:
                choice[i] = (avg[0], avg[1], avg[2])
            continue
        slots = [p for _, p, a in sorted(amounts, reverse=True) for _ in range(round(a))]
        for i, p in zip(members, slots, strict=True):  # queue order gets the faster points first
            choice[i] = key.points[p]
    return OptResult(tuple(choice), objective)


@lru_cache(maxsize=4096)
def _solve(classes: tuple[tuple[OptJob, int], ...], total_cpus: float, total_mem: float, integral: bool,
           time_limit_s: float | None) -> tuple[tuple[float, ...], float]:
    """LP1 over (job class, count) pairs; cached, since a round often sees the same mix as an earlier one."""
    cols_w: list[float] = []
    cols_c: list[float] = []
    cols_m: list[float] = []
    rows: list[int] = []
    for r, (key, _) in enumerate(classes):
        for c, m, w in key.points:
            cols_w.append(w)
            cols_c.append(c * key.gpus)
            cols_m.append(m * key.gpus)
            rows.append(r)
    n = len(cols_w)
    counts = [count for _, count in classes]
    eq = coo_matrix((np.ones(n), (rows, np.arange(n))), shape=(len(classes), n))
    res_rows = np.vstack([cols_c, cols_m])
    constraints = [LinearConstraint(eq, counts, counts), LinearConstraint(res_rows, -np.inf, [total_cpus, total_mem])]
    options = {"time_limit": time_limit_s} if time_limit_s else {}
    sol = milp(-np.asarray(cols_w), constraints=constraints, integrality=np.full(n, 1 if integral else 0),
               bounds=Bounds(0, np.inf), options=options)
    if sol.x is None:
        raise RuntimeError(f"OPT LP1: HiGHS found no solution ({sol.message}); proportional is always feasible")
    return tuple(float(v) for v in sol.x), float(-sol.fun)


@dataclass(frozen=True, slots=True)
class SpreadResult:
    """LP2's fractional placement x[server, job] and how many jobs it splits across servers."""

    x: np.ndarray
    fragmented: int


def spread(demands: Sequence[tuple[float, float, float]], servers: int, gpus: float, cpus: float,
           mem: float) -> SpreadResult | None:
    """LP2: place each (GPUs, CPUs, GB) demand fractionally on identical servers (feasibility; a simplex
    vertex). None when infeasible (LP1's demands need not be packable)."""
    n = len(demands)
    if n == 0:
        return SpreadResult(np.zeros((servers, 0)), 0)
    nv = servers * n  # x[i, j] at i * n + j
    caps = []
    for dim, cap in enumerate((gpus, cpus, mem)):
        data = np.tile([d[dim] for d in demands], servers)
        caps.append((coo_matrix((data, (np.repeat(np.arange(servers), n), np.arange(nv))), shape=(servers, nv)),
                     np.full(servers, cap)))
    a_ub = np.vstack([c.toarray() for c, _ in caps])
    b_ub = np.concatenate([b for _, b in caps])
    a_eq = coo_matrix((np.ones(nv), (np.tile(np.arange(n), servers), np.arange(nv))), shape=(n, nv))
    sol = linprog(np.zeros(nv), A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=np.ones(n), bounds=(0, None),
                  method="highs-ds")
    if sol.status != 0:
        return None
    x = sol.x.reshape(servers, n)
    fragmented = int(((x > _EPS).sum(axis=0) > 1).sum())
    return SpreadResult(x, fragmented)
