"""AlloX (EuroSys '20) workload: users whose jobs run on a whole CPU node or on one GPU, at per-user speedups.

The paper drives its simulator with Google-trace arrivals and synthetic per-user job sizes; the sizes and
speedups below are the authors' simulator pipeline (IRFsim, `../shared/papers/allox.md` §4.2). The Google
trace itself is not available, so arrivals come from a stand-in with the same shape: a bursty (two-rate,
batched) Poisson process whose window rates span the 310-600 arrivals per 1000 units measured on the
authors' `job_google_m1.txt`, with the same "first 100 units collapse to t=0" initial burst.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from slurmx.core.resources import Resources
from slurmx.sim.jobs import SimJob, SimVariant
from slurmx.sim.workloads.common import (
    FloatArray,
    WorkloadParams,
    gb_to_mb,
    make_rng,
    multiplicative_error,
    sort_jobs,
    truncated_normal,
)

__all__ = ["AlloxParams", "allox", "bursty_arrivals"]

# Per-user median speedup (GPU vs one whole CPU) in IRFsim: [33, 40, 64, 96, 96, 160, 192, 224, 256, 480] / 32.
_USER_SPEEDUPS = (33 / 32, 40 / 32, 64 / 32, 96 / 32, 96 / 32, 160 / 32, 192 / 32, 224 / 32, 256 / 32, 480 / 32)


class AlloxParams(WorkloadParams):
    """Every knob of the AlloX workload; the docs table (docs/workloads.md) cites where each default is from."""

    def planned_jobs(self) -> int:
        return self.n_users * self.jobs_per_user

    n_users: int = Field(10, ge=1)
    jobs_per_user: int = Field(1000, ge=1)
    time_unit_s: float = Field(60.0, gt=0)  # IRFsim's time unit; its plots label it "mins" [U]
    # CPU processing time of user u ~ Normal(cpu_time_base + cpu_time_step * u, cpu_time_sd) on [min, max] units.
    cpu_time_base: float = 80.0
    cpu_time_step: float = 30.0
    cpu_time_sd: float = Field(15.0, ge=0)  # ours: fits the 41-398 range of job_google_m1.txt
    cpu_time_min: float = Field(40.0, gt=0)
    cpu_time_max: float = Field(450.0, gt=0)
    # Per-job speedup ~ Normal(s_u, speedup_cv * s_u) on [speedup_min, speedup_max]; gpu time = cpu / speedup.
    user_speedups: tuple[float, ...] = _USER_SPEEDUPS
    speedup_cv: float = Field(1.2, ge=0)
    speedup_min: float = Field(0.7, gt=0)
    speedup_max: float = Field(60.0, gt=0)
    gpu_time_min: float = Field(1.0, gt=0)
    gpu_time_max: float = Field(400.0, gt=0)
    # Configurations: a whole CPU node (all its cores) or one GPU plus a reserved core.
    cpu_cores: int = Field(32, ge=1)  # IRFsim CPU_PER_NODE; the paper's simulator text says 20
    cpu_mem_gb_min: int = Field(1, ge=0)
    cpu_mem_gb_max: int = Field(16, ge=0)
    gpu_mem_gb: float = Field(2.0, ge=0)
    gpu_job_cpus: int = Field(1, ge=0)  # "AlloX reserves 1 CPU core by default for each GPU job" (§4.4)
    # Bursty arrival stand-in for the Google trace (ours): two rates in jobs per unit, exponential dwell times,
    # geometric batch sizes; then t -> max(0, t - initial_burst_units) as IRFsim does.
    rate_low: float = Field(0.31, gt=0)
    rate_high: float = Field(0.60, gt=0)
    dwell_units: float = Field(1000.0, gt=0)
    batch_mean: float = Field(2.0, ge=1)
    initial_burst_units: float = Field(100.0, ge=0)
    # Scheduler's view: estimate = truth * (1 + eps), eps ~ N(0, sd) clamped to +-0.99, per device (§2.6).
    estimate_error_sd: float = Field(0.1, ge=0)


def bursty_arrivals(rng: np.random.Generator, n: int, params: AlloxParams) -> FloatArray:
    """`n` arrival times in units: a two-state Markov-modulated Poisson process of geometric batches.

    Burstiness is what makes AlloX's matching matter (queues build up, then drain); a plain Poisson process
    would understate it. Starts in the low state; the dwell time of each state is exponential.
    """
    times: list[float] = []
    t, high = 0.0, False
    p_batch = 1.0 / params.batch_mean
    while len(times) < n:
        end = t + float(rng.exponential(params.dwell_units))
        batch_rate = (params.rate_high if high else params.rate_low) / params.batch_mean
        while len(times) < n:
            t += float(rng.exponential(1.0 / batch_rate))
            if t >= end:
                break
            size = int(rng.geometric(p_batch))
            times.extend([t] * min(size, n - len(times)))
        t, high = end, not high
    arrivals = np.maximum(0.0, np.asarray(times, dtype=np.float64) - params.initial_burst_units)
    return np.floor(arrivals)  # IRFsim works in whole time units


def allox(params: AlloxParams, seed: int) -> list[SimJob]:
    """The AlloX workload: `n_users * jobs_per_user` jobs, each with a `cpu` and a `gpu` variant. Pure."""
    rng = make_rng(seed)
    n_users, n = params.n_users, params.n_users * params.jobs_per_user
    if len(params.user_speedups) < n_users:
        raise ValueError(f"user_speedups has {len(params.user_speedups)} entries, need n_users={n_users}")
    arrivals = bursty_arrivals(rng, n, params)
    users = np.arange(n) % n_users  # round-robin in arrival order, as IRFsim assigns them
    cpu_time = np.empty(n)
    speedup = np.empty(n)
    for u in range(n_users):
        idx = np.flatnonzero(users == u)
        mean = params.cpu_time_base + params.cpu_time_step * u
        cpu_time[idx] = truncated_normal(
            rng, mean, params.cpu_time_sd, params.cpu_time_min, params.cpu_time_max, idx.size
        )
        s_u = params.user_speedups[u]
        speedup[idx] = truncated_normal(
            rng, s_u, params.speedup_cv * s_u, params.speedup_min, params.speedup_max, idx.size
        )
    gpu_time = np.clip(cpu_time / speedup, params.gpu_time_min, params.gpu_time_max)
    cpu_mem_gb = rng.integers(params.cpu_mem_gb_min, params.cpu_mem_gb_max, size=n, endpoint=True)
    err_cpu = multiplicative_error(rng, n, params.estimate_error_sd)
    err_gpu = multiplicative_error(rng, n, params.estimate_error_sd)
    with_estimates = params.estimate_error_sd > 0
    gpu_request = Resources(params.gpu_job_cpus, gb_to_mb(params.gpu_mem_gb), {"gpu": 1})
    unit = params.time_unit_s
    jobs = []
    for i in range(n):
        cpu_s, gpu_s = float(cpu_time[i]) * unit, float(gpu_time[i]) * unit
        cpu_variant = SimVariant(
            "cpu",
            Resources(params.cpu_cores, gb_to_mb(float(cpu_mem_gb[i]))),
            cpu_s,
            cpu_s * float(err_cpu[i]) if with_estimates else None,
        )
        gpu_variant = SimVariant("gpu", gpu_request, gpu_s, gpu_s * float(err_gpu[i]) if with_estimates else None)
        jobs.append(
            SimJob(
                job_id=f"allox-{i}",
                user=f"user{int(users[i])}",
                submit_time=float(arrivals[i]) * unit,
                variants={"cpu": cpu_variant, "gpu": gpu_variant},
                meta={"speedup": cpu_s / gpu_s, "user_index": int(users[i])},
            )
        )
    return sort_jobs(jobs)
