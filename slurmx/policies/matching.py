"""Exact min-cost assignment of jobs to (machine, position) slots: AlloX's matching, fast and naive.

The problem (AlloX §3.1-3.2): job j placed on machine i as the k-th *last* job costs
`Q(j, (i, k)) = k * p[j, type(i)] + avail[i] - arrival[j]`; every job takes one slot, every slot holds at
most one job, and the total is minimised. The sum of matched costs is the total flow time of the planned
schedule when machine i starts its queue at `avail[i]`.

`solve_naive` is the textbook method (Gavel's `allox.py`, the paper's Algorithm 1): the full n x (n*m) matrix
handed to `scipy.optimize.linear_sum_assignment`. It is the reference for tests and benchmarks.

`solve` is exact too, and much faster, because of two facts about this cost (proved in docs/policies/allox.md):

1. *Levels.* The cost of slot (i, k) is `k * p + avail[i]`: the job part depends on the machine only through
   its type. So group the slots by (type t, position k) into a *level*. A level holds at most m_t jobs, and if
   it holds L jobs, the cheapest way to seat them is on the L type-t machines with the smallest `avail`. The
   problem becomes a transportation problem from n jobs to a few levels, where level (t, k) charges
   `k * p[j, t]` per job plus a convex "ladder" cost: its r-th job pays the r-th smallest availability of
   type t. Optimal loads are non-increasing in k, so level k seats on a prefix of the machines by
   availability: every machine's queue is a prefix of positions, as the paper requires. Machines of one type
   that are free at the same time are interchangeable, and so are all the slots of a level.
2. *Few levels.* Only levels 1..K_t + 1 of each type are ever materialised (K_t = highest used position); all
   higher levels are dominated by the empty top one, so leaving them out keeps the duals feasible.

The transportation problem is solved by successive shortest paths with Johnson potentials: jobs are
inserted one at a time, each by one Dijkstra over the levels (not the slots) of the residual graph, where an
arc level a -> level b means "some job at a moves to b" and costs the cheapest such move. The level count
is about n/m per type (tens), so each Dijkstra is tiny and the whole solve is O(n * L^2) for L levels. The
final potentials give a lower bound on the optimum (`Solution.lower_bound`), which certifies exactness
without the reference solver.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from heapq import heappop, heappush
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy.optimize import linear_sum_assignment

__all__ = ["Instance", "Solution", "schedule_cost", "solve", "solve_naive"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
INF = math.inf
# Added to every position multiplier: among equally cheap plans, prefer the one using the least machine
# time (it leaves the most room for later arrivals; it is also the paper's answer to its §3.1 example).
# Any plan chosen this way is within TIE * sum_j max_t p[j, t] of the optimum.
TIE = 1e-12
Search = Literal["auto", "dense", "sparse"]


@dataclass(frozen=True)
class Instance:
    """One snapshot: `proc[j, t]` is job j's (estimated) processing time on machine type t (`inf` = cannot
    run there), `arrival[j]` its arrival time, `machine_type[i]` and `avail[i]` each machine's type and the
    time it finishes its current work (the current time when idle). All times share one origin."""

    proc: FloatArray
    arrival: FloatArray
    machine_type: IntArray
    avail: FloatArray

    def __post_init__(self) -> None:
        proc = np.asarray(self.proc, dtype=np.float64)
        if proc.ndim != 2:
            raise ValueError(f"proc must be (jobs, types), got shape {proc.shape}")
        object.__setattr__(self, "proc", proc)
        object.__setattr__(self, "arrival", np.asarray(self.arrival, dtype=np.float64).reshape(-1))
        object.__setattr__(self, "machine_type", np.asarray(self.machine_type, dtype=np.int64).reshape(-1))
        object.__setattr__(self, "avail", np.asarray(self.avail, dtype=np.float64).reshape(-1))
        n, types = proc.shape
        if self.arrival.shape != (n,):
            raise ValueError(f"arrival has {self.arrival.size} entries for {n} jobs")
        if self.avail.shape != self.machine_type.shape:
            raise ValueError("avail and machine_type differ in length")
        if np.isnan(proc).any() or (proc < 0).any():
            raise ValueError("processing times must be >= 0 (inf where a job cannot run)")
        if not (np.isfinite(self.avail).all() and np.isfinite(self.arrival).all()):
            raise ValueError("avail and arrival must be finite")
        if self.machine_type.size and (self.machine_type.min() < 0 or self.machine_type.max() >= types):
            raise ValueError(f"machine types must be in [0, {types})")
        present = np.bincount(self.machine_type, minlength=types) > 0
        runnable = np.isfinite(proc[:, present]).any(axis=1) if n else np.ones(0, dtype=bool)
        if not runnable.all():
            raise ValueError(f"job {int(np.argmin(runnable))} cannot run on any machine present")

    @property
    def n_jobs(self) -> int:
        return int(self.proc.shape[0])

    @property
    def n_machines(self) -> int:
        return int(self.machine_type.size)


@dataclass(frozen=True)
class Solution:
    """Job j runs on `machine[j]` as the `position[j]`-th last job; `objective` is the sum of matched costs.
    `lower_bound` is a dual bound on the optimum (equal to `objective` up to rounding when exact), or None
    where the solver gives none."""

    machine: IntArray
    position: IntArray
    objective: float
    lower_bound: float | None = None

    def queues(self, n_machines: int) -> list[list[int]]:
        """Each machine's jobs in run order (largest position first)."""
        out: list[list[int]] = [[] for _ in range(n_machines)]
        for j in np.lexsort((np.arange(self.machine.size), -self.position, self.machine)):
            out[int(self.machine[j])].append(int(j))
        return out


