"""Simulator tests. Shared helpers: tiny clusters, jobs, and a scripted policy that records what it saw."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from slurmx.core.actions import Action, Plan
from slurmx.core.model import ClusterView, JobClass
from slurmx.core.resources import Resources
from slurmx.policies import make_policy
from slurmx.policies.base import Capabilities, Policy
from slurmx.sim.cluster import ModelCluster, NodeShape, PartitionShape
from slurmx.sim.config import EngineOptions
from slurmx.sim.engine import Engine
from slurmx.sim.jobs import SimJob, SimVariant
from slurmx.sim.metrics import SimResult


def cluster(nodes: int = 1, cpus: int = 4, mem_mb: int = 4096, gres: dict[str, int] | None = None,
            kind: str = "cpu") -> ModelCluster:
    return ModelCluster([PartitionShape(kind, kind, (NodeShape(nodes, Resources(cpus, mem_mb, gres or {}), kind[0]),))])


def job(job_id: str, submit: float = 0.0, duration: float = 10.0, cpus: int = 1, mem_mb: int = 100,
        kind: str = "cpu", user: str = "u", job_class: JobClass = JobClass.BE, **extra: Any) -> SimJob:
    estimate = extra.pop("estimate_s", None)
    gres = extra.pop("gres", {})
    variant = SimVariant(kind, Resources(cpus, mem_mb, gres), duration, estimate)
    return SimJob(job_id, user, submit, {kind: variant}, job_class=job_class, **extra)


@dataclass
class Seen:
    now: float
    view: ClusterView

    @property
    def pending(self) -> list[str]:
        return [g.group_id for g in self.view.pending_groups()]

    @property
    def running(self) -> list[str]:
        return [g.group_id for g in self.view.running_groups()]


ANY_WIDTH = Capabilities(max_nodes=None)  # a script may start any job, wide ones too


@dataclass
class Scripted:
    """A policy whose plan is `decide(view, now)`; it records every view it was given (tests only)."""

    decide: Callable[[ClusterView, float], Sequence[Action]]
    seen: list[Seen] = field(default_factory=list)
    name: ClassVar[str] = "scripted"
    capabilities: Capabilities = ANY_WIDTH

    def schedule(self, view: ClusterView, now: float) -> Plan:
        self.seen.append(Seen(now, view))
        return Plan(tuple(self.decide(view, now)))


def run(jobs: Sequence[SimJob], policy: Policy | None = None, model: ModelCluster | None = None,
        **options: Any) -> SimResult:
    return Engine(model or cluster(), policy or make_policy("fifo"), jobs, EngineOptions(**options)).run()
