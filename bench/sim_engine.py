#!/usr/bin/env python3
"""Benchmark: simulator events per second on cluster-scale FIFO runs, each beside a named baseline.

Cases (synthetic jobs generated here with a seeded numpy Generator; FIFO without backfill):

- `fifo_100k_jobs_1000_nodes` — event mode, 100,000 single-node CPU jobs (1-16 of 32 cores, 4 GB per core,
  log-normal durations, median 20 min, capped at 24 h) arriving as a Poisson stream at an offered load of
  0.7 on 1,000 nodes of 32 CPUs / 128 GB. Target: the whole run (including building the engine) < 30 s.
  Each run reports wall and CPU seconds, and the machine block the load average: on a shared machine the
  CPU time is what the run itself cost.
- `fitgpp_65536_jobs_84_nodes` — tick mode (60 s), FitGpp-sized: 65,536 jobs, 30 % TE (truncated normal,
  mean 5 min, cap 30 min) and 70 % BE (mean 30 min, cap 24 h), 1/2/4/8 GPUs with 4 CPUs and 32 GB per GPU,
  on 84 nodes of 32 CPUs / 256 GB / 8 GPUs, Poisson arrivals at an offered GPU load of 0.8. Target < 20 s.
- `fifo_100k_jobs_1000_nodes_tick60` — the first workload decided every 60 s, as a periodic daemon would.

Baseline, `naive_view`: the same engine rebuilding every `Node` and `Group` of the policy's snapshot on
every policy call (`view: naive`) instead of reusing the cached immutable objects that did not change. It
runs on a smaller job count (same shape and load) so it finishes; ours is timed on that count too, and both
must give identical metrics. `policy_s` is the time spent inside `policy.schedule` (the rest is the engine,
including building the snapshots). A run still going after `--budget` x its target is stopped and reported
with `finished: false` and how far it got.

Usage: python3 bench/sim_engine.py [--scale 0.1] [--only cpu|fitgpp|cpu-tick] [--budget 3]
  (prints one JSON object on stdout)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import replace
from typing import Any

import numpy as np

from slurmx.core.model import JobClass
from slurmx.core.resources import Resources
from slurmx.policies import make_policy
from slurmx.sim.cluster import ModelCluster, NodeShape, PartitionShape
from slurmx.sim.config import EngineOptions
from slurmx.sim.engine import Engine, Progress
from slurmx.sim.jobs import SimJob, SimVariant
from slurmx.sim.metrics import SimResult, compute_metrics

SEED = 20_240_601


def cpu_cluster(nodes: int) -> ModelCluster:
    return ModelCluster([PartitionShape("cpu", "cpu", (NodeShape(nodes, Resources(32, 131_072), "c"),))])


def gpu_cluster(nodes: int) -> ModelCluster:
    return ModelCluster([PartitionShape("gpu", "gpu", (NodeShape(nodes, Resources(32, 262_144, {"gpu": 8}), "g"),))])


def _arrivals(rng: np.random.Generator, work: np.ndarray, capacity: float, load: float) -> np.ndarray:
    """Poisson arrival times whose offered load (work per second / capacity) is `load`."""
    rate = load * capacity / float(work.mean())
    return np.cumsum(rng.exponential(1.0 / rate, work.size))


def cpu_jobs(n: int, nodes: int, load: float = 0.7) -> list[SimJob]:
    rng = np.random.default_rng(SEED)
    cpus = rng.choice(np.array([1, 2, 4, 8, 16]), size=n, p=[0.3, 0.2, 0.2, 0.2, 0.1])
    duration = np.minimum(np.exp(rng.normal(np.log(1200.0), 1.2, n)), 86_400.0) + 1.0
    submit = _arrivals(rng, cpus * duration, 32.0 * nodes, load)
    return [
        SimJob(f"c{i}", f"u{i % 50}", float(submit[i]),
               {"cpu": SimVariant("cpu", Resources(int(cpus[i]), 4096 * int(cpus[i])), float(duration[i]))})
        for i in range(n)
    ]


def _truncnorm(rng: np.random.Generator, mean: float, sd: float, low: float, high: float, n: int) -> np.ndarray:
    out = rng.normal(mean, sd, n)
    bad = (out < low) | (out > high)
    while bad.any():
        out[bad] = rng.normal(mean, sd, int(bad.sum()))
        bad = (out < low) | (out > high)
    return out


def fitgpp_jobs(n: int, nodes: int, load: float = 0.8) -> list[SimJob]:
    rng = np.random.default_rng(SEED + 1)
    te = rng.random(n) < 0.3
    duration = np.where(te, _truncnorm(rng, 300.0, 300.0, 60.0, 1800.0, n),
                        _truncnorm(rng, 1800.0, 3600.0, 60.0, 86_400.0, n))
    gpus = rng.choice(np.array([1, 2, 4, 8]), size=n, p=[0.4, 0.3, 0.2, 0.1])
    grace = np.rint(_truncnorm(rng, 180.0, 120.0, 0.0, 1200.0, n)).astype(int)
    submit = _arrivals(rng, gpus * duration, 8.0 * nodes, load)
    jobs = []
    for i in range(n):
        g = int(gpus[i])
        variant = SimVariant("gpu", Resources(4 * g, 32_768 * g, {"gpu": g}), float(duration[i]))
        jobs.append(SimJob(f"f{i}", f"u{i % 20}", float(submit[i]), {"gpu": variant},
                           job_class=JobClass.TE if te[i] else JobClass.BE, grace_s=int(grace[i])))
    return jobs


class _OverBudget(Exception):
    pass


def timed_run(cluster: ModelCluster, jobs: list[SimJob], options: EngineOptions,
              budget_s: float | None = None) -> tuple[SimResult | None, float, float, Progress | None]:
    """Wall and CPU time of building the engine (checks, estimates) and running it; the jobs are built
    beforehand. CPU time is this process's: on a machine other work shares, it is what the run itself cost.

    With a budget, a run still going after `budget_s` is stopped at the next progress report: the result is
    None and the last `Progress` tells how far it got.
    """
    started = time.perf_counter()
    cpu_started = time.process_time()
    last: list[Progress] = []

    def watch(p: Progress) -> None:
        last[:] = [p]
        if budget_s is not None and time.perf_counter() - started > budget_s:
            raise _OverBudget

    engine = Engine(cluster, make_policy("fifo"), jobs, options, watch)
    try:
        result: SimResult | None = engine.run()
    except _OverBudget:
        result = None
    wall = time.perf_counter() - started
    return result, wall, time.process_time() - cpu_started, (last[0] if last else None)


def _row(result: SimResult | None, wall: float, cpu: float, jobs: int,
         partial: Progress | None = None) -> dict[str, Any]:
    if result is None:
        assert partial is not None
        return {"jobs": jobs, "finished": False, "stopped_after_s": round(wall, 1),
                "jobs_done": partial.done, "sim_time_s": round(partial.now), "events": partial.events,
                "events_per_s": round(partial.events / wall)}
    stats = result.stats
    return {
        "jobs": jobs,
        "finished": True,
        "events": stats.events,
        "policy_calls": stats.policy_calls,
        "max_pending": stats.max_pending,
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "events_per_s": round(stats.events / wall),
        "policy_s": round(stats.policy_wall_s, 3),
        "engine_s": round(wall - stats.policy_wall_s, 3),
    }


def case(name: str, make_cluster: Any, make_jobs: Any, nodes: int, n: int, small_n: int, options: EngineOptions,
         target_s: float, budget_s: float) -> dict[str, Any]:
    jobs = make_jobs(n, nodes)
    result, wall, cpu, partial = timed_run(make_cluster(nodes), jobs, options, budget_s)
    small = make_jobs(small_n, nodes)
    small_ours, small_wall, small_cpu, _ = timed_run(make_cluster(nodes), small, options)
    naive_options = replace(options, view="naive")
    naive, naive_wall, naive_cpu, _ = timed_run(make_cluster(nodes), small, naive_options)
    assert naive is not None and small_ours is not None
    if compute_metrics(naive) != compute_metrics(small_ours):
        raise SystemExit(f"{name}: the naive and incremental views gave different results")
    out: dict[str, Any] = {
        "case": name,
        "mode": options.mode,
        "nodes": nodes,
        "ours": _row(result, wall, cpu, n, partial),
        "target_s": target_s,
        "meets_target": result is not None and wall < target_s,
    }
    if result is not None:
        metrics = compute_metrics(result)
        out["result"] = {"makespan_s": round(metrics["makespan"]), "jct_mean_s": round(metrics["jct"]["mean"]),
                         "utilisation": {k: round(v, 3) for k, v in metrics["utilisation"]["mean"].items()}}
    out["baseline"] = {"name": "naive_view", **_row(naive, naive_wall, naive_cpu, small_n)}
    out["ours_same_n"] = _row(small_ours, small_wall, small_cpu, small_n)
    out["speedup_same_n"] = round(naive_wall / small_wall, 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every job count (quick checks)")
    parser.add_argument("--only", choices=["cpu", "fitgpp", "cpu-tick"], help="run one case")
    parser.add_argument("--budget", type=float, default=3.0,
                        help="stop a run after this many times its target and report how far it got")
    args = parser.parse_args()

    def jobs(n: int) -> int:
        return max(100, int(n * args.scale))

    cases = []
    if args.only in (None, "cpu"):
        cases.append(case("fifo_100k_jobs_1000_nodes", cpu_cluster, cpu_jobs, 1000, jobs(100_000), jobs(1_000),
                          EngineOptions(mode="event"), 30.0, args.budget * 30.0))
    if args.only in (None, "fitgpp"):
        cases.append(case("fitgpp_65536_jobs_84_nodes", gpu_cluster, fitgpp_jobs, 84, jobs(65_536), jobs(8_192),
                          EngineOptions(mode="tick", period_s=60.0), 20.0, args.budget * 20.0))
    if args.only in (None, "cpu-tick"):
        cases.append(case("fifo_100k_jobs_1000_nodes_tick60", cpu_cluster, cpu_jobs, 1000, jobs(100_000),
                          jobs(1_000), EngineOptions(mode="tick", period_s=60.0), 30.0, args.budget * 30.0))
    print(json.dumps({
        "name": "sim_engine",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": sys.platform,
                    "numpy": np.__version__, "load_average_1m": round(os.getloadavg()[0], 2)},
        "cases": cases,
    }))


if __name__ == "__main__":
    main()
