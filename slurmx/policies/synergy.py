"""Synergy (OSDI '22): resource-sensitive CPU and memory allocation under FIFO, SRTF, LAS, FTF, DRF, Tetris.

The policy orders the queue; the mechanism (PROP, GREEDY, TUNE, OPT) decides how much CPU and memory each
GPU-admitted job gets this round (`synergy_mechanisms`, `synergy_opt`). This module holds what ties them to
a job: its profile on a cluster shape (best-case demand, proportional share, speedup, OPT's admissible
points), the queue keys, and the registered `synergy` policy that runs on the daemon's and the simulator's
`ClusterView`. Profiles come from the profiler (`SynergyPolicy.with_profiles`); a group without one is
treated as insensitive: it runs at its proportional share, which Synergy guarantees anyway.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import ClassVar, Literal

from slurmx.core.actions import Action, Plan, Preempt, Start
from slurmx.core.model import ClusterView, Group, VariantState
from slurmx.core.resources import Resources
from slurmx.policies.base import PolicyArgs, register
from slurmx.policies.synergy_mechanisms import (
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
from slurmx.policies.synergy_opt import OptJob, fair_points, super_machine
from slurmx.policies.synergy_profiles import CPU_GRID, MEM_GRID, MODELS

__all__ = [
    "ORDERS",
    "ClusterShape",
    "JobProfile",
    "Mechanism",
    "Order",
    "QueueState",
    "SynergyArgs",
    "SynergyPolicy",
    "allocate_round",
    "job_profile",
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


class SynergyArgs(PolicyArgs):
    """`mechanism`: prop | greedy | tune | opt; `order`: fifo | srtf | las | ftf | drf | tetris;
    `placement`: first_fit (the released code's default) or consolidate (the paper's best fit / fewest
    servers); `ftf`: themis (largest ratio first) or released (the released code's ascending sort);
    `tune_order`: policy (released) or demand (the paper's GPU, CPU, memory descending)."""

    mechanism: Mechanism = "tune"
    order: Order = "fifo"
    placement: Placement = "first_fit"
    ftf: Literal["themis", "released"] = "themis"
    tune_order: Literal["policy", "demand"] = "policy"
    kind: str = "gpu"


@dataclass(frozen=True)
class SynergyPolicy:
    """The registered `synergy` policy on a `ClusterView`: each round it re-allocates every running and
    pending group of `kind` from scratch (as Synergy's leases do), keeps a running group whose node and
    allocation are unchanged (lease extended), and preempts with no grace then restarts the others (lease
    terminated). Jobs run on one node here (the view's Start is single-node); split multi-GPU placement is
    modelled by `synergy_rounds`. `profiles` maps a group id to its model name (the profiler's output)."""

    args: SynergyArgs
    profiles: Mapping[str, str] = field(default_factory=dict)
    name: ClassVar[str] = "synergy"

    def with_profiles(self, profiles: Mapping[str, str]) -> SynergyPolicy:
        return SynergyPolicy(self.args, dict(profiles))

    def schedule(self, view: ClusterView, now: float) -> Plan:
        kind = self.args.kind
        nodes = view.nodes_of_kind(kind)
        if not nodes:
            return Plan((), (f"synergy: no node serves kind {kind!r}",))
        cap = nodes[0].capacity
        shape = ClusterShape(len(nodes), cap.gres_count("gpu"), float(cap.cpus), cap.mem_mb / 1024)
        groups = [g for g in (*view.running_groups(), *view.pending_groups()) if g.variant(kind) is not None]
        keyed: list[tuple[tuple[float, ...], Group, JobProfile]] = []
        aware = self.args.mechanism != "prop"
        for n, group in enumerate(groups):
            variant = group.variant(kind)
            assert variant is not None
            gpus = max(1, variant.request.gres_count("gpu"))
            model = self.profiles.get(group.group_id)
            profile = job_profile(model, gpus, shape) if model else _insensitive(gpus, shape)
            remaining = variant.estimate_s or 0.0
            done = 1.0 - (group.work if group.work is not None else 1.0)
            total = remaining / max(1.0 - done, EPS)
            state = QueueState(group.submit_time, remaining, total, done * total * gpus, profile, n)
            keyed.append((queue_key(self.args.order, state, now, shape, aware, self.args.ftf), group, profile))
        keyed.sort(key=lambda item: item[0])
        servers = shape.servers_state()
        allocs = allocate_round([p for *_, p in keyed], servers, self.args.mechanism, "consolidate",
                                self.args.tune_order)
        names = [node.name for node in nodes]
        preempts: list[Action] = []
        starts: list[Action] = []
        notes: list[str] = []
        for (_, group, profile), result in zip(keyed, allocs, strict=True):
            variant = group.variant(kind)
            assert variant is not None
            running = variant.state == VariantState.RUNNING
            if result is None or len(result[0].shares) > 1:
                if result is not None:
                    notes.append(f"{group.group_id}: split over {len(result[0].shares)} nodes; not modelled here")
                if running:
                    preempts.append(Preempt(group.group_id, 0, reason="synergy: lease not renewed"))
                continue
            alloc, _ = result
            want = Resources(round(alloc.cpus), round(alloc.mem * 1024), {"gpu": profile.demand.gpus})
            node = names[alloc.shares[0][0]]
            if running and variant.nodes == (node,) and variant.request == want:
                continue  # lease extended: same node, same CPUs and memory
            if running:
                preempts.append(Preempt(group.group_id, 0, reason="synergy: allocation changed"))
            starts.append(Start(group.group_id, kind, (node,), want, reason=f"synergy-{self.args.mechanism}"))
        return Plan(tuple(preempts + starts), tuple(notes))


def _insensitive(gpus: int, shape: ClusterShape) -> JobProfile:
    """A group with no profile: best case = proportional share, speedup 1."""
    c, m = shape.cpus_per_gpu * gpus, shape.mem_per_gpu * gpus
    return JobProfile("", Demand(gpus, c, m, c, m, 1.0), 1.0,
                      OptJob(gpus, ((shape.cpus_per_gpu, shape.mem_per_gpu, 1.0),)))


def _make(args: SynergyArgs) -> SynergyPolicy:
    return SynergyPolicy(args)


register("synergy", SynergyArgs)(_make)
