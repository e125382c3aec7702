"""Synergy's decision functions: a job's profile on a cluster shape, the queue keys, one round's allocation.

Every driver of Synergy calls these and only these to decide: the registered `synergy` policy on the
daemon's and the engine's `ClusterView` (`policy.py`), and the replica of the authors' round simulator
(`slurmx.reproduce.synergy.round_replica`). A profile holds what the mechanisms need (best-case demand,
proportional share, speedup, OPT's admissible points); the policy orders the queue with `queue_key`, and
`allocate_round` runs the mechanism (PROP, GREEDY, TUNE in `mechanisms`, OPT in `opt`) over the admitted jobs.
"""

from __future__ import annotations

import itertools
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from slurmx.policies.synergy.mechanisms import (
    EPS,
    Allocation,
    Demand,
    Placement,
    Servers,
    admit_by_gpus,
    greedy,
    proportional,
    tune,
)
from slurmx.policies.synergy.opt import OptJob, fair_points, super_machine
from slurmx.policies.synergy.profiles import CPU_GRID, MEM_GRID, MODELS

__all__ = [
    "ORDERS",
    "ClusterShape",
    "JobProfile",
    "Mechanism",
    "Order",
    "QueueState",
    "admit_by_gpus",
    "allocate_round",
    "insensitive_profile",
    "job_profile",
    "measured_profile",
    "queue_key",
]

Mechanism = Literal["prop", "greedy", "tune", "opt"]
Order = Literal["fifo", "srtf", "las", "ftf", "drf", "tetris"]
ORDERS: tuple[Order, ...] = ("fifo", "srtf", "las", "ftf", "drf", "tetris")


@dataclass(frozen=True, slots=True)
class ClusterShape:
    """A homogeneous cluster: `servers` x (GPUs, CPUs, GB). The default is the paper's 128-GPU simulation."""

    servers: int = 16
    gpus: int = 8
    cpus: float = 24.0
    mem_gb: float = 500.0

    @property
    def cpus_per_gpu(self) -> float:
        return self.cpus / self.gpus

    @property
    def mem_per_gpu(self) -> float:
        return self.mem_gb / self.gpus

    def servers_state(self) -> Servers:
        return Servers.empty(self.servers, self.gpus, self.cpus, self.mem_gb)


def _w(model: str, cpus_per_gpu: float, mem_per_gpu: float) -> float:
    """The model's throughput at a per-GPU allocation, rounding down to the grid (clamped at its first point)."""
    row = max(0, bisect_right(CPU_GRID, cpus_per_gpu + EPS) - 1)
    col = max(0, bisect_right(MEM_GRID, mem_per_gpu + EPS) - 1)
    return MODELS[model].matrix[row][col]


@dataclass(frozen=True, slots=True)
class JobProfile:
    """A job's Synergy inputs on one cluster shape; throughputs are relative to its proportional share."""

    model: str
    demand: Demand
    w_prop: float  # throughput at the proportional share on the released (3 CPU = 1.0) scale
    opt: OptJob

    def speed(self, alloc: Allocation, model: Literal["binary", "matrix"]) -> float:
        """Relative throughput of an allocation: the released simulator's two levels (`binary`: the speedup
        at best case, else 1), or the matrix looked up at the allocation (`matrix`)."""
        if model == "binary" or not self.model:
            return self.demand.speedup if alloc.at_ideal else 1.0
        return _w(self.model, alloc.cpus_per_gpu, alloc.mem_per_gpu) / self.w_prop


@lru_cache(maxsize=4096)
def job_profile(model: str, gpus: int, shape: ClusterShape = ClusterShape()) -> JobProfile:
    """Best-case demand, proportional share and OPT points of `gpus` GPUs of `model` on `shape`.

    A job whose GPUs fit one server gets at most that server's CPUs and memory; where the cap cuts its CPU
    best case, its speedup is interpolated by CPU between proportional and best case (the released
    simulator's rule); a job larger than one server runs at its proportional share. Speedups are re-normalised
    to the shape's proportional point (CPU:GPU 4, 5, 6 give the digest's App-A.2 values).
    """
    if model not in MODELS:
        raise ValueError(f"synergy profile: unknown model {model!r}; expected one of {', '.join(MODELS)}")
    p = MODELS[model]
    prop_c, prop_m = shape.cpus_per_gpu * gpus, shape.mem_per_gpu * gpus
    w_prop = _w(model, shape.cpus_per_gpu, shape.mem_per_gpu)
    speedup = _w(model, p.ideal_cpus_per_gpu, p.ideal_mem_gb_per_gpu) / w_prop
    ideal_c, ideal_m = p.ideal_cpus_per_gpu * gpus, p.ideal_mem_gb_per_gpu * gpus
    if gpus > shape.gpus:
        ideal_c, ideal_m, speedup = prop_c, prop_m, 1.0
        cap_c, cap_m = shape.cpus_per_gpu, shape.mem_per_gpu
    else:
        cap_c, cap_m = shape.cpus / gpus, shape.mem_gb / gpus
        if ideal_c > shape.cpus + EPS:
            speedup = 1.0 + (speedup - 1.0) * max(0.0, shape.cpus - prop_c) / (ideal_c - prop_c)
            ideal_c = shape.cpus
        ideal_m = min(ideal_m, shape.mem_gb)
    speedup = max(speedup, 1.0)  # best case never promises less than proportional
    points = fair_points(p.matrix, CPU_GRID, MEM_GRID, w_prop, cap_c, cap_m)
    return JobProfile(model, Demand(gpus, ideal_c, ideal_m, prop_c, prop_m, speedup), w_prop, OptJob(gpus, points))


