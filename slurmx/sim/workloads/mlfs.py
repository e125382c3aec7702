"""MLFS (CoNEXT '20) workload: ML jobs as task DAGs with deadlines, urgency and accuracy curves.

The paper's recipe (`../shared/papers/mlfs.md` §4.1-4.2): one of AlexNet, ResNet, MLP, LSTM, SVM at random;
GPUs from {1, 2, 4, 8, 16, 32} with as many model partitions (SVM is data-parallel only); training data
U[100, 1000] MB; two communication volumes U[50, 100] MB; deadline max(1.1 t_e, t_r), t_r ~ U[0.5, 24] h;
urgency from [1, 10]. The paper takes arrivals, GPU counts and durations from the Philly trace and has no
accuracy data at all, so durations here follow the JCT CDF the paper plots for MLFS itself (Fig. 5a, where
waits are a few minutes) and accuracy curves are parametric (ours). `mlfs_from_trace` instead keeps a loaded
trace's arrivals, GPU counts and durations, as the paper does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from pydantic import Field, model_validator

from slurmx.core.resources import Resources
from slurmx.sim.jobs import SimJob, SimVariant
from slurmx.sim.workloads.common import FloatArray, WorkloadParams, gb_to_mb, make_rng, sort_jobs

__all__ = ["AccuracyCurve", "MlfsParams", "MlfsTask", "mlfs", "mlfs_from_trace", "task_graph"]

# Fig. 5a, MLFS curve: fraction of jobs with JCT <= x minutes (0.1 min is the axis start).
_JCT_CDF = ((0.1, 0.0), (1.0, 0.26), (10.0, 0.67), (30.0, 0.78), (100.0, 0.86), (300.0, 0.90), (1000.0, 1.0))

_DAGS = {"alexnet": "chain", "mlp": "chain", "resnet": "layered", "lstm": "layered", "svm": "dp"}


class MlfsParams(WorkloadParams):
    """Every knob of the MLFS workload (defaults: the paper's real-cluster scale, 620 jobs; ours where silent)."""

    def planned_jobs(self) -> int:
        return self.n_jobs

    n_jobs: int = Field(620, ge=1)
    jobs_per_hour: float = Field(620 / 168, gt=0)  # ours: the real runs replay one week of the trace
    algorithms: tuple[str, ...] = ("alexnet", "resnet", "mlp", "lstm", "svm")
    gpu_choices: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    data_mb: tuple[float, float] = (100.0, 1000.0)
    comm_mb: tuple[float, float] = (50.0, 100.0)  # per communication, worker<->PS and worker<->worker
    batch_mb: Mapping[str, float] = Field(
        default_factory=lambda: {"alexnet": 1.0, "resnet": 1.0, "mlp": 0.0015, "lstm": 0.0015, "svm": 0.0015}
    )
    # Shape of one iteration's DAG: chain (sequential partitions), layered (each layer split into parts), dp.
    dag: Mapping[str, str] = Field(default_factory=lambda: dict(_DAGS))
    layers: Mapping[str, int] = Field(default_factory=lambda: {"resnet": 4, "lstm": 2})  # ours
    iter_time_s: Mapping[str, float] = Field(  # ours: seconds per iteration on the job's GPUs
        default_factory=lambda: {"alexnet": 0.5, "resnet": 0.8, "mlp": 0.05, "lstm": 0.2, "svm": 0.02}
    )
    duration_cdf_min: tuple[tuple[float, float], ...] = _JCT_CDF  # (minutes, fraction), log-linear between knots
    urgency_levels: int = Field(10, ge=1)  # L ~ U{1..levels}; "urgent" means L > 8
    deadline_factor: float = Field(1.1, ge=1)
    deadline_random_h: tuple[float, float] = (0.5, 24.0)
    estimate_error: float = Field(0.0, ge=0, lt=1)  # ours: t_e = t U[1-e, 1+e]; Optimus is ~89% / 70% accurate
    # Accuracy curve acc(i) = a0 + (a_max - a0)(1 - exp(-i / tau)), tau = tau_frac * iterations (ours).
    acc_start: tuple[float, float] = (0.05, 0.2)
    acc_max: tuple[float, float] = (0.85, 0.99)
    tau_frac: tuple[float, float] = (0.1, 0.3)
    loss_start: tuple[float, float] = (2.0, 3.0)
    loss_end: tuple[float, float] = (0.05, 0.3)
    accuracy_req: tuple[float, float] = (0.9, 0.99)  # requirement = a_max * U[lo, hi] (ours; no data in Philly)
    cpus_per_gpu: int = Field(8, ge=0)  # p3.8xlarge: 32 vCPUs and 244 GB for 4 V100s
    mem_per_gpu_gb: float = Field(61.0, ge=0)
    kind: str = "gpu"

    @model_validator(mode="after")
    def _every_algorithm_described(self) -> MlfsParams:
        for table in ("batch_mb", "dag", "iter_time_s"):
            missing = [a for a in self.algorithms if a not in getattr(self, table)]
            if missing:
                raise ValueError(f"{table} has no entry for {', '.join(missing)}")
        bad = {a: d for a, d in self.dag.items() if d not in ("chain", "layered", "dp")}
        if bad:
            raise ValueError(f"dag must be chain, layered or dp, got {bad}")
        return self


@dataclass(frozen=True, slots=True)
class AccuracyCurve:
    """A job's learning curve in iterations: accuracy rises and loss falls exponentially with time constant tau.

    Frozen, comparable and picklable (unlike a closure); MLF-H reads the loss drops (its delta-l terms), MLF-C and the
    metrics read the accuracy reached by the deadline.
    """

    acc_start: float
    acc_max: float
    loss_start: float
    loss_end: float
    tau_iters: float

    def accuracy(self, iteration: float) -> float:
        return self.acc_start + (self.acc_max - self.acc_start) * (1.0 - math.exp(-iteration / self.tau_iters))

    def loss(self, iteration: float) -> float:
        return self.loss_end + (self.loss_start - self.loss_end) * math.exp(-iteration / self.tau_iters)

    def loss_drop(self, iteration: int) -> float:
        """delta-l of iteration `iteration` (>= 1): the loss it removed."""
        return self.loss(iteration - 1) - self.loss(iteration)

    def iterations_to(self, accuracy: float) -> float:
        """Iterations needed to reach `accuracy` (infinite at or above the plateau)."""
        if accuracy <= self.acc_start:
            return 0.0
        if accuracy >= self.acc_max:
            return math.inf
        return -self.tau_iters * math.log(1.0 - (accuracy - self.acc_start) / (self.acc_max - self.acc_start))


class MlfsTask(NamedTuple):
    """One task of an iteration's DAG: a model partition on one worker, or the parameter server (task 0)."""

    task: int
    stage: int  # -1 for the PS
    params_frac: float  # S_k / S^J (0 for the PS)
    children: tuple[int, ...]


def task_graph(meta: Mapping[str, Any]) -> tuple[MlfsTask, ...]:
    """Expand a job's compact DAG (`stages`, `params_frac`, `dp_degree` in meta) into tasks.

    Task 0 is the parameter server; every task of stage s feeds every task of stage s+1; the last stage (and
    every data-parallel replica) feeds the PS. Kept compact in meta because 100k jobs x 32 tasks adds up.
    """
    stages: Sequence[int] = meta["stages"]
    fracs: Sequence[float] = meta["params_frac"]
    replicas = int(meta["dp_degree"])
    tasks = [MlfsTask(0, -1, 0.0, ())]
    ids: list[list[int]] = []
    next_id = 1
    for parts in stages:
        ids.append(list(range(next_id, next_id + parts * replicas)))
        next_id += parts * replicas
    k = 0
    for s, stage_ids in enumerate(ids):
        children = tuple(ids[s + 1]) if s + 1 < len(ids) else (0,)
        for j, task_id in enumerate(stage_ids):
            tasks.append(MlfsTask(task_id, s, float(fracs[k + j % stages[s]]), children))
        k += stages[s]
    return tuple(tasks)


def _stages(dag: str, partitions: int, layers: int) -> tuple[int, ...]:
    if dag == "dp":
        return (1,)
    if dag == "chain":
        return (1,) * partitions
    n = max(1, min(layers, partitions))
    return tuple(partitions // n + (1 if i < partitions % n else 0) for i in range(n))


def _durations(rng: np.random.Generator, n: int, knots: Sequence[tuple[float, float]]) -> FloatArray:
    """Inverse of a CDF given as (minutes, fraction) knots, interpolated linearly in log-minutes."""
    xs = np.log10([k[0] for k in knots])
    fs = np.array([k[1] for k in knots], dtype=np.float64)
    if not (np.all(np.diff(fs) >= 0) and fs[0] == 0.0 and fs[-1] == 1.0):
        raise ValueError("duration_cdf_min must rise from fraction 0 to 1")
    return np.asarray(60.0 * 10 ** np.interp(rng.random(n), fs, xs), dtype=np.float64)


def _build(
    params: MlfsParams, rng: np.random.Generator, submit: FloatArray, duration: FloatArray, gpus: Sequence[int]
) -> list[SimJob]:
    n = len(submit)
    algos = [params.algorithms[i] for i in rng.integers(0, len(params.algorithms), n)]
    data_mb = rng.uniform(*params.data_mb, n)
    comm = rng.uniform(*params.comm_mb, (n, 2))
    urgency = rng.integers(1, params.urgency_levels, n, endpoint=True)
    t_r = 3600.0 * rng.uniform(*params.deadline_random_h, n)
    est = rng.uniform(1 - params.estimate_error, 1 + params.estimate_error, n)
    curve = np.column_stack(
        [rng.uniform(*r, n) for r in (params.acc_start, params.acc_max, params.loss_start, params.loss_end)]
    )
    tau = rng.uniform(*params.tau_frac, n)
    req = rng.uniform(*params.accuracy_req, n)
    jobs = []
    for i in range(n):
        algo, g = algos[i], int(gpus[i])
        dag = params.dag[algo]
        partitions = 1 if dag == "dp" else g
        stages = _stages(dag, partitions, params.layers.get(algo, 1))
        fracs = rng.dirichlet(np.full(partitions, 2.0)) if partitions > 1 else np.ones(1)
        iter_time = params.iter_time_s[algo]
        iterations = max(1, round(float(duration[i]) / iter_time))
        true_s = iterations * iter_time
        estimate = true_s * float(est[i]) if params.estimate_error > 0 else None
        t_e = estimate if estimate is not None else true_s
        a0, a_max, l0, l_end = (float(x) for x in curve[i])
        acc = AccuracyCurve(a0, a_max, l0, l_end, tau_iters=max(1.0, float(tau[i]) * iterations))
        request = Resources(params.cpus_per_gpu * g, gb_to_mb(params.mem_per_gpu_gb * g), {"gpu": g})
        jobs.append(
            SimJob(
                job_id=f"mlfs-{i}",
                user="mlfs",  # neither the paper nor Philly-derived arrivals say who submitted
                submit_time=float(submit[i]),
                variants={params.kind: SimVariant(params.kind, request, true_s, estimate)},
                deadline=float(submit[i]) + max(params.deadline_factor * t_e, float(t_r[i])),
                meta={
                    "algorithm": algo,
                    "dag": dag,
                    "stages": stages,
                    "params_frac": tuple(float(x) for x in fracs),
                    "dp_degree": g if dag == "dp" else 1,
                    "iterations": iterations,
                    "iter_time_s": iter_time,
                    "data_mb": float(data_mb[i]),
                    "batch_mb": params.batch_mb[algo],
                    "comm_ps_mb": float(comm[i, 0]),
                    "comm_worker_mb": float(comm[i, 1]),
                    "urgency": int(urgency[i]),
                    "accuracy_curve": acc,
                    "accuracy_req": float(req[i]) * acc.acc_max,
                    "stopping": "optstop",  # the evaluation assumes every job uses OptStop (§2.5)
                },
            )
        )
    return sort_jobs(jobs)


def mlfs(params: MlfsParams, seed: int) -> list[SimJob]:
    """The synthetic MLFS workload: Poisson arrivals, durations from Fig. 5a, GPUs uniform over the choices. Pure."""
    rng = make_rng(seed)
    n = params.n_jobs
    submit = np.cumsum(rng.exponential(3600.0 / params.jobs_per_hour, n))
    duration = _durations(rng, n, params.duration_cdf_min)
    gpus = [params.gpu_choices[i] for i in rng.integers(0, len(params.gpu_choices), n)]
    return _build(params, rng, submit, duration, gpus)


def mlfs_from_trace(trace: Sequence[SimJob], params: MlfsParams, seed: int) -> list[SimJob]:
    """MLFS jobs on a real trace's arrivals, GPU counts and durations (the paper's recipe on Philly). Pure.

    Each trace job's first variant gives the duration and the GPU count (`gres/gpu`, at least 1); everything
    else is synthesised as in `mlfs`. `params.n_jobs`, `jobs_per_hour` and `duration_cdf_min` are unused.
    """
    rng = make_rng(seed)
    first = [next(iter(job.variants.values())) for job in trace]
    submit = np.array([job.submit_time for job in trace], dtype=np.float64)
    duration = np.array([v.duration_s for v in first], dtype=np.float64)
    gpus = [max(1, v.request.gres_count("gpu")) for v in first]
    return _build(params, rng, submit, duration, gpus)
