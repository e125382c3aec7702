"""Zhao, Liu, Qiao (ICC '18) acceleration-system workload: batches of jobs moved to, then computed on, responders.

A job is indivisible input data of size s_i (Mb) that crosses responder j's ingress NIC at r_j Mb/s and then
computes for t_ij seconds; the paper gives s ~ Exp(mean 200 Mb), r_j = 1 Gbps and t "approximately
proportional to its size with the ratio of 0.001" (`../shared/papers/accel_batch.md` §4). The spread of t_ij
across responders is not in the paper: t_ij = 0.001 s_i u_ij, u_ij ~ U[1-delta, 1+delta], with delta a
parameter. The scheduler sees t_hat_ij = t_ij U[1-e, 1+e] (Fig. 5's estimation error).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pydantic import Field

from slurmx.core.resources import Resources
from slurmx.policies.accel_batch.model import BatchInstance
from slurmx.sim.jobs import SimJob, SimVariant
from slurmx.sim.workloads.common import WorkloadParams, make_rng

__all__ = ["ZhaoParams", "ZhaoWorkload", "instances_of", "zhao", "zhao_batches"]


class ZhaoParams(WorkloadParams):
    """Every knob of the batch workload (defaults: the paper's Fig. 2 point of 1000 jobs on 50 responders)."""

    def planned_jobs(self) -> int:
        return self.n_batches * self.jobs_per_batch

    n_batches: int = Field(1, ge=1)  # Fig. 4 uses several; the count is not in the text (10 is ours)
    jobs_per_batch: int = Field(1000, ge=1)
    batch_interval_s: float = Field(0.0, ge=0)  # Fig. 4 varies it from 0 to 5 s
    n_responders: int = Field(50, ge=1)
    size_mean_mb: float = Field(200.0, gt=0)  # exponential with rate 0.005 per Mb
    responder_rate_mbps: float = Field(1000.0, gt=0)  # 1 Gbps for every responder
    rate_spread: float = Field(0.0, ge=0, lt=1)  # ours: r_j ~ r U[1-x, 1+x]; the paper's NICs are all equal
    compute_per_mb_s: float = Field(0.001, gt=0)
    # delta: ours. The paper's computation time is "approximately proportional to its size" (Sec. V): within
    # +-10%, read from that word alone, never from a result (sensitivity to 0.25 and 0.5 in docs/policies/accel.md)
    compute_spread: float = Field(0.1, ge=0, lt=1)
    estimate_error: float = Field(0.0, ge=0, lt=1)  # e: t_hat = t U[1-e, 1+e], per (job, responder)
    kind: str = "accel"


@dataclass(frozen=True, slots=True)
class ZhaoWorkload:
    """Batches of jobs and the responders they can go to.

    Each job's `meta` holds what the batch scheduler needs: `size_mb`, `compute_s` (true t_ij for every
    responder j), `compute_est_s` (what the scheduler is told) and `batch`. The job's single variant lasts
    the mean non-overlapped time over responders (s_i / r_j + t_ij), for engines that ignore responders.
    """

    batches: tuple[tuple[SimJob, ...], ...]
    responder_rates_mbps: tuple[float, ...]

    @property
    def jobs(self) -> list[SimJob]:
        return [job for batch in self.batches for job in batch]


def zhao_batches(params: ZhaoParams, seed: int) -> ZhaoWorkload:
    """The batches, in arrival order (batch b arrives at b * batch_interval_s). Pure."""
    rng = make_rng(seed)
    n_resp = params.n_responders
    rates = params.responder_rate_mbps * rng.uniform(1 - params.rate_spread, 1 + params.rate_spread, n_resp)
    request = Resources(gres={params.kind: 1})
    batches = []
    for b in range(params.n_batches):
        k = params.jobs_per_batch
        size = rng.exponential(params.size_mean_mb, k)
        compute = (
            params.compute_per_mb_s
            * size[:, None]
            * rng.uniform(1 - params.compute_spread, 1 + params.compute_spread, (k, n_resp))
        )
        estimate = compute * rng.uniform(1 - params.estimate_error, 1 + params.estimate_error, (k, n_resp))
        mean_time = (size[:, None] / rates[None, :] + compute).mean(axis=1)
        submit = b * params.batch_interval_s
        batch = []
        for i in range(k):
            variant = SimVariant(params.kind, request, max(float(mean_time[i]), 1e-9))
            batch.append(
                SimJob(
                    job_id=f"zhao-{b}-{i}",
                    user="zhao",  # the paper's jobs belong to anonymous customers
                    submit_time=submit,
                    variants={params.kind: variant},
                    meta={
                        "batch": b,
                        "size_mb": float(size[i]),
                        "compute_s": tuple(float(x) for x in compute[i]),
                        "compute_est_s": tuple(float(x) for x in estimate[i]),
                    },
                )
            )
        batches.append(tuple(batch))
    return ZhaoWorkload(tuple(batches), tuple(float(r) for r in rates))


def zhao(params: ZhaoParams, seed: int) -> list[SimJob]:
    """All batches' jobs flattened, sorted by submit time (the common generator signature)."""
    return zhao_batches(params, seed).jobs


def instances_of(workload: ZhaoWorkload) -> list[tuple[BatchInstance, BatchInstance, float]]:
    """Each batch as (true instance, the scheduler's estimated instance, arrival time)."""
    rates = np.asarray(workload.responder_rates_mbps)
    out = []
    for batch in workload.batches:
        sizes = np.array([job.meta["size_mb"] for job in batch])
        truth = np.array([job.meta["compute_s"] for job in batch])
        estimate = np.array([job.meta["compute_est_s"] for job in batch])
        out.append((BatchInstance(sizes, rates, truth), BatchInstance(sizes, rates, estimate), batch[0].submit_time))
    return out
