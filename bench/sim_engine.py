#!/usr/bin/env python3
"""Benchmark: the simulator's engine beside the fastest plain FIFO event loops we can write and the object floor,
same schedule, same JCTs.

Workload (seeded numpy Generator): single-node CPU jobs (1-16 of 32 cores, 4 GB per core, log-normal
durations, median 20 min, capped at 24 h), Poisson arrivals on 1,000 nodes of 32 CPUs / 128 GB, strict FIFO
(no backfill), first fit by node name.

- `queue`: offered load 1.05, so a queue forms and grows to thousands of pending jobs: FIFO's head is tried at
  every finish, which is where a scheduler spends its time.
- `no_queue`: offered load 0.7, almost every job starts on arrival.

Ours: `Engine(cluster, fifo, jobs).run()` plus the JCTs, the whole user-visible run (building each job as the
engine reads it from the stream, as a trace is read; the engine's checks, the view the policy reads, the shared
decision cycle; not the one-off import of the policy module).

Baselines: plain Python on flat lists, built to win, each computing the same schedule. At each instant the
finishes are applied, then the arrivals join the queue, then queue heads start on their first fitting node (lowest
index, the names' order) until one fits nowhere. `ratio` is taken against whichever measures fastest:
- `bitset_loop` (the fastest in every run so far): a heap of (finish, node, CPUs); the queue is the range of
  jobs arrived but not started (strict FIFO starts jobs in submit order); for each CPU count a job asks, a Python
  int whose bit i says node i has that many CPUs free. First fit is the lowest set bit (two big-int operations on
  1,000 bits); a start or finish flips its node's bit in the sets of the requested counts its free CPUs crossed.
- `segment_tree_loop`: the same, with a max segment tree over the free CPUs per node instead of the bit sets:
  first fit descends ten levels, an update climbs them (stopping once a parent is unchanged). The issue's line:
  the judged baseline must be at least as fast as this one.
- `minimal_loop`: the previous baseline, kept as a reference: a heap of (finish, job), a FIFO deque, free CPU
  and memory per node, first fit by a scan, a blocked head retried only on the nodes freed since.
Memory never binds in this workload, and the first two loops check that it cannot before they run (inside their
timed run: one pass over the jobs): when no job asks more memory per CPU than a node holds (4 GB of 4 GB here),
every node keeps at least its free CPUs' share of memory free (equal at the start; a start takes at most its
CPUs' share, a finish gives back what it took), so a node with c CPUs free has room for any job asking c CPUs.
Why the comparison is fair: every loop gets the workload as Python lists converted inside its timed run, as ours
gets its jobs from the stream; none builds job objects or records; all run in their own child process under the
same collector settings; and every one must give JCTs bit-identical to the engine's (asserted), so none can win by
computing less. (A check at start-up also runs the three loops on a workload of whole-second times, where
finishes, arrivals and starts often share an instant, and asserts they agree.)

`object_floor`: what any engine with our interface pays before it schedules anything — the same jobs read from the
stream as `SimJob`s, an arrival and a finish per job through a heap of (time, priority, sequence, job) and one
`JobRecord` per job; no node, no queue, no policy.

Each run is its own child process (one after the other, never two at once), so CPU time (`time.process_time`)
and peak RSS (`ru_maxrss`) are the run's alone; targets are judged on CPU time. Reported: `ratio` = ours / the
fastest baseline's CPU seconds, and `floor_ratio` = ours / the object floor's. Targets (issue 36's acceptance):
ours within 3x of the object floor at 100k and 1M jobs, queue and no_queue; at 1M jobs a peak RSS under 700 MB;
and the baseline at least as fast as a segment-tree first-fit FIFO (`holds` judges the first two; the third
holds by construction, the segment-tree loop being one of the candidates, and `baseline_vs_segment_tree` =
fastest / segment-tree CPU seconds says by how much).

Usage: python3 bench/sim_engine.py [--jobs 100000] [--million] [--only queue|no_queue]
  (--million adds both cases at 1,000,000 jobs; prints one JSON object)
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from itertools import repeat
from operator import le, mul
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from slurmx.core.resources import Resources
from slurmx.policies import make_policy
from slurmx.sim.cluster import ModelCluster, NodeShape, PartitionShape
from slurmx.sim.collector import fewer_collections
from slurmx.sim.config import EngineOptions
from slurmx.sim.engine import Engine
from slurmx.sim.jobs import SimJob, SimVariant
from slurmx.sim.metrics import JobRecord

SEED = 20_240_601
NODES = 1000
NODE_CPUS, NODE_MEM = 32, 131_072
LOADS = {"queue": 1.05, "no_queue": 0.7}
FLOOR_TARGET = 3.0  # ours / object floor, CPU seconds
RSS_TARGET_MB = 700.0  # at 1M jobs


def workload(n: int, load: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted submit times, CPUs and durations of `n` jobs at offered load `load` on the cluster."""
    rng = np.random.default_rng(SEED)
    cpus = rng.choice(np.array([1, 2, 4, 8, 16]), size=n, p=[0.3, 0.2, 0.2, 0.2, 0.1])
    duration = np.minimum(np.exp(rng.normal(np.log(1200.0), 1.2, n)), 86_400.0) + 1.0
    rate = load * NODE_CPUS * NODES / float((cpus * duration).mean())
    submit = np.cumsum(rng.exponential(1.0 / rate, n))
    return submit, cpus, duration


