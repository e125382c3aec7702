"""Synergy's allocation mechanisms over one round: PROP, GREEDY and TUNE (OPT lives in `opt`).

Pure functions over a `Servers` snapshot (free GPUs, CPUs and GB per server, as numpy arrays so one
first-fit scan over 512 servers is a few vector operations). A job is a `Demand`: its GPU count, its
best-case CPU/memory (the knee of its throughput matrix, capped at one server's worth when its GPUs fit on
one server) and its GPU-proportional share. Every allocation keeps CPU and memory per GPU equal on every
server a job spans (a split data-parallel job runs at the pace of its slowest process, `synergy.md` §1.1).
TUNE's contract, checked by the tests and by the round replica every round: it never skips a job the
GPU-only admission picked, and it never gives a job less than its proportional throughput.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

__all__ = [
    "EPS",
    "Allocation",
    "Demand",
    "Placement",
    "Servers",
    "TuneError",
    "admit_by_gpus",
    "greedy",
    "proportional",
    "tune",
]

EPS = 1e-6
Placement = Literal["first_fit", "consolidate"]


class TuneError(RuntimeError):
    """TUNE could not place a GPU-admitted job: impossible by construction, so this is a bug."""


@dataclass(frozen=True, slots=True)
class Demand:
    """What a job asks for: `gpus`, best-case and proportional (CPU, GB) totals, and its speedup at best case."""

    gpus: int
    ideal_cpus: float
    ideal_mem: float
    prop_cpus: float
    prop_mem: float
    speedup: float = 1.0

    @property
    def above_prop(self) -> bool:
        """Best case exceeds the proportional share in some dimension (TUNE's step 1 applies)."""
        return self.ideal_cpus > self.prop_cpus + EPS or self.ideal_mem > self.prop_mem + EPS


@dataclass(slots=True)
class Allocation:
    """Where a job runs this round: (server, GPUs) shares, CPU and GB per GPU, and whether at best case."""

    shares: list[tuple[int, int]]
    cpus_per_gpu: float
    mem_per_gpu: float
    at_ideal: bool

    @property
    def cpus(self) -> float:
        return self.cpus_per_gpu * sum(k for _, k in self.shares)

    @property
    def mem(self) -> float:
        return self.mem_per_gpu * sum(k for _, k in self.shares)


@dataclass
class Servers:
    """Free resources of a homogeneous cluster, mutated as a round's allocations are made.

    Plain lists, not numpy: a round touches single entries thousands of times. First fit keeps, per slice
    size, the first server that could still hold one GPU's slice; free resources only shrink within a round
    (a revert moves the pointers back), so every scan resumes where the last one stopped.
    """

    gpus_per_server: int
    cpus_per_server: float
    mem_per_server: float
    fg: list[float]
    fc: list[float]
    fm: list[float]
    jobs_on: list[list[int]] = field(default_factory=list)  # job indices per server, this round
    _first: dict[tuple[float, float], int] = field(default_factory=dict)

    @classmethod
    def empty(cls, n: int, gpus: int, cpus: float, mem: float) -> Servers:
        return cls(gpus, cpus, mem, [float(gpus)] * n, [float(cpus)] * n, [float(mem)] * n, [[] for _ in range(n)])

    @property
    def count(self) -> int:
        return len(self.fg)

    @property
    def free_gpus(self) -> np.ndarray:
        return np.asarray(self.fg)

    @property
    def free_cpus(self) -> np.ndarray:
        return np.asarray(self.fc)

    @property
    def free_mem(self) -> np.ndarray:
        return np.asarray(self.fm)

    def take(self, idx: int, alloc: Allocation, sign: float = 1.0) -> None:
        """Allocate (sign 1) or release (sign -1) `alloc` for job `idx`."""
        for s, k in alloc.shares:
            self.fg[s] -= sign * k
            self.fc[s] -= sign * k * alloc.cpus_per_gpu
            self.fm[s] -= sign * k * alloc.mem_per_gpu
            if sign > 0:
                self.jobs_on[s].append(idx)
            else:
                self.jobs_on[s].remove(idx)
                for key, first in self._first.items():
                    if first > s:
                        self._first[key] = s

    def find(self, gpus: int, cpus_per_gpu: float, mem_per_gpu: float, how: Placement) -> list[tuple[int, int]] | None:
        """Servers for `gpus` GPUs with the given slice per GPU, or None when they do not fit."""
        if how == "consolidate":
            return self._consolidate(gpus, cpus_per_gpu, mem_per_gpu)
        fg, fc, fm, n = self.fg, self.fc, self.fm, len(self.fg)
        key = (cpus_per_gpu, mem_per_gpu)
        s = self._first.get(key, 0)
        while s < n and not (fg[s] >= 1 - EPS and fc[s] >= cpus_per_gpu - EPS and fm[s] >= mem_per_gpu - EPS):
            s += 1
        self._first[key] = s
        if s == n:
            return None
        if gpus == 1:
            return [(s, 1)]
        shares: list[tuple[int, int]] = []
        left = gpus
        for t in range(s, n):  # GPU by GPU in server order (the released code's first fit)
            if fg[t] < 1 - EPS or fc[t] < cpus_per_gpu - EPS or fm[t] < mem_per_gpu - EPS:
                continue
            k = min(int(fg[t] + EPS), int((fc[t] + EPS) // cpus_per_gpu), int((fm[t] + EPS) // mem_per_gpu))
            if k > 0:
                k = min(k, left)
                shares.append((t, k))
                left -= k
                if left == 0:
                    return shares
        return None

    def _consolidate(self, gpus: int, cpus_per_gpu: float, mem_per_gpu: float) -> list[tuple[int, int]] | None:
        """The paper's placement: the fitting server with the least free resources (best fit), else the
        fewest servers, fullest first."""
        fg, fc, fm = self.free_gpus, self.free_cpus, self.free_mem
        whole = (fg >= gpus - EPS) & (fc >= gpus * cpus_per_gpu - EPS) & (fm >= gpus * mem_per_gpu - EPS)
        if whole.any():
            score = fg / self.gpus_per_server + fc / self.cpus_per_server + fm / self.mem_per_server
            return [(int(np.where(whole, score, np.inf).argmin()), gpus)]
        if gpus == 1:
            return None
        per = np.minimum(fg, np.minimum(np.floor((fc + EPS) / cpus_per_gpu), np.floor((fm + EPS) / mem_per_gpu)))
        shares: list[tuple[int, int]] = []
        left = gpus
        for s in np.argsort(fg, kind="stable"):
            k = min(int(per[s]), left)
            if k > 0:
                shares.append((int(s), k))
                left -= k
                if left == 0:
                    return shares
        return None


def admit_by_gpus(gpus: list[int], free_gpus: int) -> list[int]:
    """Indices of the queue (already in policy order) admitted by GPU demand only, backfilling past misfits."""
    chosen = []
    for i, g in enumerate(gpus):
        if free_gpus <= 0:
            break  # every job asks for at least one GPU: a long queue is not scanned past a full cluster
        if g <= free_gpus:
            chosen.append(i)
            free_gpus -= g
    return chosen


def _place(st: Servers, idx: int, demand: Demand, ideal: bool, how: Placement) -> Allocation | None:
    g = demand.gpus
    cpus, mem = (demand.ideal_cpus, demand.ideal_mem) if ideal else (demand.prop_cpus, demand.prop_mem)
    shares = st.find(g, cpus / g, mem / g, how)
    if shares is None:
        return None
    alloc = Allocation(shares, cpus / g, mem / g, ideal)
    st.take(idx, alloc)
    return alloc


def proportional(demands: list[Demand], st: Servers, how: Placement = "first_fit") -> list[Allocation | None]:
    """Every (GPU-admitted) job at its GPU-proportional share: always fits where its GPUs are free."""
    return [_place(st, i, d, False, how) for i, d in enumerate(demands)]


def greedy(demands: list[Demand], st: Servers, how: Placement = "first_fit") -> list[Allocation | None]:
    """First fit of each job's full best-case demand, in queue order; a job that does not fit is skipped."""
    out: list[Allocation | None] = []
    free = int(sum(st.fg) + EPS)
    for i, d in enumerate(demands):
        if free == 0:  # nothing more can start this round
            out.extend([None] * (len(demands) - i))
            break
        alloc = _place(st, i, d, True, how) if d.gpus <= free else None
        if alloc is not None:
            free -= d.gpus
        out.append(alloc)
    return out


def _gpu_servers(st: Servers, gpus: int) -> list[tuple[int, int]]:
    """Step 2's server choice, ignoring CPU and memory (the released code): one server holding all the GPUs
    when the job has several, else servers with the fewest free GPUs first."""
    if gpus > 1:
        for s, free in enumerate(st.fg):
            if free >= gpus - EPS:
                return [(s, gpus)]
    if gpus == 1:
        candidates = [(f, s) for s, f in enumerate(st.fg) if f >= 1 - EPS]
        if candidates:
            return [(min(candidates)[1], 1)]
    shares, left = [], gpus
    for free, s in sorted((f, s) for s, f in enumerate(st.fg) if f >= 1 - EPS):
        k = min(int(free + EPS), left)
        if k > 0:
            shares.append((int(s), k))
            left -= k
            if left == 0:
                return shares
    raise TuneError(f"no {gpus} free GPUs for a GPU-admitted job")


def _revert(st: Servers, idx: int, alloc: Allocation, demand: Demand) -> None:
    """Put a job back to its proportional share on the same GPUs (it keeps running, at speedup 1)."""
    st.take(idx, alloc, -1.0)
    alloc.cpus_per_gpu, alloc.mem_per_gpu = demand.prop_cpus / demand.gpus, demand.prop_mem / demand.gpus
    alloc.at_ideal = False
    st.take(idx, alloc)


def tune(demands: list[Demand], st: Servers, how: Placement = "first_fit") -> list[Allocation | None]:
    """Synergy-TUNE over the GPU-admitted jobs, in the given order (`synergy.md` §3.5).

    Best case if it fits; else the proportional share if best case was above it; else (the job is at or
    below proportional) revert co-located jobs holding more than their proportional share until it fits.
    Raises `TuneError` only on a bug: the admitted jobs' GPUs must fit the cluster.
    """
    out: list[Allocation | None] = [None] * len(demands)
    for i, d in enumerate(demands):
        alloc = _place(st, i, d, True, how)
        if alloc is None and d.above_prop:
            alloc = _place(st, i, d, False, how)
        if alloc is None:
            alloc = _steal_back(st, i, d, out, demands)
        out[i] = alloc
    return out


def _steal_back(st: Servers, i: int, d: Demand, out: list[Allocation | None], demands: list[Demand]) -> Allocation:
    ideal = not d.above_prop
    cpus_pg = (d.ideal_cpus if ideal else d.prop_cpus) / d.gpus
    mem_pg = (d.ideal_mem if ideal else d.prop_mem) / d.gpus
    shares = _gpu_servers(st, d.gpus)
    for s, k in shares:
        need_c, need_m = k * cpus_pg - st.fc[s], k * mem_pg - st.fm[s]
        if need_c <= EPS and need_m <= EPS:
            continue
        victims = []
        for v in st.jobs_on[s]:
            a = out[v]
            assert a is not None
            dv = demands[v]
            ex_c = a.cpus_per_gpu - dv.prop_cpus / dv.gpus
            ex_m = a.mem_per_gpu - dv.prop_mem / dv.gpus
            if (ex_c > EPS and need_c > EPS) or (ex_m > EPS and need_m > EPS):
                victims.append((len(a.shares), -a.cpus_per_gpu, -a.mem_per_gpu, v))
        for *_, v in sorted(victims):
            a = out[v]
            assert a is not None
            _revert(st, v, a, demands[v])
            need_c, need_m = k * cpus_pg - st.fc[s], k * mem_pg - st.fm[s]
            if need_c <= EPS and need_m <= EPS:
                break
        else:
            if need_c > EPS or need_m > EPS:
                raise TuneError(f"server {s}: short of {need_c:g} CPUs / {need_m:g} GB after reverting every "
                                "over-allocated job")
    alloc = Allocation(shares, cpus_pg, mem_pg, ideal)
    st.take(i, alloc)
    return alloc