@dataclass(frozen=True, slots=True)
class QueueState:
    """What the queue keys read about a job at `now` (times in seconds at the proportional share)."""

    arrival: float
    remaining_s: float
    total_s: float
    attained_s: float  # GPU-seconds held so far (LAS)
    profile: JobProfile
    tiebreak: int = 0


def queue_key(order: Order, job: QueueState, now: float, shape: ClusterShape, aware: bool,
              ftf: Literal["themis", "released"] = "themis") -> tuple[float, ...]:
    """Ascending sort key of a job under `order` (`synergy.md` §3.6). `aware`: SRTF and Tetris divide the
    remaining time by the best-case speedup (Synergy-aware mechanisms). FTF serves the largest finish-time
    ratio first, as Themis does; `ftf="released"` keeps the released code's ascending sort."""
    d = job.profile.demand
    remaining = job.remaining_s / (d.speedup if aware else 1.0)
    if order == "fifo":
        head = job.arrival
    elif order == "srtf":
        head = remaining
    elif order == "las":
        head = job.attained_s
    elif order == "ftf":
        rho = (now - job.arrival + remaining) / max(job.total_s, EPS)
        head = -rho if ftf == "themis" else rho
    else:
        g, c, m = d.gpus / (shape.gpus * shape.servers), d.ideal_cpus / (shape.cpus * shape.servers), \
            d.ideal_mem / (shape.mem_gb * shape.servers)
        head = max(g, c, m) if order == "drf" else remaining * (g + c + m)
    return (head, job.arrival, job.tiebreak)


def measured_profile(rates: Sequence[tuple[int, float]], gpus: int, shape: ClusterShape,
                     saturation: float = 0.05) -> JobProfile:
    """A job's profile from its measured CPU sensitivity (slurmxd's search: steps/s at each CPU count, memory at
    full): the best case is the knee, the fewest CPUs within `saturation` of the best throughput (the same rule as
    `slurmx.hooks.search.knee`), capped by one server; memory is not measured, so it stays at the proportional
    share; the speedup is the knee's throughput over the proportional share's, read off the measured points
    (linear between them, flat beyond). OPT sees the measured points as its grid."""
    points = sorted(rates)
    prop_c, prop_m = shape.cpus_per_gpu * gpus, shape.mem_per_gpu * gpus
    if not points or gpus > shape.gpus:
        return insensitive_profile(gpus, shape)

    def rate(cpus: float) -> float:
        if cpus <= points[0][0]:
            return points[0][1]
        for (c0, w0), (c1, w1) in itertools.pairwise(points):
            if cpus <= c1:
                return w0 + (w1 - w0) * (cpus - c0) / (c1 - c0)
        return points[-1][1]

    best = max(w for _, w in points)
    knee = min(c for c, w in points if w >= (1.0 - saturation) * best)
    ideal_c = min(float(knee), shape.cpus)
    w_prop = rate(prop_c)
    speedup = max(1.0, rate(ideal_c) / w_prop)
    grid = tuple((c / gpus, shape.mem_per_gpu, rate(c) / w_prop) for c, _ in points if c <= shape.cpus)
    return JobProfile("", Demand(gpus, ideal_c, prop_m, prop_c, prop_m, speedup), 1.0,
                      OptJob(gpus, grid or ((shape.cpus_per_gpu, shape.mem_per_gpu, 1.0),)))


def insensitive_profile(gpus: int, shape: ClusterShape) -> JobProfile:
    """A job with no profile: best case = proportional share, speedup 1."""
    c, m = shape.cpus_per_gpu * gpus, shape.mem_per_gpu * gpus
    return JobProfile("", Demand(gpus, c, m, c, m, 1.0), 1.0,
                      OptJob(gpus, ((shape.cpus_per_gpu, shape.mem_per_gpu, 1.0),)))


def allocate_round(
    queue: list[JobProfile],
    state: Servers,
    mechanism: Mechanism,
    placement: Placement = "first_fit",
    tune_order: Literal["policy", "demand"] = "policy",
) -> list[tuple[Allocation, float] | None]:
    """One round's allocations for a queue already in policy order: (allocation, relative throughput) per job,
    None for a job not run. PROP, TUNE and OPT admit by GPUs only; GREEDY walks the whole queue. OPT's
    throughput is LP1's (the super-machine bound) on a proportional placement of the GPUs, as the released
    simulator credits it."""
    if mechanism == "greedy":
        allocs = greedy([p.demand for p in queue], state, placement)
        return [(a, p.demand.speedup) if a is not None else None for a, p in zip(allocs, queue, strict=True)]
    admitted = admit_by_gpus([p.demand.gpus for p in queue], int(sum(state.fg) + EPS))
    chosen = [queue[i] for i in admitted]
    out: list[tuple[Allocation, float] | None] = [None] * len(queue)
    if mechanism == "opt":
        placed = proportional([p.demand for p in chosen], state, placement)
        total_c, total_m = state.cpus_per_server * state.count, state.mem_per_server * state.count
        result = super_machine([p.opt for p in chosen], total_c, total_m)
        for i, a, (c, m, w) in zip(admitted, placed, result.choice, strict=True):
            assert a is not None
            out[i] = (Allocation(a.shares, c, m, True), w)
        return out
    if mechanism == "tune" and tune_order == "demand":  # the paper's order: (GPU, CPU, memory) descending
        admitted = sorted(admitted, key=lambda i: (-queue[i].demand.gpus, -queue[i].demand.ideal_cpus,
                                                   -queue[i].demand.ideal_mem))
        chosen = [queue[i] for i in admitted]
    run = tune if mechanism == "tune" else proportional
    allocs = run([p.demand for p in chosen], state, placement)
    for i, p, a in zip(admitted, chosen, allocs, strict=True):
        assert a is not None  # PROP and TUNE place every admitted job
        out[i] = (a, p.demand.speedup if a.at_ideal else 1.0)
    return out