def stream(submit: np.ndarray, cpus: np.ndarray, duration: np.ndarray,
           estimate: np.ndarray | None = None) -> Iterator[SimJob]:
    """The workload as the engine reads a trace: one job at a time, in submit order (with its time limit, the
    scheduler's estimate, when `estimate` is given; else the scheduler knows the run time)."""
    requests = {int(c): Resources(int(c), 4096 * int(c)) for c in np.unique(cpus)}  # as a loader shares them
    for first in range(0, len(submit), 4096):  # a chunk at a time: a million-job list of floats is 32 MB
        chunk = slice(first, first + 4096)
        times = submit[chunk].tolist()
        limits = estimate[chunk].tolist() if estimate is not None else [None] * len(times)
        rows = zip(times, cpus[chunk].tolist(), duration[chunk].tolist(), limits, strict=True)
        for i, (t, c, d, e) in enumerate(rows, start=first):
            yield SimJob(f"c{i}", f"u{i % 50}", t, {"cpu": SimVariant("cpu", requests[c], d, e)})


def run_ours(n: int, load: float) -> tuple[np.ndarray, dict[str, Any]]:
    submit, cpus, duration = workload(n, load)
    policy = make_policy("fifo")  # imports the policy module once: not the run's cost
    cpu0 = time.process_time()
    wall0 = time.perf_counter()
    cluster = ModelCluster([PartitionShape("cpu", "cpu", (NodeShape(NODES, Resources(NODE_CPUS, NODE_MEM), "c"),))])
    result = Engine(cluster, policy, stream(submit, cpus, duration), EngineOptions(mode="event")).run()
    jct = np.array([r.finish - r.submit for r in result.jobs])  # records come in job (submission) order
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    s = result.stats
    return jct, {"cpu_s": cpu, "wall_s": wall, "events": s.events, "policy_calls": s.policy_calls,
                 "max_pending": s.max_pending}


Loop = Callable[[list[float], list[int], list[int], list[float]], list[float]]


def memory_never_binds(cpus: list[int], mem: list[int]) -> None:
    """Raise unless no job asks more memory per CPU than a node holds: then a node with c CPUs free has room for
    any job asking c CPUs (see the module docstring), and first fit may look at CPUs alone."""
    if not all(map(le, map(mul, mem, repeat(NODE_CPUS)), map(mul, cpus, repeat(NODE_MEM)))):
        raise ValueError("a job asks more memory per CPU than a node holds: first fit must check memory too")