def schedule_cost(inst: Instance, machine: IntArray, position: IntArray) -> float:
    """Sum over jobs of `position * p[j, type(machine)] + avail[machine] - arrival[j]`."""
    if inst.n_jobs == 0:
        return 0.0
    p = inst.proc[np.arange(inst.n_jobs), inst.machine_type[machine]]
    return float(np.sum(position * p + inst.avail[machine] - inst.arrival))


def _compact(inst: Instance, machine: IntArray, position: IntArray) -> Solution:
    """Renumber each machine's positions 1..r keeping the run order (never costlier), and price it."""
    order = np.lexsort((np.arange(machine.size), position, machine))
    compact = np.empty_like(position)
    counts: dict[int, int] = {}
    for j in order:
        i = int(machine[j])
        counts[i] = counts.get(i, 0) + 1
        compact[j] = counts[i]
    return Solution(machine, compact, schedule_cost(inst, machine, compact))


def solve_naive(inst: Instance, max_entries: int = 400_000_000) -> Solution:
    """The reference: the full n x (n*m) matrix `Q[j, m*(k-1)+i]` and `linear_sum_assignment`.

    Memory and time grow as n^2 * m, so this is for tests and benchmarks; refuses above `max_entries`.
    """
    n, m = inst.n_jobs, inst.n_machines
    if n == 0:
        return Solution(np.zeros(0, np.int64), np.zeros(0, np.int64), 0.0)
    if n * n * m > max_entries:
        raise ValueError(f"naive matrix would have {n * n * m:,} entries (limit {max_entries:,})")
    p = inst.proc[:, inst.machine_type]  # (n, m)
    k = np.arange(1, n + 1, dtype=np.float64)
    q = k[None, :, None] * p[:, None, :] + inst.avail[None, None, :] - inst.arrival[:, None, None]
    q = q.reshape(n, n * m)
    q[~np.isfinite(q)] = 1e300  # forbidden placements; Instance guarantees a finite matching exists
    rows, cols = linear_sum_assignment(q)
    machine = np.empty(n, np.int64)
    position = np.empty(n, np.int64)
    machine[rows] = cols % m
    position[rows] = cols // m + 1
    return _compact(inst, machine, position)


