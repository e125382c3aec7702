"""The MLFS experiments as points (`Run`) and their results: each point is one run of the task-level replica.

Experiments (`--only`):
- `philly` (the default): the paper's real-cluster setting, 80 GPUs (20 x 4), 1,860 jobs of one randomly chosen
  week of the Philly trace with their arrivals, durations and GPU counts (`philly_week`), every policy, `--seeds`
  weeks (default 10, the paper's repetitions);
- `real`: a sensitivity run: the same setting on the generator, job lengths from the paper's own Fig. 5a JCT CDF
  (an output of the paper, so never the main input), `--seeds` workloads;
- `sweep`: the same cluster at 155, 310, 620 and 1,240 jobs (the rest of Fig. 4's x axis), one seed;
- `sim`: the large-scale simulation scaled down 2474 -> 160 GPUs with the job density of `real` (3,720 jobs/week).
`--quick` runs a 30-job slice of `real` (same arrival density, one seed) in a few seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from slurmx.policies.mlfs.rules import MlfsArgs
from slurmx.reproduce import UnknownPaper
from slurmx.reproduce.base import ReproOptions
from slurmx.reproduce.mlfs.philly_week import philly_week
from slurmx.reproduce.mlfs.task_baselines import FairShare, Gandiva, Slaq, Tiresias
from slurmx.reproduce.mlfs.task_mlfh import MlfH
from slurmx.reproduce.mlfs.task_model import MlfsResult, MlfsSimParams, TaskPolicy, simulate_mlfs
from slurmx.sim.parallel import parallel_map
from slurmx.sim.workloads.mlfs import MlfsParams, mlfs, mlfs_from_trace

__all__ = ["DURATIONS_MIN", "KEYS", "POLICIES", "SEEDS", "WEEK_H", "Aggregate", "Outcome", "Run", "aggregate",
           "make_policy", "run_all", "run_one", "runs_of"]

POLICIES = ("MLF-H", "MLF-H+C", "Tiresias", "Gandiva", "TensorFlow", "SLAQ")
KEYS = ("avg_jct_min", "deadline_ratio", "urgent_deadline_ratio", "avg_wait_s", "avg_accuracy", "accuracy_ratio",
        "bandwidth_tb", "overloads", "makespan_h", "overhead_ms")

# Ours: job lengths follow the Fig. 5a JCT CDF cut at 300 min (its 300-1,000 min tail alone would make the mean
# job 75 min, above every JCT the paper reports; cut, the mean is 34 min, near MLF-H's 33 min at 155 jobs).
DURATIONS_MIN = ((0.1, 0.0), (1.0, 0.26), (10.0, 0.67), (30.0, 0.78), (100.0, 0.86), (300.0, 1.0))
WEEK_H = 168.0
SEEDS = 10  # the paper's repetitions (§4.3)


def make_policy(name: str) -> TaskPolicy:
    """A fresh policy by its display name."""
    if name == "MLF-H":
        return MlfH(MlfsArgs(), name)
    if name == "MLF-H+C":
        return MlfH(MlfsArgs(mlf_c=True), name)
    table: dict[str, type[Tiresias] | type[Gandiva] | type[FairShare] | type[Slaq]] = {
        "Tiresias": Tiresias, "Gandiva": Gandiva, "TensorFlow": FairShare, "SLAQ": Slaq}
    policy = table[name]()
    policy.name = name
    return policy


@dataclass(frozen=True)
class Run:
    experiment: str
    policy: str
    jobs: int
    hours: float
    servers: int
    seed: int
    source: str = "cdf"  # "cdf": the generator on the Fig. 5a CDF; "philly": a week of the Philly trace


def run_one(run: Run) -> tuple[Run, dict[str, Any]]:
    """One simulation (module level so the process pool can pickle it)."""
    if run.source == "philly":
        workload = mlfs_from_trace(philly_week(run.seed, run.jobs).jobs, MlfsParams(), run.seed)
    else:
        workload = mlfs(MlfsParams(n_jobs=run.jobs, jobs_per_hour=run.jobs / run.hours,
                                   duration_cdf_min=DURATIONS_MIN), run.seed)
    result: MlfsResult = simulate_mlfs(workload, make_policy(run.policy), MlfsSimParams(servers=run.servers),
                                       seed=run.seed)
    return run, result.as_dict()


EXPERIMENTS = ("philly", "real", "sweep", "sim")  # what `--only` may name


def runs_of(options: ReproOptions) -> list[Run]:
    """The points of the selected experiments (`--only`; `--quick`: a 30-job slice of `real`); an unknown name is a
    one-line error."""
    unknown = sorted(set(options.only) - set(EXPERIMENTS))
    if unknown:
        raise UnknownPaper(f"mlfs: unknown experiment(s) {', '.join(unknown)}; choose from {', '.join(EXPERIMENTS)}")
    only = set(options.only) or {"philly"} if not options.quick else {"real"}
    if options.quick:
        return [Run("real", p, 30, 30 * WEEK_H / 1860, 20, 0) for p in POLICIES]
    seeds = options.seeds or SEEDS
    runs = []
    if "philly" in only:
        runs += [Run("philly", p, 1860, WEEK_H, 20, s, "philly") for s in range(seeds) for p in POLICIES]
    if "real" in only:
        runs += [Run("real", p, 1860, WEEK_H, 20, s) for s in range(seeds) for p in POLICIES]
    if "sweep" in only:
        runs += [Run("sweep", p, n, WEEK_H, 20, 0) for n in (155, 310, 620, 1240) for p in POLICIES]
    if "sim" in only:
        runs += [Run("sim", p, 3720, WEEK_H, 40, s) for s in range(seeds) for p in POLICIES]
    return runs


Outcome = tuple[Run, dict[str, Any]]
Aggregate = dict[tuple[str, int, str], dict[str, float]]  # (experiment, jobs, policy) -> mean of each metric


def run_all(options: ReproOptions) -> list[Outcome]:
    """Every point of the selected experiments, on `options.workers` processes."""
    return parallel_map(run_one, runs_of(options), options.workers, "mlfs runs", options.progress)


def _mean(rows: list[dict[str, Any]], key: str) -> float:
    return float(np.mean([r[key] for r in rows]))


def aggregate(outcomes: Sequence[Outcome]) -> Aggregate:
    """Means over seeds per (experiment, jobs, policy)."""
    groups: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    for run, res in outcomes:
        groups.setdefault((run.experiment, run.jobs, run.policy), []).append(res)
    return {k: {key: _mean(v, key) for key in (*KEYS, "finished")} for k, v in groups.items()}
