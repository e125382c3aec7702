#!/usr/bin/env python3
"""Benchmark: FitGpp's victim choice at scale, and the wall time of one full reproduction set.

(a) One victim choice with 10,000 running BE jobs on 1,250 full nodes (32 CPU / 256 GB / 8 GPU, 8 jobs each)
    and one pending TE job [4, 32, 1] that fits nowhere (a few
    hundred jobs pass Eq. 2). Ours: `FitGpp.select` on the round's numpy arrays
    (target under 5 ms), and the whole `schedule(view)` call (building the round from the view, choosing,
    serving the queue) beside it. Baseline: Eqs. 1-4 as written, a pure-Python pass over the running groups
    with `Resources` arithmetic per candidate (`fits_in(node.free + request)`, Eq. 1 per job). Both must
    choose the same victim.
(b) One full set of the synthetic experiment, as `slurmx reproduce fitgpp --only main --seeds 1`: 65,536 jobs
    under FIFO, FitGpp, LRTP and RAND on 84 nodes, on all cores (target under 5 minutes). The machine is
    shared, so the load average before and after and the workers' CPU seconds are printed with it. Skip with
    --no-full-set.

Wall times are medians of several runs (time.perf_counter). Prints one JSON object on stdout.

Usage: python3 bench/fitgpp.py [--no-full-set]
"""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from slurmx.core.model import ClusterView, Group, JobClass, Node, Partition, Variant, VariantState
from slurmx.core.resources import Resources
from slurmx.policies.fitgpp import FitGpp, FitGppArgs, Round, score, size
from slurmx.reproduce import ReproOptions, run

NAIVE = "pure-Python Eqs. 1-4 over the running groups with Resources arithmetic per candidate"
GB = 1024
CAP = Resources(32, 256 * GB, {"gpu": 8})
NOW = 100_000.0


def _parts(rng: np.random.Generator, total: int, parts: int, least: int) -> list[int]:
    """`parts` whole numbers >= `least` summing to at most `total` (a node packed nearly full)."""
    spare = total - least * parts - int(rng.integers(0, 3))
    return [least + int(x) for x in rng.multinomial(max(spare, 0), np.full(parts, 1 / parts))]


def snapshot(seed: int, nodes: int, per_node: int) -> tuple[ClusterView, Group]:
    """`nodes` nodes, each packed with `per_node` running BE jobs (grace 0-20 min), and one pending TE job."""
    rng = np.random.default_rng(seed)
    node_map: dict[str, Node] = {}
    groups: dict[str, Group] = {}
    for n in range(nodes):
        name = f"n{n:05d}"
        cpus, mem, gpus = (_parts(rng, 32, per_node, 1), _parts(rng, 256, per_node, 1),
                           _parts(rng, 8, per_node, 0))
        used = Resources()
        for k in range(per_node):
            gid = f"be{n:05d}-{k}"
            request = Resources(cpus[k], mem[k] * GB, {"gpu": gpus[k]})
            used = used + request
            variant = Variant(gid, "gpu", len(groups) + 1, VariantState.RUNNING, request, "gpu", (name,),
                              estimate_s=float(rng.integers(60, 86400)), start_time=NOW - 600)
            groups[gid] = Group(gid, gid, "u", JobClass.BE, (variant,), grace_s=60 * int(rng.integers(0, 21)),
                                preemptions=int(rng.random() < 0.1), submit_time=0.0)
        node_map[name] = Node(name, ("gpu",), CAP, used, "MIXED")
    te_request = Resources(4, 32 * GB, {"gpu": 1})
    te = Group("te", "te", "u", JobClass.TE,
               (Variant("te", "gpu", None, VariantState.PENDING, te_request, "gpu", submit_time=NOW),),
               submit_time=NOW)
    groups["te"] = te
    view = ClusterView(NOW, node_map, {"gpu": Partition("gpu", tuple(node_map))}, groups, {"gpu": "gpu"})
    return view, te