def bitset_loop(submit: list[float], cpus: list[int], mem: list[int], duration: list[float]) -> list[float]:
    """Strict FIFO, first fit by node index from one bit set of fitting nodes per requested CPU count; returns each
    job's finish time (jobs in submit order)."""
    memory_never_binds(cpus, mem)
    n = len(submit)
    sizes = sorted(set(cpus))
    fits = [0] * (NODE_CPUS + 1)  # fits[c], c a requested count: bit i set when node i has c CPUs free
    for c in sizes:
        fits[c] = (1 << NODES) - 1
    # crossed[lo][hi]: the requested counts k with lo < k <= hi, whose sets change when a node's free CPUs go
    # from lo to hi or back
    crossed = [[tuple(k for k in sizes if lo < k <= hi) for hi in range(NODE_CPUS + 1)] for lo in range(NODE_CPUS + 1)]
    free = [NODE_CPUS] * NODES
    finish = [0.0] * n
    heap: list[tuple[float, int, int]] = []  # (finish time, node, CPUs): ties in any order, applied as one instant
    push, pop = heapq.heappush, heapq.heappop
    arrivals = [*submit, float("inf")]
    head = arrived = 0  # the queue: jobs head .. arrived - 1 (strict FIFO starts jobs in submit order)
    while arrived < n or heap:
        t = arrivals[arrived]
        if heap and heap[0][0] <= t:  # finishes first, then arrivals, as the engine orders an instant
            t = heap[0][0]
            while heap and heap[0][0] == t:
                _, node, c = pop(heap)
                a = free[node]
                free[node] = b = a + c
                bit = 1 << node
                for k in crossed[a][b]:
                    fits[k] ^= bit
        while arrivals[arrived] == t:
            arrived += 1
        while head < arrived:
            c = cpus[head]
            m = fits[c]
            if not m:  # the head fits nowhere: it waits for a finish
                break
            low = m & -m  # the first fitting node's bit
            node = low.bit_length() - 1
            a = free[node]
            free[node] = b = a - c
            for k in crossed[b][a]:
                fits[k] ^= low
            finish[head] = end = t + duration[head]
            push(heap, (end, node, c))
            head += 1
    return finish


def max_tree() -> tuple[int, list[int]]:
    """An empty cluster's max segment tree over the free CPUs per node: (leaf offset, tree); tree[v] is the most
    free CPUs on a node under v, node i is leaf offset + i (a baseline's own first-fit index)."""
    size = 1 << (NODES - 1).bit_length()
    tree = [-1] * (2 * size)
    tree[size:size + NODES] = [NODE_CPUS] * NODES
    for v in range(size - 1, 0, -1):
        tree[v] = max(tree[2 * v], tree[2 * v + 1])
    return size, tree


def segment_tree_loop(submit: list[float], cpus: list[int], mem: list[int], duration: list[float]) -> list[float]:
    """Strict FIFO, first fit by node index from a max segment tree over the free CPUs per node; returns each
    job's finish time (jobs in submit order)."""
    memory_never_binds(cpus, mem)
    n = len(submit)
    size, tree = max_tree()
    finish = [0.0] * n
    heap: list[tuple[float, int, int]] = []  # (finish time, node, CPUs)
    push, pop = heapq.heappush, heapq.heappop
    arrivals = [*submit, float("inf")]
    head = arrived = 0
    while arrived < n or heap:
        t = arrivals[arrived]
        if heap and heap[0][0] <= t:
            t = heap[0][0]
            while heap and heap[0][0] == t:
                _, node, c = pop(heap)
                v = size + node
                tree[v] = free = tree[v] + c
                v >>= 1
                while v and tree[v] < free:  # a node's free CPUs grew: raise its ancestors up to them
                    tree[v] = free
                    v >>= 1
        while arrivals[arrived] == t:
            arrived += 1
        while head < arrived:
            c = cpus[head]
            if tree[1] < c:
                break
            v = 1
            while v < size:  # the leftmost leaf with c free
                v <<= 1
                if tree[v] < c:
                    v += 1
            tree[v] -= c
            node = v - size
            v >>= 1
            while v:
                left, right = tree[2 * v], tree[2 * v + 1]
                best = left if left >= right else right
                if tree[v] == best:
                    break
                tree[v] = best
                v >>= 1
            finish[head] = end = t + duration[head]
            push(heap, (end, node, c))
            head += 1
    return finish


def minimal_loop(submit: list[float], cpus: list[int], mem: list[int], duration: list[float]) -> list[float]:
    """Strict FIFO with first fit by node index, found by a scan (free CPU and memory per node); returns each job's
    finish time (jobs in submit order)."""
    n = len(submit)
    free_cpu = [NODE_CPUS] * NODES
    free_mem = [NODE_MEM] * NODES
    finish = [0.0] * n
    where = [0] * n
    heap: list[tuple[float, int]] = []  # (finish time, job): the job index breaks ties, as any order would do
    queue: deque[int] = deque()
    freed: list[int] = []  # nodes released since the head was last found blocked
    blocked = False
    nxt = 0
    push, pop = heapq.heappush, heapq.heappop
    inf = float("inf")
    while nxt < n or heap:
        t = min(heap[0][0] if heap else inf, submit[nxt] if nxt < n else inf)
        while heap and heap[0][0] == t:  # finishes first, then arrivals, as the engine orders an instant
            j = pop(heap)[1]
            node = where[j]
            free_cpu[node] += cpus[j]
            free_mem[node] += mem[j]
            if blocked:
                freed.append(node)
        while nxt < n and submit[nxt] == t:
            queue.append(nxt)
            nxt += 1
        while queue:
            j = queue[0]
            c, m = cpus[j], mem[j]
            if blocked:  # only a node freed since can have room: every other one was too full and still is
                fits = [i for i in freed if free_cpu[i] >= c and free_mem[i] >= m]
                node = min(fits) if fits else -1
            else:
                node = next((i for i in range(NODES) if free_cpu[i] >= c and free_mem[i] >= m), -1)
            if node < 0:
                blocked = True
                freed.clear()
                break
            blocked = False
            queue.popleft()
            free_cpu[node] -= c
            free_mem[node] -= m
            where[j] = node
            finish[j] = end = t + duration[j]
            push(heap, (end, j))
    return finish


