"""Synergy (OSDI '22) workload: Philly-derived durations, a model mix by split, per-model CPU/memory sensitivity.

Durations at the GPU-proportional share are 10^U(1.5,3) minutes with probability 0.8, else 10^U(3,4)
(`../shared/papers/synergy.md` §4.3), arrivals are Poisson in jobs/hour (or all at t=0), and each job's model
is chosen deterministically to track the image/language/speech split, exactly as the authors' simulator does.
Each job carries its model's throughput matrix as `SimJob.speed` (the released per-GPU profiles, App-A.1),
so a policy that gives a job more or fewer CPUs and memory than proportional sees the speed it would get.
`load_synergy_joblist` replays the job list the authors' own simulator generated (`../shared/peers/synergy`).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field, field_validator

from slurmx.core.resources import Resources
from slurmx.policies.synergy.profiles import CPU_GRID, MEM_GRID, MODELS, TASKS, ModelProfile
from slurmx.sim.jobs import SimJob, SimVariant
from slurmx.sim.traces.common import CsvRows
from slurmx.sim.workloads.common import WorkloadParams, gb_to_mb, make_rng, sort_jobs

__all__ = [
    "MODELS",
    "PHILLY_MULTI_GPU",
    "TASKS",
    "ModelProfile",
    "SynergyParams",
    "SynergySpeed",
    "assign_models",
    "load_synergy_joblist",
    "synergy",
]

# GPU demands of the Philly-derived CSV (../shared/traces/philly_derived_pollux_sia/philly.csv) folded the way
# Synergy's multi-GPU mode folds the raw log: demands outside {1,2,4,8,16} become 1, above 16 are dropped.
PHILLY_MULTI_GPU: Mapping[int, float] = {1: 76634, 2: 1818, 4: 1870, 8: 1643, 16: 199}

_EPS = 1e-6


@dataclass(frozen=True, slots=True)
class SynergySpeed:
    """`SimJob.speed` for a Synergy job: relative throughput at (kind, cpus, mem_mb), 1.0 at the proportional share.

    `matrix` looks the allocation up in the model's per-GPU matrix, rounding down to the grid (clamped at its
    first row and column); `binary` is the released simulator's model: the full speedup at or above the
    best-case demand, else 1.0. A frozen dataclass rather than a closure: comparable, printable, picklable.
    """

    model: str
    gpus: int
    mode: Literal["matrix", "binary"] = "matrix"

    def __call__(self, kind: str, cpus: int, mem_mb: int) -> float:
        profile = MODELS[self.model]
        cpu, mem_gb = cpus / self.gpus, mem_mb / 1024 / self.gpus
        if self.mode == "binary":
            ok = cpu >= profile.ideal_cpus_per_gpu - _EPS and mem_gb >= profile.ideal_mem_gb_per_gpu - _EPS
            return profile.speedup if ok else 1.0
        row = max(0, bisect_right(CPU_GRID, cpu + _EPS) - 1)
        col = max(0, bisect_right(MEM_GRID, mem_gb + _EPS) - 1)
        return profile.matrix[row][col]


class SynergyParams(WorkloadParams):
    """Every knob of the Synergy workload (defaults: the paper's default simulation, 128 GPUs, 9 jobs/hour)."""

    def planned_jobs(self) -> int:
        return self.n_jobs

    n_jobs: int = Field(7000, ge=1)  # enough for the steady-state window at 9 jobs/h (the authors' run made 6,925)
    jobs_per_hour: float = Field(9.0, gt=0)
    arrivals: Literal["poisson", "static"] = "poisson"
    split: tuple[float, float, float] = (20.0, 70.0, 10.0)  # image, language, speech (%)
    short_prob: float = Field(0.8, ge=0, le=1)
    short_log10_min: tuple[float, float] = (1.5, 3.0)  # duration 10^U(lo, hi) minutes
    long_log10_min: tuple[float, float] = (3.0, 4.0)
    gpu_demand: Mapping[int, float] = Field(default_factory=lambda: {1: 1.0})  # weights; PHILLY_MULTI_GPU for multi
    server_gpus: int = Field(8, ge=1)
    server_cpus: int = Field(24, ge=1)
    server_mem_gb: float = Field(500.0, gt=0)
    speed_model: Literal["matrix", "binary"] = "matrix"
    measure_window: tuple[int, int] = (4000, 5000)  # job ids whose JCTs the paper averages (steady state)
    kind: str = "gpu"

    @field_validator("split")
    @classmethod
    def _split_positive(cls, value: tuple[float, float, float]) -> tuple[float, float, float]:
        if min(value) < 0 or sum(value) <= 0:
            raise ValueError(f"split must be non-negative percentages with a positive sum, got {value}")
        return value

    @field_validator("gpu_demand")
    @classmethod
    def _demand_weights(cls, value: Mapping[int, float]) -> Mapping[int, float]:
        if not value or min(value) < 1 or min(value.values()) < 0 or sum(value.values()) <= 0:
            raise ValueError(f"gpu_demand must map GPU counts >= 1 to non-negative weights, got {dict(value)}")
        return value


def assign_models(n: int, split: tuple[float, float, float]) -> list[ModelProfile]:
    """The released simulator's deterministic mix: next task = largest (target share - share so far).

    The first job takes the first task; ties go to the earlier task; models rotate within a task. This
    reproduces the model sequence of the authors' own run (alexnet, gnmt, transformer, m5, lstm, ...).
    """
    total = sum(split)
    by_task = {t: [m for m in MODELS.values() if m.task == t] for t in TASKS}
    counts = [0, 0, 0]
    out = []
    for i in range(n):
        if i == 0:
            k = next(j for j in range(3) if split[j] > 0)
        else:  # deficit scaled by 100*i to stay exact for whole percentages
            deficits = [split[j] / total * 100 * i - 100 * counts[j] for j in range(3)]
            best = max(deficits)
            k = next(j for j in range(3) if deficits[j] >= best - 1e-9 and split[j] > 0)
        models = by_task[TASKS[k]]
        out.append(models[counts[k] % len(models)])
        counts[k] += 1
    return out


def synergy(params: SynergyParams, seed: int) -> list[SimJob]:
    """The Synergy workload: one `gpu` variant per job at the GPU-proportional share, with a speed matrix. Pure."""
    rng = make_rng(seed)
    n = params.n_jobs
    cpu_share = params.server_cpus / params.server_gpus
    mem_share_gb = params.server_mem_gb / params.server_gpus
    long = rng.random(n) >= params.short_prob
    lo = np.where(long, params.long_log10_min[0], params.short_log10_min[0])
    hi = np.where(long, params.long_log10_min[1], params.short_log10_min[1])
    duration_s = 60.0 * 10 ** rng.uniform(lo, hi)
    sizes = np.array(sorted(params.gpu_demand))
    weights = np.array([params.gpu_demand[g] for g in sizes], dtype=np.float64)
    gpus = rng.choice(sizes, size=n, p=weights / weights.sum())
    if params.arrivals == "poisson":  # inter-arrival = ceil(-ln(1-U) / lambda * 3600) s, as the released code
        gaps = np.ceil(-np.log1p(-rng.random(n)) / params.jobs_per_hour * 3600.0)
        arrivals = np.cumsum(gaps)
    else:
        arrivals = np.arange(n) * 0.001
    lo_id, hi_id = params.measure_window
    jobs = []
    for i, model in enumerate(assign_models(n, params.split)):
        g = int(gpus[i])
        iters = max(1, int(duration_s[i] / model.iter_time_s))
        request = Resources(round(cpu_share * g), gb_to_mb(mem_share_gb * g), {"gpu": g})
        jobs.append(
            SimJob(
                job_id=f"synergy-{i}",
                user="synergy",  # the workload has no users
                submit_time=float(arrivals[i]),
                variants={params.kind: SimVariant(params.kind, request, iters * model.iter_time_s)},
                speed=SynergySpeed(model.name, g, params.speed_model),
                meta={
                    "model": model.name,
                    "task": model.task,
                    "total_iters": iters,
                    "iter_time_s": model.iter_time_s,
                    "ideal_cpus": math.ceil(model.ideal_cpus_per_gpu * g),
                    "ideal_mem_mb": gb_to_mb(model.ideal_mem_gb_per_gpu * g),
                    "speedup_at_ideal": model.speedup,
                    "measured": lo_id <= i < hi_id,
                },
            )
        )
    return sort_jobs(jobs)


_JOBLIST_COLUMNS = ("job_id", "model", "arrival_s", "total_iters", "gpu_demand", "iter_time_s")


def load_synergy_joblist(
    path: str | Path,
    *,
    server_gpus: int = 8,
    server_cpus: int = 24,
    server_mem_gb: float = 500.0,
    speed_model: Literal["matrix", "binary"] = "binary",
    measure_window: tuple[int, int] = (4000, 5000),
    kind: str = "gpu",
) -> list[SimJob]:
    """The job list the authors' simulator generated (`joblist_load*.csv` in ../shared/peers/synergy).

    Replaying exactly these jobs is how our Synergy policy is compared with the authors' numbers; the speed
    model defaults to `binary` because that is what their simulator applied. Best-case demand and speedup come
    from our model table (the file's ideal_cpu / ideal_mem_gb / speedup columns agree with it for every model).
    A malformed line raises `TraceError` naming the row and column.
    """
    cpu_share, mem_share_gb = server_cpus / server_gpus, server_mem_gb / server_gpus
    known = ", ".join(MODELS)
    jobs = []
    for row in CsvRows(path, _JOBLIST_COLUMNS):
        job_id = row.whole("job_id", low=0)
        model = row.text("model")
        if model not in MODELS:
            row.fail("model", f"one of {known}", model)
        profile = MODELS[model]
        g = row.whole("gpu_demand", low=1)
        iters = row.whole("total_iters", low=1)
        iter_time = row.number("iter_time_s", low=0)
        if iter_time <= 0:
            row.fail("iter_time_s", "seconds > 0", row.text("iter_time_s"))
        arrival = row.number("arrival_s", low=0, what="seconds")
        request = Resources(round(cpu_share * g), gb_to_mb(mem_share_gb * g), {"gpu": g})
        jobs.append(
            SimJob(
                job_id=f"synergy-{job_id}",
                user="synergy",
                submit_time=arrival,
                variants={kind: SimVariant(kind, request, iters * iter_time)},
                speed=SynergySpeed(model, g, speed_model),
                meta={
                    "model": model,
                    "task": profile.task,
                    "total_iters": iters,
                    "iter_time_s": iter_time,
                    "ideal_cpus": math.ceil(profile.ideal_cpus_per_gpu * g),
                    "ideal_mem_mb": gb_to_mb(profile.ideal_mem_gb_per_gpu * g),
                    "speedup_at_ideal": profile.speedup,
                    "measured": measure_window[0] <= job_id < measure_window[1],
                    "arrived_in_run": "arrived_in_run" not in row.index or row.text("arrived_in_run") == "1",
                },
            )
        )
    return sort_jobs(jobs)
