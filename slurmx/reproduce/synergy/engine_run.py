"""The registered `synergy` policy in the one engine (`slurmx.sim.engine`, round mode) on a replica's trace.

The published numbers come from the round replica; this runs the code the daemon runs (the policy on a
`ClusterView`, its Preempt and Start actions applied by the engine) on the same jobs, so the reproduction
can say how far the two are apart. The engine runs a job on one node with continuous progress, where the
replica credits whole iterations per round and may split a job's GPUs: the comparison therefore takes
single-GPU traces, the replica with the policy's placement (`consolidate`) and no repeated arrivals, and
the speed model both share (the released two levels: the best-case speedup, or 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from slurmx.core.resources import Resources
from slurmx.policies.synergy import ClusterShape, Mechanism, Order, SynergyArgs, SynergyPolicy
from slurmx.reproduce.synergy.round_replica import RoundJob, RoundSettings, simulate
from slurmx.sim.cluster import ModelCluster, NodeShape, PartitionShape
from slurmx.sim.config import EngineOptions
from slurmx.sim.engine import Engine
from slurmx.sim.jobs import SimJob, SimVariant
from slurmx.sim.workloads.synergy import SynergySpeed

__all__ = ["EngineOutcome", "compare", "engine_jcts"]


@dataclass(frozen=True)
class EngineOutcome:
    """Average and p99 JCT (h) of the measured jobs in the engine and in the replica, and what the engine did."""

    engine_mean_h: float
    replica_mean_h: float
    engine_p99_h: float
    replica_p99_h: float
    measured: int
    policy_calls: int
    lease_changes: int  # Preempt actions: a running job restarted with another allocation or node

    @property
    def gap(self) -> float:
        """Engine over replica, minus one (average JCT)."""
        return self.engine_mean_h / self.replica_mean_h - 1 if self.replica_mean_h > 0 else math.nan


def _sim_job(job: RoundJob, shape: ClusterShape) -> SimJob:
    if job.gpus != 1:
        raise ValueError(f"synergy engine run: job {job.job_id} asks for {job.gpus} GPUs; the engine runs one "
                         "node per job, so the comparison takes single-GPU traces")
    prop = Resources(round(shape.cpus_per_gpu), round(shape.mem_per_gpu * 1024), {"gpu": 1})
    variant = SimVariant("gpu", prop, job.total_iters * job.iter_time_s)
    return SimJob(f"j{job.job_id}", "u", job.arrival, {"gpu": variant}, speed=SynergySpeed(job.model, 1, "binary"))


def engine_jcts(jobs: Sequence[RoundJob], mechanism: Mechanism, order: Order, shape: ClusterShape,
                round_s: float = 300.0) -> tuple[dict[int, float], int, int]:
    """JCT (s) of every measured job with the registered policy in the engine's round mode; policy calls and
    Preempt actions. Every round calls the policy, as Synergy re-allocates every lease."""
    node = Resources(round(shape.cpus), round(shape.mem_gb * 1024), {"gpu": shape.gpus})
    cluster = ModelCluster([PartitionShape("gpu", "gpu", (NodeShape(shape.servers, node, "n"),))])
    policy = SynergyPolicy(SynergyArgs(mechanism=mechanism, order=order), {f"j{j.job_id}": j.model for j in jobs})
    options = EngineOptions(mode="round", period_s=round_s, call_when_idle=True)
    result = Engine(cluster, policy, [_sim_job(j, shape) for j in jobs], options).run()
    measured = {f"j{j.job_id}": j.job_id for j in jobs if j.measured}
    jct = {measured[r.job_id]: r.finish - r.submit for r in result.jobs if r.job_id in measured}
    return jct, result.stats.policy_calls, result.stats.actions.get("Preempt", 0)


def _hours(jct: dict[int, float], q: float | None = None) -> float:
    if not jct:
        return math.nan
    values = list(jct.values())
    return float(np.mean(values) if q is None else np.percentile(values, q)) / 3600


def compare(jobs: Sequence[RoundJob], mechanism: Mechanism, order: Order, shape: ClusterShape) -> EngineOutcome:
    """The same trace in the engine and in the replica (consolidating placement, the trace replayed once)."""
    engine, calls, changes = engine_jcts(jobs, mechanism, order, shape)
    replica = simulate(jobs, RoundSettings(mechanism=mechanism, order=order, shape=shape, placement="consolidate",
                                           after_trace="stop")).jct
    return EngineOutcome(_hours(engine), _hours(replica), _hours(engine, 99), _hours(replica, 99), len(engine),
                         calls, changes)
