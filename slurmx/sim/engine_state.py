"""The state the simulator's engine shares between its halves, and each job's record in the model world.

`Engine` (`engine.py`, the kernel) is one class assembled from mixins kept in their own modules: how actions change
the model world (`engine_actions.ActionSteps`) and the view the policy reads (`engine_view.ViewSteps`). This module
declares, typed, the state they all read and write; the kernel's `Engine.__init__` sets it.
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Iterable
from typing import NamedTuple

from slurmx.core.actions import Resize
from slurmx.core.model import EndKey
from slurmx.core.placement import ANYWHERE, Placement
from slurmx.core.resources import Resources
from slurmx.sim.cluster import ModelCluster, SimulationError, Vector
from slurmx.sim.config import EngineOptions
from slurmx.sim.holding import count_problem, placement_problem, size_problem
from slurmx.sim.jobs import SimJob
from slurmx.sim.metrics import JobRecord

__all__ = [
    "ARRIVAL", "CANCELLED", "DONE", "EVENT_NAMES", "FINISH", "GRACE", "GRACE_END", "PENDING", "PROFILED",
    "PROFILING", "RUNNING", "TICK", "WAITING", "EngineState", "JobState", "KindFacts",
]

_NO_RESOURCES = Resources()  # what a job holds before it starts: one shared value

# Event priorities: the order of events at one instant.
FINISH, GRACE_END, ARRIVAL, PROFILED, TICK = 0, 1, 2, 3, 4
EVENT_NAMES = ("finish", "grace_end", "arrival", "profiled", "tick")
# Job status.
WAITING, PROFILING, PENDING, RUNNING, GRACE, DONE, CANCELLED = range(7)


class KindFacts(NamedTuple):
    """What a job asks for on one kind, fixed at set-up (a Resize replaces the tuple)."""

    request: Resources
    vector: Vector
    est_total: float  # the scheduler's estimate of the whole run there (s)
    vid: int  # the variant's id in the view
    node_count: int = 1  # nodes it takes at once, `request` on each
    placement: Placement = ANYWHERE  # where it may run; exclusive: it holds each of its nodes whole


class JobState:
    """Mutable state of one job in the model world."""

    __slots__ = (
        "alloc", "alloc_vec", "beneficiary", "complete_at", "done", "end_filed", "facts", "first_start",
        "grace_deadline", "group_id", "held", "idx", "job", "kind", "kinds", "listed", "marked_nodes", "nodes",
        "preempted_at", "preemptions", "priority", "productive", "rate", "requeue_time", "resize_to",
        "run_estimate", "seg_start", "status", "version", "whole",
    )

    def __init__(self, idx: int, job: SimJob) -> None:
        self.idx = idx
        self.job = job
        self.group_id = job.job_id
        self.status = WAITING
        self.kinds: tuple[str, ...] = ()
        self.facts: dict[str, KindFacts] = {}  # per kind it can run on: one small tuple, not four dicts per job
        self.kind: str | None = None
        self.nodes: tuple[int, ...] = ()  # where it runs: one node, or all of a multi-node job's
        self.whole = False  # it runs exclusive: each of its nodes is held whole, whatever `alloc` says
        self.alloc: Resources = _NO_RESOURCES
        self.alloc_vec: Vector = ()
        self.rate = 0.0
        self.done = 0.0
        self.productive = 0.0
        self.seg_start = 0.0
        self.complete_at = 0.0
        self.run_estimate: float | None = None
        self.version = 0
        self.preemptions = 0
        self.preempted_at: float | None = None
        self.first_start: float | None = None
        self.held = False
        self.priority: int | None = None
        # Preemption marks the view shows (Group.grace_deadline, preempted_for, preempted_nodes, requeue_time).
        self.grace_deadline: float | None = None
        self.beneficiary: str | None = None
        self.marked_nodes: tuple[str, ...] = ()
        self.requeue_time: float | None = None
        self.resize_to: Resize | None = None  # a Resize of the running job, applied when its grace ends
        self.listed = 0  # which sorted queue of the index holds it: 0 none, 1 pending, 2 running
        self.end_filed: tuple[str, EndKey] | None = None  # (kind, key) in the index's by-expected-end list


class EngineState:
    """What the kernel and both mixins share: the model cluster, the jobs, the event heap and the counters."""

    cluster: ModelCluster
    options: EngineOptions
    _heap: list[tuple[float, int, int, int, int]]  # (time, priority, sequence, job index, job version)
    _seq: int
    _jobs: dict[int, JobState]  # jobs read and not yet gone, by `idx`, their place in submission order
    _by_id: dict[str, JobState]  # the same, by group id
    _seen_ids: set[str]  # every job id read: a repeated one is refused
    _gone: list[int]  # ended jobs whose state the next view drops (after filing them out of its queues)
    _visible: dict[str, JobState]  # submitted, profiled and not finished: the groups the view shows
    _dirty: dict[int, None]  # jobs changed since the last view (an ordered set)
    _open: int  # jobs not yet completed or cancelled
    _pending: int
    _max_pending: int
    _busy: int  # running, in grace or profiling
    _records: list[JobRecord]  # in the order jobs ended
    _record_order: array[int]  # each record's job `idx`: the result lists records in submission order
    _alloc_changed: bool  # a sample of the allocation is due at the end of the instant
    _largest: dict[str, Vector]  # kind -> the largest node of its partition
    _placeable: dict[tuple[str, Vector, Placement], int]  # how many nodes of the kind could ever hold such a variant
    _vectors: dict[tuple[str, Resources], Vector]  # each (kind, request) as a vector, checked once

    def _push(self, t: float, prio: int, payload: int, version: int = 0) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, prio, self._seq, payload, version))

    def _checked_vector(self, job: SimJob, kind: str, request: Resources) -> Vector:
        """`request` as a vector, refused if no node of `kind`'s partition could hold it (set-up, and a Resize)."""
        try:
            vec = self.cluster.vector(request)
        except SimulationError as exc:
            raise SimulationError(f"job {job.job_id} variant {kind}: {exc}") from None
        largest = self._largest.get(kind)
        if largest is None:
            largest = self._largest[kind] = self.cluster.largest(kind)
        said = size_problem(self.cluster, kind, request, vec, largest)
        if said is not None:
            raise SimulationError(f"job {job.job_id} variant {kind}: {said}")
        return vec

    def _check_node_count(self, job: SimJob, kind: str, count: int) -> None:
        """A multi-node variant needs at least `count` nodes in its partition (set-up): else it could never run."""
        said = count_problem(self.cluster, kind, count)
        if said is not None:
            raise SimulationError(f"job {job.job_id} variant {kind}: {said}")

    def _check_placement(self, job: SimJob, kind: str, vec: Vector, count: int, placement: Placement) -> None:
        """A variant with a placement rule needs `count` nodes of its partition the rule admits, each large enough
        for its request (set-up): else it could never run, and a replay would stall on it hours later."""
        key = (kind, vec, placement)
        have = self._placeable.get(key)
        if have is None:
            have = self._placeable[key] = len(self.cluster.admitted(kind, placement, vec))
        said = placement_problem(self.cluster, kind, vec, count, placement, have)
        if said is not None:
            raise SimulationError(f"job {job.job_id} variant {kind}: {said}")

    def _check_all(self, jobs: Iterable[SimJob]) -> None:
        """Check every job of a sequence before the run starts (the checks a stream gets as each job is read)."""
        seen = self._seen_ids  # the run's set of ids read: filled here once for a sequence
        for job in jobs:
            self._check(job, seen)

    def _check(self, job: SimJob, seen: set[str]) -> list[tuple[str, Vector]]:
        """One job's checks: its id not in `seen` (then added), its variants against the cluster; returns the kinds
        served. A variant wider than the policy places is not refused: the cycle hands it over
        (`cycle/handover.py`)."""
        if job.job_id in seen:
            raise SimulationError(f"workload: job id {job.job_id!r} appears twice")
        seen.add(job.job_id)
        return self._served_kinds(job)

    def _served_kinds(self, job: SimJob) -> list[tuple[str, Vector]]:
        """The job's kinds this cluster serves with each one's request as a vector, each variant checked against
        its partition's nodes."""
        kinds = []
        served, vectors = self.cluster.kinds, self._vectors
        for kind, variant in job.variants.items():
            if kind not in served:
                continue
            key = (kind, variant.request)
            vec = vectors.get(key)
            if vec is None:
                vec = vectors[key] = self._checked_vector(job, kind, variant.request)
            if variant.nodes != 1:
                self._check_node_count(job, kind, variant.nodes)
            if variant.placement is not ANYWHERE:
                self._check_placement(job, kind, vec, variant.nodes, variant.placement)
            kinds.append((kind, vec))
        if not kinds:
            raise SimulationError(f"job {job.job_id}: none of its kinds ({', '.join(job.variants)}) is served "
                                  f"by this cluster (kinds: {', '.join(self.cluster.kinds)})")
        return kinds
