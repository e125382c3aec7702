"""The simulator's job model: the contract between workload generators / trace loaders and the engine.

A job is one logical group with one variant per resource kind it can use. Each variant states what it
requests and how long the work takes there (the truth), optionally what the scheduler believes (the
estimate), on how many nodes it runs and where it may (`Placement`: features, -w/-x, whole nodes).
Paper-specific extras (tasks, deadlines, accuracy curves, sensitivity matrices) live in `meta` so the
engine stays generic.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from slurmx.core.model import JobClass
from slurmx.core.placement import ANYWHERE, Placement
from slurmx.core.resources import Resources

__all__ = ["SimJob", "SimVariant", "SpeedFunction"]

# (kind, cpus, mem_mb) -> relative speed; 1.0 at the variant's own request. Synergy's CPU/memory sensitivity.
SpeedFunction = Callable[[str, int, int], float]
_NO_META: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class SimVariant:
    """One way to run a job: on `kind` with `request`, taking `duration_s` of exclusive time (the truth)."""

    kind: str
    request: Resources
    duration_s: float
    estimate_s: float | None = None  # what the scheduler is told; None = the truth is known
    nodes: int = 1  # how many nodes it runs on, `request` on each, all at once (an HPC job's -N)
    placement: Placement = ANYWHERE  # where it may run: node features, required/excluded nodes, whole nodes


@dataclass(frozen=True, slots=True)
class SimJob:
    """One logical job (a group) of a workload."""

    job_id: str
    user: str
    submit_time: float
    variants: Mapping[str, SimVariant]
    job_class: JobClass = JobClass.BE
    grace_s: int = 0
    work: float = 1.0  # abstract amount; the rate on a variant is work / duration_s
    speed: SpeedFunction | None = None
    deadline: float | None = None
    meta: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "variants", MappingProxyType(dict(self.variants)))
        # Most jobs carry no extras: they share one empty mapping (a million jobs otherwise hold a million dicts).
        object.__setattr__(self, "meta", MappingProxyType(dict(self.meta)) if self.meta else _NO_META)
        if not self.variants:
            raise ValueError(f"job {self.job_id}: needs at least one variant")
        for kind, variant in self.variants.items():
            if variant.kind != kind:
                raise ValueError(f"job {self.job_id}: variant keyed {kind!r} says kind {variant.kind!r}")
            if not variant.duration_s > 0:
                raise ValueError(f"job {self.job_id}: variant {kind} duration must be > 0")