def run_floor(n: int, load: float) -> tuple[np.ndarray, dict[str, Any]]:
    """The object-model floor (see the module docstring): each job finishes at submit + duration, unqueued."""
    submit, cpus, duration = workload(n, load)
    cpu0 = time.process_time()
    wall0 = time.perf_counter()
    heap: list[tuple[float, int, int, SimJob]] = []
    push, pop = heapq.heappush, heapq.heappop
    jobs = stream(submit, cpus, duration)
    first = next(jobs)
    push(heap, (first.submit_time, 2, 0, first))
    records: list[JobRecord] = []
    seq = 1
    while heap:
        t, priority, _, job = pop(heap)
        if priority == 2:  # an arrival: read the next job, and this one's finish
            following = next(jobs, None)
            if following is not None:
                push(heap, (following.submit_time, 2, seq, following))
            push(heap, (t + job.variants["cpu"].duration_s, 0, seq + 1, job))
            seq += 2
        else:
            records.append(JobRecord(job.job_id, job.user, job.job_class, job.submit_time, job.submit_time, t,
                                     t - job.submit_time, "cpu", 0))
    jct = np.array([r.finish - r.submit for r in records])
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return jct, {"cpu_s": cpu, "wall_s": wall, "events": 2 * n}


BASELINES: dict[str, Loop] = {"bitset_loop": bitset_loop, "segment_tree_loop": segment_tree_loop,
                               "minimal_loop": minimal_loop}


def run_baseline(loop: Loop, n: int, load: float) -> tuple[np.ndarray, dict[str, Any]]:
    submit_a, cpus_a, duration_a = workload(n, load)
    cpu0 = time.process_time()
    wall0 = time.perf_counter()
    submit, cpus, duration = submit_a.tolist(), cpus_a.tolist(), duration_a.tolist()
    finish = loop(submit, cpus, [4096 * c for c in cpus], duration)
    jct = np.array(finish) - submit_a
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return jct, {"cpu_s": cpu, "wall_s": wall, "events": 2 * n}


def loops_agree() -> None:
    """The baselines on 20,000 jobs with whole-second times on the bench's cluster, where finishes, arrivals and
    starts often share an instant: every loop must give the same finish times (the main workload, with times in
    float seconds, almost never ties)."""
    rng = np.random.default_rng(SEED)
    n = 20_000
    submit = np.sort(rng.integers(0, 3_000, n)).astype(float).tolist()
    cpus = rng.choice(np.array([1, 2, 4, 8, 16, 32]), n).tolist()
    duration = rng.integers(1, 400, n).astype(float).tolist()
    mem = [4096 * c for c in cpus]
    finishes = {name: loop(submit, cpus, mem, duration) for name, loop in BASELINES.items()}
    if any(f != finishes["minimal_loop"] for f in finishes.values()):
        raise SystemExit("the baseline loops disagree on a workload with ties")


