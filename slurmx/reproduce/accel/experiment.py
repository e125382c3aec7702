"""The accel reproduction's runs: each task (one seed of one sweep point) planned by every scheme on the
estimated times and executed on the true ones in the batch replica. Tasks in, outcomes out; the claims and
tables are `report.py`'s.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from slurmx.policies.accel_batch.baselines import mmi_schedule, sct_schedule
from slurmx.policies.accel_batch.model import BatchInstance, Schedule, schedule_from_assignment
from slurmx.policies.accel_batch.schedule import overlap_lower_bound, zhao_schedule
from slurmx.reproduce import UnknownPaper
from slurmx.reproduce.accel.batch_replica import execute, execute_stream
from slurmx.reproduce.base import ReproOptions
from slurmx.sim.parallel import parallel_map
from slurmx.sim.workloads.zhao import ZhaoParams, instances_of, zhao_batches

__all__ = [
    "COMPUTE_SPREAD",
    "EXPERIMENTS",
    "FULL",
    "QUICK",
    "SCHEMES",
    "Outcome",
    "Scale",
    "Task",
    "run_all",
    "run_task",
    "scale_of",
    "selected",
    "tasks_of",
]

EXPERIMENTS = ("fig2", "fig3", "fig4", "fig5")
SCHEMES = ("ours", "ours_johnson", "mmi", "sct")
# delta: t_ij = 0.001 s_i U[1-delta, 1+delta]: the workload's one documented default ("approximately proportional").
COMPUTE_SPREAD = ZhaoParams().compute_spread


@dataclass(frozen=True)
class Scale:
    """Sweep sizes: the paper's, or the quick ones."""

    seeds: int
    fig2_responders: int
    fig2_jobs: tuple[int, ...]
    fig3_jobs: int
    fig3_responders: tuple[int, ...]
    fig4_jobs: int
    fig4_responders: int
    fig4_batches: int
    fig4_intervals: tuple[float, ...]
    fig5_jobs: int
    fig5_responders: int
    fig5_errors: tuple[float, ...]
    middle: tuple[int, ...]  # fig2's "600-800 jobs"
    light_heavy: tuple[int, int]  # fig2's 200 and 1200 jobs


FULL = Scale(20, 50, (200, 400, 600, 800, 1000, 1200), 1000, (25, 50, 75, 100, 125, 150), 700, 50, 10,
             (0.0, 1.0, 2.0, 3.0, 4.0, 5.0), 1000, 50, (0.0, 0.1, 0.2, 0.3, 0.4, 0.5), (600, 800), (200, 1200))
QUICK = Scale(2, 10, (40, 120, 160, 240), 160, (8, 16), 120, 10, 3, (0.0, 2.5, 5.0), 160, 10, (0.0, 0.3, 0.5),
              (120, 160), (40, 240))


@dataclass(frozen=True)
class Task:
    """One seed of one sweep point."""

    experiment: str
    seed: int
    jobs: int
    responders: int
    error: float = 0.0
    batches: int = 1
    intervals: tuple[float, ...] = ()


@dataclass
class Outcome:
    """Make-spans (or throughputs per interval) of every scheme at one task, and the bound checks."""

    task: Task
    makespan: dict[str, float] = field(default_factory=dict)
    throughput: dict[str, list[float]] = field(default_factory=dict)
    bound_ratio: float = 0.0  # ours / lower bound on OPT, batches planned on true times (<= 4 by Theorem 5)
    nonoverlap_ratio: float = 0.0  # ours without overlap / T_LP (<= 2 by Theorem 2)
    solve_s: float = 0.0


