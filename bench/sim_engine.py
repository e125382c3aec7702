#!/usr/bin/env python3
"""Benchmark: the simulator's engine beside a minimal heap-based event loop, same schedule, same JCTs.

Workload (seeded numpy Generator): single-node CPU jobs (1-16 of 32 cores, 4 GB per core, log-normal
durations, median 20 min, capped at 24 h), Poisson arrivals on 1,000 nodes of 32 CPUs / 128 GB, strict FIFO
(no backfill), first fit by node name.

- `queue`: offered load 1.05, so a queue forms and grows to thousands of pending jobs: FIFO's head is tried at
  every finish, which is where a scheduler spends its time.
- `no_queue`: offered load 0.7, almost every job starts on arrival.

Ours: `Engine(cluster, fifo, jobs).run()` plus the JCTs, the whole user-visible run (building each job as the
engine reads it from the stream, as a trace is read; the engine's checks, the view the policy reads, the shared
decision cycle; not the one-off import of the policy module). Baseline,
`minimal_loop`: the plainest fast Python we can write for the same model — a heap of finish events, the arrival
stream as a sorted list, a FIFO deque, free CPU and memory counters per node; at each instant finishes then
arrivals are applied, then queue heads start on their first fitting node until one does not fit; a blocked head
is retried only on the nodes freed since.
Both must give bit-identical JCTs (asserted). Beside them, `object_floor`: what any engine with our interface
pays before it schedules anything — the same jobs read from the stream as `SimJob`s, an arrival and a finish per
job through a heap of (time, priority, sequence, job) and one `JobRecord` per job; no node, no queue, no policy.
Its ratio to the minimal loop is the lowest ratio such an engine can reach on this machine.
Each run is its own child process (one after the other, never two at once), so CPU time (`time.process_time`)
and peak RSS (`ru_maxrss`) are the run's alone; targets are judged on CPU time: ours within 2x of the minimal
loop (`ratio` = ours / baseline CPU seconds).

Usage: python3 bench/sim_engine.py [--jobs 100000] [--million] [--only queue|no_queue]
  (--million adds both cases at 1,000,000 jobs, with the peak RSS target < 1 GB; prints one JSON object)
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
from collections.abc import Iterator
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
RATIO_TARGET = 2.0
RSS_TARGET_MB = 1024.0


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


def minimal_loop(submit: list[float], cpus: list[int], mem: list[int], duration: list[float]) -> list[float]:
    """Strict FIFO with first fit by node index; returns each job's finish time (jobs in submit order)."""
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


def run_baseline(n: int, load: float) -> tuple[np.ndarray, dict[str, Any]]:
    submit_a, cpus_a, duration_a = workload(n, load)
    cpu0 = time.process_time()
    wall0 = time.perf_counter()
    submit, cpus, duration = submit_a.tolist(), cpus_a.tolist(), duration_a.tolist()
    finish = minimal_loop(submit, cpus, [4096 * c for c in cpus], duration)
    jct = np.array(finish) - submit_a
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return jct, {"cpu_s": cpu, "wall_s": wall, "events": 2 * n}


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
             target: str, holds: bool | None, floor: dict[str, Any] | None = None) -> dict[str, Any]:
    """One case of the printed JSON: (name, figures) of ours and of the baseline, with the same JCTs, and the
    object-model floor's figures when measured."""
    (ours_name, ours_row), (base_name, base_row) = ours, base
    extra = {} if floor is None else {"object_floor": {
        "cpu_s": round(floor["cpu_s"], 3), "wall_s": round(floor["wall_s"], 3),
        "peak_rss_mb": round(floor["peak_rss_mb"], 3), "ratio": round(floor["cpu_s"] / base_row["cpu_s"], 2)}}
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
        **extra,
    }


def child(which: str, n: int, case: str) -> None:
    """One run in this process, under the cyclic collector's settings the engine runs with (the same for every
    run, so the comparison is of the code alone)."""
    with fewer_collections():
        print_run(*{"ours": run_ours, "baseline": run_baseline, "floor": run_floor}[which](n, LOADS[case]))


def measure(case: str, n: int) -> dict[str, Any]:
    ours, base, floor = (spawn_run(__file__, [which, "--jobs", str(n), "--only", case])
                         for which in ("ours", "baseline", "floor"))
    same_jcts(ours, base, f"{case} at {n} jobs")
    ratio = ours["cpu_s"] / base["cpu_s"]
    million = n >= 1_000_000
    target = f"ours CPU <= {RATIO_TARGET}x minimal_loop, same JCTs"
    holds = ratio <= RATIO_TARGET
    if million:
        target += f", peak RSS < {RSS_TARGET_MB:.0f} MB"
        holds = holds and ours["peak_rss_mb"] < RSS_TARGET_MB
    return case_row(f"fifo_{case}_{n}_jobs_{NODES}_nodes", LOADS[case], ("Engine + fifo", ours),
                    ("minimal_loop", base), target, holds, floor)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--million", action="store_true", help="also run 1,000,000 jobs (minutes of CPU)")
    parser.add_argument("--only", choices=sorted(LOADS))
    parser.add_argument("--child", choices=["ours", "baseline", "floor"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.jobs, args.only)
        return
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