class _Levels:
    """Successive shortest paths over levels (type, position); see the module docstring.

    Potentials are stored relative to the sink's: `q[b] = pi[b] - pi_sink`, so `v_b = -q[b]` is level b's
    price, kept within [ladder[t][load-1], ladder[t][load]] (the availabilities of its last seated and next
    free machine), and a Dijkstra only touches the levels it settles. A job j at level a has the implicit
    potential `q[a] - cost(j, a)`; moving it to level b costs `cost(j, b) - cost(j, a) + q[a] - q[b] >= 0`.

    Two searches give the same distances. `dense` relaxes every level from every settled level through
    `w[a][b]`, the cheapest move from a to b (kept up to date as jobs move): best with few levels. `sparse`
    relaxes only moves to the adjacent levels of the same type and, for each job, the two levels of every
    other type where it fits in that type's order: best with many levels (few machines, long queues). The
    other moves are never shorter, because an optimal assignment is sorted within each type (longer jobs
    at lower positions), so a long move is matched by a chain of one-level moves (docs/policies/allox.md).
    """

    def __init__(self, proc: list[list[float]], ladders: list[list[float]], dense: bool) -> None:
        self.proc = proc
        self.proc_np = np.array(proc, dtype=np.float64).reshape(len(proc), len(ladders))
        self.ladder = [[*lad, INF] for lad in ladders]
        self.dense = dense
        self.lt: list[int] = []  # level -> type
        self.lk: list[float] = []  # level -> position k
        self.load: list[int] = []
        self.q: list[float] = []
        self.jobs: list[list[int]] = []
        self.by_type: list[list[int]] = [[] for _ in ladders]  # levels of a type by position; last = empty top
        # dense: w[a][b] and the job achieving it
        self.w: list[list[float]] = []
        self.wj: list[list[int]] = []
        # sparse: shortest and longest job of each level (own type), and per type the negated values of
        # the non-top levels, non-decreasing by position, for bisection
        self.lo: list[tuple[float, int]] = []
        self.hi: list[tuple[float, int]] = []
        self.neg_lo: list[list[float]] = [[] for _ in ladders]
        self.neg_hi: list[list[float]] = [[] for _ in ladders]
        for t, lad in enumerate(ladders):
            if lad:
                self._add_level(t)

    def _move_cost(self, j: int, a: int, b: int) -> float:
        row = self.proc[j]
        return self.lk[b] * row[self.lt[b]] - self.lk[a] * row[self.lt[a]]

    def _add_level(self, t: int) -> None:
        new = len(self.lt)
        levels = self.by_type[t]
        if levels:  # the old top now holds a job: it joins the bisection lists
            self.neg_lo[t].append(-self.lo[levels[-1]][0])
            self.neg_hi[t].append(-self.hi[levels[-1]][0])
        levels.append(new)
        self.lt.append(t)
        self.lk.append(len(levels) + TIE)
        self.load.append(0)
        self.q.append(-self.ladder[t][0])  # price = the cheapest machine: dual-feasible (module docstring)
        self.jobs.append([])
        self.lo.append((INF, -1))
        self.hi.append((-INF, -1))
        if self.dense:
            for a in range(new):
                best, arg = INF, -1
                for j in self.jobs[a]:
                    c = self._move_cost(j, a, new)
                    if c < best:
                        best, arg = c, j
                self.w[a].append(best)
                self.wj[a].append(arg)
            self.w.append([INF] * (new + 1))
            self.wj.append([-1] * (new + 1))

    def _refresh_extremes(self, a: int) -> None:
        t = self.lt[a]
        own = [(self.proc[j][t], j) for j in self.jobs[a]]
        self.lo[a] = min(own) if own else (INF, -1)
        self.hi[a] = max(own, key=lambda e: (e[0], -e[1])) if own else (-INF, -1)
        k = int(self.lk[a]) - 1
        if k < len(self.neg_lo[t]):
            self.neg_lo[t][k] = -self.lo[a][0]
            self.neg_hi[t][k] = -self.hi[a][0]

    def _join(self, j: int, b: int) -> None:
        self.jobs[b].append(j)
        if not self.dense:
            self._refresh_extremes(b)
            return
        row, wb, wjb = self.proc[j], self.w[b], self.wj[b]
        base = self.lk[b] * row[self.lt[b]]
        lk, lt = self.lk, self.lt
        for x in range(len(lt)):
            if x != b:
                c = lk[x] * row[lt[x]] - base
                if c < wb[x]:
                    wb[x], wjb[x] = c, j

    def _leave(self, j: int, a: int) -> None:
        self.jobs[a].remove(j)
        if not self.dense:
            self._refresh_extremes(a)
            return
        wa, wja = self.w[a], self.wj[a]
        stale = [x for x in range(len(wa)) if wja[x] == j]
        if not stale:
            return
        if len(stale) * len(self.jobs[a]) <= 256:  # small: plain Python beats numpy's call overhead
            ta, ka, lk, lt = self.lt[a], self.lk[a], self.lk, self.lt
            members = [(self.proc[i], ka * self.proc[i][ta], i) for i in self.jobs[a]]
            for x in stale:
                kx, tx = lk[x], lt[x]
                best, arg = INF, -1
                for row, base, i in members:
                    c = kx * row[tx] - base
                    if c < best:
                        best, arg = c, i
                wa[x], wja[x] = best, arg
            return
        ids = np.array(self.jobs[a])  # the columns j was cheapest for, recomputed in one pass
        cols = np.array(stale)
        sub = self.proc_np[ids]
        cost = np.array(self.lk)[cols] * sub[:, np.array(self.lt)[cols]]
        cost -= (self.lk[a] * sub[:, self.lt[a]])[:, None]
        pick = cost.argmin(axis=0)
        for x, v, i in zip(stale, cost[pick, np.arange(cols.size)].tolist(), ids[pick].tolist(), strict=True):
            wa[x], wja[x] = v, i

    def _entries(self, t: int, p: float) -> tuple[int, ...]:
        """The levels of type t where a job of time p fits its order: the lowest whose shortest job is no
        longer than p (else the empty top), and the highest whose longest job is no shorter than p."""
        levels = self.by_type[t]
        up = levels[bisect_left(self.neg_lo[t], -p)]
        below = bisect_right(self.neg_hi[t], -p) - 1
        return (up,) if below < 0 or levels[below] == up else (up, levels[below])

    def _search_dense(self, j0: int) -> _Path:
        lt, lk, q, w, ladder, load = self.lt, self.lk, self.q, self.w, self.ladder, self.load
        n_lev = len(lt)
        row = self.proc[j0]
        dist = [lk[b] * row[lt[b]] - q[b] for b in range(n_lev)]
        sink = [ladder[lt[b]][load[b]] + q[b] for b in range(n_lev)]  # reduced cost b -> sink
        done = [False] * n_lev
        pred: dict[int, tuple[int, int]] = {b: (-1, j0) for b in range(n_lev)}
        d_sink, last = INF, -1
        settled: list[tuple[int, float]] = []
        while True:
            a, da = -1, INF
            for b in range(n_lev):  # next level: smallest distance, then cheapest exit to the sink
                if not done[b] and (dist[b] < da or (dist[b] == da and a >= 0 and sink[b] < sink[a])):
                    a, da = b, dist[b]
            if a < 0 or da >= d_sink:
                break
            done[a] = True
            settled.append((a, da))
            if da + sink[a] < d_sink:
                d_sink, last = da + sink[a], a
                if d_sink <= da:
                    break
            base, wa, wja = da + q[a], w[a], self.wj[a]
            for b in range(n_lev):
                if not done[b]:
                    nd = base + wa[b] - q[b]
                    if nd < dist[b]:
                        dist[b] = nd
                        pred[b] = (a, wja[b])
        return _Path(last, d_sink, settled, pred)

    def _search_sparse(self, j0: int) -> _Path:
        lt, lk, q, ladder, load, proc = self.lt, self.lk, self.q, self.ladder, self.load, self.proc
        types = range(len(self.by_type))
        dist: dict[int, float] = {}
        pred: dict[int, tuple[int, int]] = {}
        heap: list[tuple[float, int]] = []

        def relax(b: int, nd: float, via: int, job: int) -> None:
            if nd < dist.get(b, INF) and b not in done:  # settled levels are final (rounding aside)
                dist[b] = nd
                pred[b] = (via, job)
                heappush(heap, (nd, b))

        done: set[int] = set()
        row = proc[j0]
        for t in types:
            if row[t] < INF and self.by_type[t]:
                for e in self._entries(t, row[t]):
                    relax(e, lk[e] * row[t] - q[e], -1, j0)
        settled: list[tuple[int, float]] = []
        d_sink, last = INF, -1
        while heap and heap[0][0] < d_sink:
            da, a = heappop(heap)
            if a in done:
                continue
            done.add(a)
            settled.append((a, da))
            t = lt[a]
            exit_cost = da + ladder[t][load[a]] + q[a]
            if exit_cost < d_sink:
                d_sink, last = exit_cost, a
            if not self.jobs[a]:
                continue
            base = da + q[a]
            k = int(lk[a])
            levels = self.by_type[t]
            if k < len(levels):  # the shortest job moves one level up
                b = levels[k]
                relax(b, base + self.lo[a][0] - q[b], a, self.lo[a][1])
            if k > 1:  # the longest job moves one level down
                b = levels[k - 2]
                relax(b, base - self.hi[a][0] - q[b], a, self.hi[a][1])
            ka = lk[a]
            for j in self.jobs[a]:
                rj = proc[j]
                here = base - ka * rj[t]
                for u in types:
                    if u != t and rj[u] < INF and self.by_type[u]:
                        for e in self._entries(u, rj[u]):
                            relax(e, here + lk[e] * rj[u] - q[e], a, j)
        return _Path(last, d_sink, settled, pred)

    def insert(self, j0: int) -> None:
        """Add job j0 along a shortest augmenting path, then update the potentials (Johnson)."""
        path = self._search_dense(j0) if self.dense else self._search_sparse(j0)
        if path.last < 0:
            raise AssertionError("no augmenting path: every level of every usable type is full")
        for b, d in path.settled:  # unsettled levels keep q: their potential rises with the sink's
            self.q[b] += d - path.length
        b = path.last
        self.load[b] += 1
        while True:
            a, j = path.pred[b]
            if a < 0:
                self._join(j, b)
                break
            self._leave(j, a)
            self._join(j, b)
            b = a
        t = self.lt[path.last]
        if path.last == self.by_type[t][-1]:
            self._add_level(t)

    def lower_bound(self) -> float:
        """Dual objective: sum_j min_b (cost(j, b) + v_b) - sum_b sum_r (v_b - ladder_r)^+ <= optimum.

        Levels not materialised take the price of the cheapest machine (no penalty), so the minimum also
        runs over the position just above each type's top, the cheapest of them.
        """
        price = -np.array(self.q)
        lk, lt = np.round(self.lk), np.array(self.lt, dtype=np.int64)  # the true costs: TIE left out
        tops = [(t, lv[-1]) for t, lv in enumerate(self.by_type) if lv]
        extra_k = np.array([round(self.lk[top]) + 1.0 for _, top in tops])
        extra_t = np.array([t for t, _ in tops], dtype=np.int64)
        extra_v = np.array([self.ladder[t][0] for t, _ in tops])
        cost = np.concatenate(
            [lk * self.proc_np[:, lt] + price, extra_k * self.proc_np[:, extra_t] + extra_v], axis=1
        )
        total = float(cost.min(axis=1).sum())
        for b in range(len(lt)):
            lad = np.array(self.ladder[self.lt[b]][:-1])
            total -= float(np.clip(price[b] - lad, 0.0, None).sum())
        return total


