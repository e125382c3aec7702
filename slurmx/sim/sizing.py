"""A model cluster for a trace: the trace's own machines, or identical nodes sized from the jobs it will run.

Real traces rarely come with a cluster we can model exactly, and a FIFO replay on the wrong size says
nothing. Two ways, both stated in the run's assumptions:

- `nodes_file`: the trace's machine list (Alibaba v2023 `openb_node_list_*.csv`), grouped by capacity; GPU
  machines serve kind `gpu`, CPU-only machines kind `cpu`.
- `node` per kind: how many such nodes give an offered load of `load` over the trace's submission span
  (per dimension: requested amount x duration / span / node capacity; the largest dimension decides).

Jobs no node of their kind could ever hold (a per-node request larger than every node; Philly's 16-128 GPU
gangs read as one-node requests on 8-GPU nodes) are left out and counted, rather than failing a 100,000-job run
on its 20th job. A multi-node job's demand is its per-node request times its node count.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from slurmx.core.resources import Resources
from slurmx.sim.cluster import MAX_NODES, NodeShape, PartitionShape, SimulationError
from slurmx.sim.holding import Holder
from slurmx.sim.jobs import SimJob

__all__ = ["HeldStream", "SizedCluster", "SwfMachine", "partitions_from_machines", "sized_for_load"]


@dataclass(frozen=True)
class SizedCluster:
    partitions: tuple[PartitionShape, ...]
    jobs: list[SimJob]
    assumptions: tuple[str, ...]
    skipped: int


def _vector(res: Resources) -> dict[str, int]:
    return {"cpus": res.cpus, "mem_mb": res.mem_mb, **{f"gres/{k}": v for k, v in res.gres.items()}}


def _keep_fitting(jobs: Sequence[SimJob], largest: Mapping[str, Sequence[Resources]]) \
        -> tuple[list[SimJob], int]:
    kept = []
    for job in jobs:
        if any(kind in largest and any(v.request.fits_in(cap) for cap in largest[kind])
               for kind, v in job.variants.items()):
            kept.append(job)
    return kept, len(jobs) - len(kept)


def partitions_from_machines(machines: Sequence[tuple[str, Resources, str]], jobs: Sequence[SimJob]) -> SizedCluster:
    """Partitions `gpu` (machines with GPUs) and `cpu` (the rest) from a trace's machine list; a machine's GPU
    model is its node feature (what a pod's `gpu_spec` asks for, as a constraint)."""
    by_kind: dict[str, Counter[tuple[Resources, str]]] = {"gpu": Counter(), "cpu": Counter()}
    for _name, capacity, model in machines:
        kind = "gpu" if capacity.gres.get("gpu", 0) > 0 else "cpu"
        clean = Resources(capacity.cpus, capacity.mem_mb, {k: v for k, v in capacity.gres.items() if v > 0})
        by_kind[kind][(clean, model)] += 1
    partitions = []
    for kind, shapes in by_kind.items():
        if not shapes:
            continue
        groups = tuple(NodeShape(count, cap, f"{kind[0]}{i}-", (model,) if model else ())
                       for i, ((cap, model), count) in enumerate(sorted(shapes.items(), key=lambda kv: str(kv[0]))))
        partitions.append(PartitionShape(kind, kind, groups))
    largest = {p.kind: [g.capacity for g in p.nodes] for p in partitions}
    kept, skipped = _keep_fitting(jobs, largest)
    notes: tuple[str, ...] = (f"cluster = the trace's {len(machines):,} machines: "
             + ", ".join(f"{sum(g.count for g in p.nodes):,} {p.kind} nodes in {len(p.nodes)} shapes"
                         for p in partitions),)
    if skipped:
        notes += (f"{skipped:,} jobs fit no machine of their kind and are left out",)
    return SizedCluster(tuple(partitions), kept, notes, skipped)


@dataclass(frozen=True)
class SwfMachine:
    """The machine an SWF header describes, and which jobs it can hold (for a list, or a stream as it passes)."""

    header: Mapping[str, str]
    count: int
    capacity: Resources
    mem_per_cpu_mb: int

    @classmethod
    def of(cls, header: Mapping[str, str], mem_per_cpu_mb: int, cpus_per_node: object = None) -> SwfMachine:
        """MaxNodes nodes of MaxProcs / MaxNodes processors, `mem_per_cpu_mb` each. `cpus_per_node`: the loader's,
        when given; it split the wide jobs, so it must be the header's node size."""
        from slurmx.sim.traces.swf import header_machine

        machine = header_machine(header)
        if machine is None:
            found = ", ".join(f"{k} {header[k]}" for k in ("MaxNodes", "MaxProcs") if k in header) or "neither"
            raise ValueError(f"the trace's header gives no machine of equal nodes (MaxNodes and MaxProcs: {found}); "
                             "give cluster.partitions with the node shape instead")
        count, cpus = machine
        if cpus_per_node is not None and cpus_per_node != cpus:
            raise ValueError(f"workload.params.cpus_per_node {cpus_per_node} split the jobs over nodes of that size, "
                             f"but the header's nodes have {cpus} processors; drop cpus_per_node, or give "
                             "cluster.partitions")
        if count > MAX_NODES:
            raise ValueError(f"the header's MaxNodes {count:,} is more than {MAX_NODES:,} nodes")
        return cls(header, count, Resources(cpus, cpus * mem_per_cpu_mb), mem_per_cpu_mb)

    @property
    def partitions(self) -> tuple[PartitionShape, ...]:
        return (PartitionShape("cpu", "cpu", (NodeShape(self.count, self.capacity, "n"),)),)

    def holds(self, job: SimJob) -> bool:
        v = job.variants.get("cpu")
        return v is not None and v.request.fits_in(self.capacity) and v.nodes <= self.count

    def problem(self, job: SimJob) -> str | None:
        if self.holds(job):
            return None
        v = job.variants.get("cpu")
        if v is None:
            return f"job {job.job_id}: only a GPU variant, and the header's machine has CPU nodes alone"
        return (f"job {job.job_id}: {v.nodes} node(s) of {v.request}; the header's machine has {self.count:,} nodes "
                f"of {self.capacity}")

    def notes(self, skipped: int) -> tuple[str, ...]:
        cpus = self.capacity.cpus
        notes = [f"cluster = the SWF header's machine: {self.count:,} nodes of {cpus} processor{'s' * (cpus != 1)} "
                 f"(MaxNodes {self.header['MaxNodes']}, MaxProcs {self.header['MaxProcs']}) and "
                 f"{self.mem_per_cpu_mb:,} MB per processor"]
        if skipped:
            notes.append(f"{skipped:,} jobs that no node set of this machine could hold (per-node request, node "
                         "count, or GPU-only) are left out")
        return tuple(notes)


class HeldStream:
    """The jobs of a stream that `machine` can hold, in order; the others are counted as they pass (or, with
    `abort`, the run refused at the first)."""

    def __init__(self, jobs: Iterable[SimJob], machine: Holder, abort: bool = False) -> None:
        self._jobs = jobs
        self.machine = machine
        self.abort = abort
        self.skipped = 0

    def __iter__(self) -> Iterator[SimJob]:
        holds = self.machine.holds
        for job in self._jobs:
            if holds(job):
                yield job
            elif self.abort:
                raise SimulationError(f"cluster.oversized: abort: {self.machine.problem(job)}; leave oversized out "
                                      "(the default) to count such jobs and run the rest")
            else:
                self.skipped += 1


def sized_for_load(jobs: Sequence[SimJob], node: Mapping[str, Resources], load: float) -> SizedCluster:
    """For each kind in `node`, enough such nodes that the kind's offered load over the submission span is
    `load` (at least one node). A job runs on the first of its kinds that `node` names."""
    kept, skipped = _keep_fitting(jobs, {kind: [cap] for kind, cap in node.items()})
    if not kept:
        raise ValueError("no job of the trace fits the node shapes given (cluster.from_trace.node)")
    submits = [j.submit_time for j in kept]
    span = max(max(submits) - min(submits), 1.0)
    demand: dict[str, dict[str, float]] = {kind: {} for kind in node}
    for job in kept:
        kind = next(k for k in job.variants if k in node and job.variants[k].request.fits_in(node[k]))
        variant = job.variants[kind]
        for dim, amount in _vector(variant.request).items():
            demand[kind][dim] = demand[kind].get(dim, 0.0) + amount * variant.nodes * variant.duration_s
    partitions = []
    notes = []
    for kind, capacity in node.items():
        cap = _vector(capacity)
        need = max((demand[kind].get(d, 0.0) / span / (load * c) for d, c in cap.items() if c > 0), default=0.0)
        if not math.isfinite(need) or need > MAX_NODES:
            raise ValueError(f"cluster.from_trace: sizing {kind} for load {load:g} needs more than {MAX_NODES:,} "
                             "nodes; raise load or give bigger node shapes")
        widest = max((j.variants[kind].nodes for j in kept if kind in j.variants), default=1)
        count = max(1, math.ceil(need), widest)  # a multi-node job needs its node count to exist
        partitions.append(PartitionShape(kind, kind, (NodeShape(count, capacity, kind[0]),)))
        notes.append(f"{count:,} {kind} nodes of {capacity}: offered load {load:g} over the {span / 86400:.1f}-day "
                     "submission span (requested amount x duration, the largest dimension decides)")
    if skipped:
        notes.append(f"{skipped:,} jobs whose per-node request is larger than any node of their kind are left out")
    return SizedCluster(tuple(partitions), kept, tuple(notes), skipped)