def print_run(jct: np.ndarray, row: dict[str, Any]) -> None:
    """A child's figures, the JCTs' digest and its peak RSS, as one JSON line on stdout."""
    row["jct_sha256"] = hashlib.sha256(np.ascontiguousarray(jct, dtype=np.float64).tobytes()).hexdigest()
    row["jct_mean_s"] = float(jct.mean())
    row["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(row))


def spawn_run(script: str, args: list[str]) -> dict[str, Any]:
    """Run `script --child ...` in its own process (so CPU time and peak RSS are that run's alone)."""
    out = subprocess.run([sys.executable, script, "--child", *args], check=True, capture_output=True, text=True)
    row: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return row


def same_jcts(ours: dict[str, Any], base: dict[str, Any], what: str) -> None:
    if ours["jct_sha256"] != base["jct_sha256"]:
        raise SystemExit(f"{what}: the engine and the baseline gave different JCTs "
                         f"(means {ours['jct_mean_s']} vs {base['jct_mean_s']})")


def _rounded(row: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}


def case_row(case: str, load: float, ours: tuple[str, dict[str, Any]], base: tuple[str, dict[str, Any]],
             target: str, holds: bool | None) -> dict[str, Any]:
    """One case of a bench's printed JSON with one baseline (bench/easy_backfill.py): (name, figures) of ours and
    of the baseline, with the same JCTs."""
    (ours_name, ours_row), (base_name, base_row) = ours, base
    return {
        "case": case,
        "load": load,
        "ours": {"name": ours_name, **_rounded(ours_row),
                 "events_per_cpu_s": round(ours_row["events"] / ours_row["cpu_s"])},
        "baseline": {"name": base_name, **_rounded(base_row)},
        "same_jct": True,
        "ratio": round(ours_row["cpu_s"] / base_row["cpu_s"], 2),
        "cpu_seconds": round(ours_row["cpu_s"], 3),
        "target": target,
        "holds": holds,
    }


def child(which: str, n: int, case: str) -> None:
    """One run in this process, under the cyclic collector's settings the engine runs with (the same for every
    run, so the comparison is of the code alone)."""
    with fewer_collections():
        if which == "ours":
            print_run(*run_ours(n, LOADS[case]))
        elif which == "floor":
            print_run(*run_floor(n, LOADS[case]))
        else:
            print_run(*run_baseline(BASELINES[which], n, LOADS[case]))


def _figures(row: dict[str, Any]) -> dict[str, Any]:
    return {k: round(row[k], 3) for k in ("cpu_s", "wall_s", "peak_rss_mb")}


def measure(case: str, n: int) -> dict[str, Any]:
    ours, floor = (spawn_run(__file__, [which, "--jobs", str(n), "--only", case]) for which in ("ours", "floor"))
    bases = {name: spawn_run(__file__, [name, "--jobs", str(n), "--only", case]) for name in BASELINES}
    for name, row in bases.items():
        same_jcts(ours, row, f"{case} at {n} jobs ({name})")
    fastest = min(bases, key=lambda name: bases[name]["cpu_s"])
    floor_ratio = ours["cpu_s"] / floor["cpu_s"]
    target = f"ours CPU <= {FLOOR_TARGET:g}x object_floor, same JCTs as every baseline"
    holds = floor_ratio <= FLOOR_TARGET
    if n >= 1_000_000:
        target += f", peak RSS < {RSS_TARGET_MB:.0f} MB"
        holds = holds and ours["peak_rss_mb"] < RSS_TARGET_MB
    return {
        "case": f"fifo_{case}_{n}_jobs_{NODES}_nodes",
        "load": LOADS[case],
        "ours": {"name": "Engine + fifo", **_rounded(ours), "events_per_cpu_s": round(ours["events"] / ours["cpu_s"])},
        "baselines": {name: _figures(row) for name, row in bases.items()},
        "fastest_baseline": fastest,
        "baseline_vs_segment_tree": round(bases[fastest]["cpu_s"] / bases["segment_tree_loop"]["cpu_s"], 2),
        "object_floor": _figures(floor),
        "same_jct": True,
        "ratio": round(ours["cpu_s"] / bases[fastest]["cpu_s"], 2),
        "floor_ratio": round(floor_ratio, 2),
        "cpu_seconds": round(ours["cpu_s"], 3),
        "target": target,
        "holds": holds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--million", action="store_true", help="also run 1,000,000 jobs (minutes of CPU)")
    parser.add_argument("--only", choices=sorted(LOADS))
    parser.add_argument("--child", choices=["ours", "floor", *BASELINES], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.jobs, args.only)
        return
    loops_agree()
    names = [args.only] if args.only else ["queue", "no_queue"]
    sizes = [args.jobs] + ([1_000_000] if args.million else [])
    cases = [measure(case, n) for n in sizes for case in names]
    print(json.dumps({
        "name": "sim_engine",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": sys.platform,
                    "numpy": np.__version__, "load_average_1m": round(os.getloadavg()[0], 2)},
        "cases": cases,
        "holds": all(c["holds"] for c in cases),
    }))


if __name__ == "__main__":
    main()