def naive_victim(view: ClusterView, te: Group, args: FitGppArgs) -> str | None:
    """Eq. 4 straight from the paper: every running BE job, its node's free vector, Eq. 2, Eq. 3 (maxima over
    all running BE jobs), lowest score, ties to the lowest job id then group id."""
    te_request = te.variants[0].request
    running = [(g, v) for g in view.groups.values() if g.job_class is JobClass.BE
               for v in g.variants if v.is_occupying]
    sizes = {g.group_id: size(v.request, view.nodes[v.nodes[0]].capacity) for g, v in running}
    max_size = max(sizes.values())
    max_grace = float(max(g.grace_s for g, _ in running))
    best: tuple[float, float, str] | None = None
    for g, v in running:
        if args.max_preemptions is not None and g.preemptions >= args.max_preemptions:
            continue
        if not te_request.fits_in(view.nodes[v.nodes[0]].free + v.request):
            continue
        key = (round(score(sizes[g.group_id], float(g.grace_s), max_size, max_grace, args.s), 12),
               float(v.job_id if v.job_id is not None else np.inf), g.group_id)
        if best is None or key < best:
            best = key
    return None if best is None else best[2]


def median_s(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """Median wall seconds and median CPU seconds of this process (the machine is shared: CPU time shows
    what the code costs when other processes take the cores)."""
    wall, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu)


def victim_case() -> dict[str, Any]:
    view, te = snapshot(7, 1250, 8)
    policy = FitGpp()
    rnd = Round(view, NOW, policy.args)
    victims, notes = policy.select(te, rnd)
    assert not notes, "the snapshot must have Eq. 2 candidates (no fallback)"
    ours = rnd.gids[victims[0][0]] if victims else None
    eligible = sum(1 for g in view.groups.values() if g.job_class is JobClass.BE and g.preemptions == 0
                   and te.variants[0].request.fits_in(view.nodes[g.variants[0].nodes[0]].free + g.variants[0].request))
    naive = naive_victim(view, te, policy.args)
    select_s, select_cpu = median_s(lambda: policy.select(te, rnd), 21)  # select only reads the round
    schedule_s, schedule_cpu = median_s(lambda: policy.schedule(view, NOW), 5)
    naive_s, naive_cpu = median_s(lambda: naive_victim(view, te, policy.args), 5)
    return {
        "case": "(a) one victim choice: 10,000 running BE jobs on 1,250 nodes, one blocked TE job",
        "eq2_candidates": eligible,
        "ours": {"seconds": select_s, "cpu_seconds": select_cpu, "victim": ours,
                 "whole_schedule_call": {"seconds": schedule_s, "cpu_seconds": schedule_cpu}},
        "baseline": {"name": NAIVE, "seconds": naive_s, "cpu_seconds": naive_cpu, "victim": naive},
        "same_victim": ours == naive,
        "speedup": naive_s / select_s,
        "load_average": round(os.getloadavg()[0], 2),
        "target": "ours (select) < 5 ms, same victim",
        "holds": min(select_s, select_cpu) < 0.005 and ours == naive,
    }


def full_set_case(workers: int) -> dict[str, Any]:
    before = os.getloadavg()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = run("fitgpp", ReproOptions(quick=False, seeds=1, workers=workers, progress=False, only=("main",)))
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
    return {
        "case": "(b) one full reproduction set: 65,536 jobs x FIFO, FitGpp, LRTP, RAND on 84 nodes",
        "ours": {"seconds": wall, "workers": workers, "worker_cpu_seconds": cpu,
                 "simulated_s_summed": result.data["simulated_s"],
                 "policy_s_summed": result.data["policy_s"]},
        "load_average_before_after": [round(before[0], 2), round(os.getloadavg()[0], 2)],
        "target": "under 300 s on this machine",
        "holds": wall < 300,
    }


def main() -> None:
    cases = [victim_case()]
    if "--no-full-set" not in sys.argv[1:]:
        cases.append(full_set_case(os.cpu_count() or 1))
    print(json.dumps({
        "name": "fitgpp",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "cases": cases,
    }, indent=1))


if __name__ == "__main__":
    main()