@dataclass(frozen=True, slots=True)
class _Path:
    """A shortest augmenting path: the level where it leaves to the sink, its length, the levels settled
    on the way (with their distances), and for each level reached, the level and job that reached it."""

    last: int
    length: float
    settled: list[tuple[int, float]]
    pred: dict[int, tuple[int, int]]


def solve(inst: Instance, order: Sequence[int] | None = None, search: Search = "auto",
          certify: bool = True) -> Solution:
    """Exact minimum of the AlloX matching, via levels and successive shortest paths (module docstring).

    `order` is the insertion order of the jobs (any order gives the optimum; the default, longest best-case
    time first, needs the fewest path searches). `search` picks the path search ("auto": dense while the
    levels are few). The returned lower bound certifies the result; `certify=False` skips computing it (a
    quarter of a small solve's time), for callers that only need the plan.
    """
    n, types = inst.proc.shape
    if n == 0:
        return Solution(np.zeros(0, np.int64), np.zeros(0, np.int64), 0.0, 0.0)
    ladders = [sorted(inst.avail[inst.machine_type == t].tolist()) for t in range(types)]
    proc = inst.proc.tolist()
    for t, lad in enumerate(ladders):  # a type without machines is as good as absent
        if not lad:
            for row in proc:
                row[t] = INF
    if search == "auto":  # levels per type are at most ceil(n / machines) + 1
        estimate = sum(-(-n // len(lad)) + 1 for lad in ladders if lad)
        search = "dense" if estimate * estimate <= max(2500, 12 * n) else "sparse"
    levels = _Levels(proc, ladders, dense=search == "dense")
    if order is None:
        order = np.argsort(-inst.proc.min(axis=1), kind="stable").tolist()
    for j in order:
        levels.insert(int(j))
    machine = np.empty(n, np.int64)
    position = np.empty(n, np.int64)
    for t in range(types):  # seat level (t, k)'s jobs on the type's machines by increasing availability
        ids = np.flatnonzero(inst.machine_type == t)
        ranked = ids[np.lexsort((ids, inst.avail[ids]))]
        for b in levels.by_type[t]:
            seated = sorted(levels.jobs[b], key=lambda j: (proc[j][t], j))
            machine[seated] = ranked[: len(seated)]
            position[seated] = round(levels.lk[b])
    sol = _compact(inst, machine, position)
    bound = levels.lower_bound() - float(inst.arrival.sum()) if certify else None
    return Solution(sol.machine, sol.position, sol.objective, bound)