def _plans(estimate: BatchInstance, seed: int) -> tuple[dict[str, Schedule], float, float]:
    """Every scheme's schedule, by the registered policies' decision functions. Ours+Johnson is
    `zhao_schedule(estimate, "johnson")` without solving the same LP twice: its assignment, Johnson's order."""
    start = time.perf_counter()
    ours, lst = zhao_schedule(estimate, "mttf")
    solve_s = time.perf_counter() - start
    plans = {
        "ours": ours,
        "ours_johnson": schedule_from_assignment(estimate, lst.assignment, "johnson"),
        "mmi": mmi_schedule(estimate),
        "sct": sct_schedule(estimate, seed),
    }
    return plans, lst.t_lp, solve_s


def run_task(task: Task) -> Outcome:
    """Generate the task's workload, plan it with every scheme on the estimates, execute on the truth."""
    params = ZhaoParams(n_batches=task.batches, jobs_per_batch=task.jobs, n_responders=task.responders,
                        compute_spread=COMPUTE_SPREAD, estimate_error=task.error)
    batches = instances_of(zhao_batches(params, task.seed))
    out = Outcome(task)
    if task.batches == 1:
        truth, estimate, _ = batches[0]
        plans, t_lp, out.solve_s = _plans(estimate, task.seed)
        for name, plan in plans.items():
            out.makespan[name] = execute(truth, plan)[0].makespan
        if task.error == 0.0:
            out.bound_ratio = out.makespan["ours"] / overlap_lower_bound(truth, t_lp)
            p = truth.nonoverlap_s
            loads = np.bincount(plans["ours"].assignment, weights=p[np.arange(truth.n_jobs), plans["ours"].assignment],
                                minlength=truth.n_responders)
            out.nonoverlap_ratio = float(loads.max()) / t_lp
        return out
    planned = [(truth, _plans(estimate, task.seed + b)[0]) for b, (truth, estimate, _) in enumerate(batches)]
    for name in SCHEMES:
        out.throughput[name] = []
        for interval in task.intervals:
            runs = execute_stream([(truth, plans[name], b * interval) for b, (truth, plans) in enumerate(planned)])
            span = max(run.finish for run in runs)
            out.throughput[name].append(task.jobs * task.batches / span)
        alone = [execute(truth, plans[name])[0].makespan for truth, plans in planned]
        out.makespan[name] = float(np.mean(alone))
    return out


def tasks_of(scale: Scale, seeds: int, only: Sequence[str]) -> list[Task]:
    wanted = set(only) or set(EXPERIMENTS)
    tasks: list[Task] = []
    for seed in range(seeds):
        if "fig2" in wanted:
            tasks += [Task("fig2", seed, j, scale.fig2_responders) for j in scale.fig2_jobs]
        if "fig3" in wanted:
            tasks += [Task("fig3", seed, scale.fig3_jobs, r) for r in scale.fig3_responders]
        if "fig4" in wanted:
            tasks.append(Task("fig4", seed, scale.fig4_jobs, scale.fig4_responders, batches=scale.fig4_batches,
                              intervals=scale.fig4_intervals))
        if "fig5" in wanted:
            tasks += [Task("fig5", seed, scale.fig5_jobs, scale.fig5_responders, error=e) for e in scale.fig5_errors]
    return tasks


def selected(options: ReproOptions) -> tuple[str, ...]:
    """The experiments asked for (all by default); an unknown name is an error naming the valid ones."""
    unknown = set(options.only) - set(EXPERIMENTS)
    if unknown:
        raise UnknownPaper(f"accel: unknown experiment(s) {', '.join(sorted(unknown))}; "
                           f"choose from {', '.join(EXPERIMENTS)}")
    return tuple(options.only) or EXPERIMENTS


def scale_of(options: ReproOptions) -> tuple[Scale, int]:
    """The paper's sizes or the quick ones, and the seeds per point (`--seeds`, else the scale's)."""
    scale = QUICK if options.quick else FULL
    return scale, options.seeds or scale.seeds


def run_all(scale: Scale, seeds: int, only: Sequence[str], workers: int, progress: bool) -> list[Outcome]:
    """Every task of the selected experiments on a process pool, in task order."""
    return parallel_map(run_task, tasks_of(scale, seeds, only), workers, "accel runs", progress)
