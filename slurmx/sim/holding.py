"""Whether a cluster could ever run a job: one rule for the engine's set-up checks and for leaving jobs out.

A variant its partition can never hold (a per-node request larger than any node, more nodes than the partition has,
a placement that admits too few nodes) would stall a replay hours in. The engine refuses such a job
(`engine_state.py`); a run built from a trace leaves it out and counts it instead, the same way whether the cluster
was written by hand, taken from an SWF header or sized from the trace (`cluster.oversized: abort` refuses instead).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from slurmx.core.placement import ANYWHERE, Placement
from slurmx.core.resources import Resources
from slurmx.sim.cluster import ModelCluster, PartitionShape, SimulationError, Vector
from slurmx.sim.jobs import SimJob

__all__ = ["Holder", "PartitionsHolder", "count_problem", "placement_problem", "size_problem"]


class Holder(Protocol):
    """A cluster's shape and which jobs it could ever run (`PartitionsHolder`, `sizing.SwfMachine`)."""

    @property
    def partitions(self) -> tuple[PartitionShape, ...]: ...
    def holds(self, job: SimJob) -> bool: ...
    def problem(self, job: SimJob) -> str | None: ...
    def notes(self, skipped: int) -> tuple[str, ...]: ...


def size_problem(cluster: ModelCluster, kind: str, shown: object, vec: Vector, largest: Vector) -> str | None:
    """Why no node of `kind`'s partition could hold `vec` (the request `shown`), or None."""
    if any(v > c for v, c in zip(vec, largest, strict=True)):
        return (f"requests {shown}, more than any node of partition {cluster.kinds[kind]} has "
                f"({cluster.resources(largest)})")
    return None


def count_problem(cluster: ModelCluster, kind: str, count: int) -> str | None:
    have = len(cluster.kind_nodes[kind])
    if count < 1 or count > have:
        return f"runs on {count} nodes; partition {cluster.kinds[kind]} has {have}"
    return None


def placement_problem(cluster: ModelCluster, kind: str, vec: Vector, count: int, placement: Placement,
                      have: int) -> str | None:
    """Why `have` nodes the placement admits (each large enough) are too few for `count`, or None."""
    if have >= count:
        return None
    some = "no node" if not have else f"only {have} node{'s' * (have != 1)}"
    return (f"its placement ({placement.describe()}) admits {some} of partition {cluster.kinds[kind]} that can hold "
            f"{cluster.resources(vec)}; it runs on {count}")


class PartitionsHolder:
    """The jobs a cluster written as partitions can hold: each served variant passes the engine's set-up checks."""

    def __init__(self, partitions: Sequence[PartitionShape]) -> None:
        self._partitions = tuple(partitions)
        self.cluster = ModelCluster(self._partitions)
        self._said: dict[tuple[str, Resources, int, Placement], str] = {}  # a variant shape's problem ("": none)

    @property
    def partitions(self) -> tuple[PartitionShape, ...]:
        return self._partitions

    def problem(self, job: SimJob) -> str | None:
        """The first reason the engine would refuse `job`, as it says it; None when it can run."""
        served = False
        for kind, variant in job.variants.items():
            if kind not in self.cluster.kinds:
                continue
            served = True
            key = (kind, variant.request, variant.nodes, variant.placement)
            said = self._said.get(key)
            if said is None:
                said = self._said[key] = self._variant_problem(kind, variant.request, variant.nodes,
                                                               variant.placement) or ""
            if said:
                return f"job {job.job_id} variant {kind}: {said}"
        if not served:
            return (f"job {job.job_id}: none of its kinds ({', '.join(job.variants)}) is served by this cluster "
                    f"(kinds: {', '.join(self.cluster.kinds)})")
        return None

    def _variant_problem(self, kind: str, request: Resources, nodes: int, placement: Placement) -> str | None:
        cluster = self.cluster
        try:
            vec = cluster.vector(request)
        except SimulationError as exc:
            return str(exc)
        said = size_problem(cluster, kind, request, vec, cluster.largest(kind))
        if said is None and nodes != 1:
            said = count_problem(cluster, kind, nodes)
        if said is None and placement is not ANYWHERE:
            have = len(cluster.admitted(kind, placement, vec))
            said = placement_problem(cluster, kind, vec, nodes, placement, have)
        return said

    def holds(self, job: SimJob) -> bool:
        return self.problem(job) is None

    def notes(self, skipped: int) -> tuple[str, ...]:
        if not skipped:
            return ()
        return (f"{skipped:,} jobs that the cluster's partitions could never hold (a per-node request larger than any "
                "node of their kind, more nodes than the partition has, or a placement too few nodes admit) are left "
                "out (cluster.oversized: abort refuses the run instead)",)
