"""The discrete-event engine: runs a daemon policy, unchanged, against a model cluster and a workload.

One kernel serves every mode. Events sit in a heap of `(time, priority, sequence, ...)`, so ties break the
same way on every run: at one instant, finishes come before grace ends, before arrivals, before profiling
results, before the periodic tick. The policy is consulted at *scheduling points*, never per event:

- `event` mode: once all events of an instant are processed (by default only while a group is pending), and
  again at the same instant if the plan released resources (a cancel, a zero-grace preemption);
- `tick` mode (FitGpp's one-minute steps): at every period boundary, after that instant's events;
- `round` mode (Synergy's 300 s leases): as tick, and a job whose work completes mid-round keeps its
  resources until the round ends, where its completion is recorded (the paper's simulator's granularity).

The policy reads a `ClusterView` built from cached immutable `Node` and `Group` objects, each rebuilt only
when its own state changed, and its plan is applied action by action to the model. Anything the model cannot
do is a loud `SimulationError`; anything that breaks the model's rules (over-allocation, a double start, work
not adding up) is a `SimulationInvariantError` naming the group, the node and the time.

Work: a job's variant on kind k runs at `work / duration_s` per second, times `speed(kind, cpus, mem)` when
the job has a speed function and the policy allocates something else than the request. A preempted job
makes no progress during its grace period; when the grace ends it is requeued with its remaining work
(`checkpoint: keep`) or all of it (`lose`), and only its started variant stays (its siblings were cancelled
when it first started, as slurmx does on Slurm).

What the view shows of a job: pending, its active variants (PENDING, or HELD after `Hold`) with the estimate
of its remaining work and `Group.work` = the work left; running (also during a grace period), one RUNNING
variant on its node with its allocation, `start_time` of the current run and the estimate from there; a
preempted group carries `grace_deadline` while in grace, `requeue_time` once back in the queue, and
`preempted_for`/`preempted_nodes` until its beneficiary starts or leaves. Finished groups leave the view,
as they leave squeue.
"""

from __future__ import annotations

import bisect
import heapq
import math
import time
import weakref
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from slurmx.core.actions import Action, Cancel, Hold, Plan, Preempt, Release, Resize, SetPriority, Start
from slurmx.core.model import ClusterView, Group, KindName, Node, QueueKey, Variant, VariantState
from slurmx.core.resources import Resources
from slurmx.core.snapshot import LentSnapshot, freeze_if_alive
from slurmx.cycle import DecisionLog, Handler, Outcome, checked_handlers, decide
from slurmx.cycle.log import APPLIED, REFUSED, REPEATED
from slurmx.cycle.run import PlanError
from slurmx.policies.base import Policy
from slurmx.sim.cluster import ModelCluster, SimulationError, SimulationInvariantError, Vector
from slurmx.sim.config import EngineOptions
from slurmx.sim.jobs import SimJob
from slurmx.sim.metrics import JobRecord, RunStats, SimResult

__all__ = ["Engine", "Progress", "SimulationError", "SimulationInvariantError"]

# Event priorities: the order of events at one instant.
FINISH, GRACE_END, ARRIVAL, PROFILED, TICK = 0, 1, 2, 3, 4
EVENT_NAMES = ("finish", "grace_end", "arrival", "profiled", "tick")
# Job status.
WAITING, PROFILING, PENDING, RUNNING, GRACE, DONE, CANCELLED = range(7)
_REL_TOL = 1e-7
_MAX_CALLS_PER_INSTANT = 1000
_PROGRESS_EVERY = 1024  # events between two progress reports


class Progress(NamedTuple):
    """What a progress callback is told, every few thousand events and at the end."""

    done: int  # jobs completed or cancelled
    total: int
    events: int
    now: float


class _Job:
    """Mutable state of one job in the model world."""

    __slots__ = (
        "alloc", "alloc_vec", "beneficiary", "complete_at", "done", "est_total", "first_start", "grace_deadline",
        "group_id", "held", "idx", "job", "kind", "kinds", "listed", "marked_nodes", "node", "preempted_at",
        "preemptions", "priority", "productive", "rate", "requests", "requeue_time", "resize_to", "run_estimate",
        "seg_start", "status", "vectors", "version", "vids",
    )

    def __init__(self, idx: int, job: SimJob) -> None:
        self.idx = idx
        self.job = job
        self.group_id = job.job_id
        self.status = WAITING
        self.kinds: tuple[str, ...] = ()
        self.requests: dict[str, Resources] = {}
        self.vectors: dict[str, Vector] = {}
        self.est_total: dict[str, float] = {}
        self.vids: dict[str, int] = {}
        self.kind: str | None = None
        self.node = -1
        self.alloc: Resources = Resources()
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


class _Queues:
    """The engine's sorted queues (index 1 pending, 2 running) and which of them the current view has read."""

    __slots__ = ("generation", "keys", "read")

    def __init__(self) -> None:
        self.keys: list[list[QueueKey]] = [[], [], []]
        self.read = [False, False, False]
        self.generation = 0

    def keep_read(self) -> None:
        """The last view outlived its decision: a queue it read is left to it, the engine goes on with a copy
        (a list of pointers); an unread one is changed in place, and the old view scans instead."""
        for q, read in enumerate(self.read):
            if read:
                self.keys[q] = self.keys[q].copy()

    def new_generation(self) -> None:
        """A new snapshot is coming: an older view's index answers "no longer known" from now on."""
        self.read = [False, False, False]
        self.generation += 1


class _Index:
    """The engine's `ViewIndex`: pending and running queues kept sorted as jobs change (bisect on
    `(submit_time, group_id)`, the order `ClusterView` defines), and first-fit candidates from the model
    cluster's free-capacity arrays."""

    __slots__ = ("_cluster", "_generation", "_nodes", "_queues")

    def __init__(self, cluster: ModelCluster, nodes: Mapping[str, Node], queues: _Queues) -> None:
        self._cluster = cluster
        self._nodes = nodes
        self._queues = queues
        self._generation = queues.generation

    def _keys(self, q: int) -> list[QueueKey] | None:
        queues = self._queues
        if queues.generation != self._generation:
            return None  # the engine moved on: the view answers from its own frozen groups
        queues.read[q] = True
        return queues.keys[q]

    def pending_keys(self) -> list[QueueKey] | None:
        return self._keys(1)

    def running_keys(self) -> list[QueueKey] | None:
        return self._keys(2)

    def nodes_of_kind(self, kind: KindName) -> tuple[Node, ...]:
        order = self._cluster.kind_nodes.get(kind, ())
        nodes, sim = self._nodes, self._cluster.nodes
        return tuple([nodes[sim[i].name] for i in order])

    def fitting_nodes(self, kind: KindName, request: Resources) -> Iterator[Node]:
        cluster = self._cluster
        if kind not in cluster.kind_nodes:
            return iter(())
        try:
            vec = cluster.vector(request)
        except SimulationError:  # a GRES no node has: nothing fits
            return iter(())
        nodes, sim = self._nodes, cluster.nodes
        return (nodes[sim[i].name] for i in cluster.fitting(kind, vec))  # lazily: first fit reads one or two


class Engine:
    """One simulation run: `Engine(cluster, policy, jobs, options).run() -> SimResult`. Single use."""

    def __init__(
        self,
        cluster: ModelCluster,
        policy: Policy,
        jobs: Sequence[SimJob],
        options: EngineOptions | None = None,
        progress: Callable[[Progress], None] | None = None,
        decisions: DecisionLog | None = None,
    ) -> None:
        self.name = "simulator"
        self.decisions = decisions
        self.handlers = checked_handlers(self.name, {
            Start: self._each(self._start), Preempt: self._each(self._preempt), Cancel: self._each(self._cancel),
            Resize: self._each(self._resize), SetPriority: self._each(self._set_priority),
            Hold: self._each(self._hold), Release: self._each(self._release_hold)})
        self.cluster = cluster
        self.policy = policy
        self.options = options or EngineOptions()
        self.progress = progress
        self.now = 0.0
        self._heap: list[tuple[float, int, int, int, int]] = []
        self._seq = 0
        order = sorted(range(len(jobs)), key=lambda i: jobs[i].submit_time)  # stable: ties keep input order
        self._jobs = [_Job(n, jobs[i]) for n, i in enumerate(order)]
        self._by_id: dict[str, _Job] = {}
        self._visible: dict[str, _Job] = {}
        self._groups: dict[str, Group] = {}
        self._stale_groups: set[str] = set()  # groups whose view is rebuilt when a policy reads it
        self._lent: list[weakref.ReferenceType[LentSnapshot[str, Any]]] = []  # this decision's snapshots
        self._holes = 0  # deletions from _groups since it was last rebuilt
        self._queues = _Queues()
        self._dirty: dict[int, None] = {}
        self._next_arrival = 0
        self._arrived = 0
        self._open = len(self._jobs)
        self._pending = 0
        self._max_pending = 0
        self._busy = 0  # running, in grace or profiling
        self._records: list[JobRecord] = []
        self._reschedule: list[float] = []
        self._events = 0
        self._by_event = [0] * len(EVENT_NAMES)
        self._calls = 0
        self._actions: dict[str, int] = {}
        self._repeated_preempts = 0
        self._notes = dict.fromkeys(self.options.count_notes, 0)
        self._victims: dict[str, list[int]] = {}  # beneficiary -> jobs preempted for it, marks still shown
        self._policy_wall = 0.0
        self._alloc_changed = False
        self._releases = 0
        self._moves = 0  # starts, preemptions and cancels: what makes a stalled run move again
        self._util_t = array("d")
        self._util_v = array("d")
        self._util_cols = tuple((p, d) for p in cluster.partitions for d in cluster.dims)
        self._ran = False
        self._largest: dict[str, Vector] = {}
        self._prepare()

    # ---- set-up ----------------------------------------------------------------------------------------

    def _prepare(self) -> None:
        """Check every job against the cluster and fix its estimates (error model drawn in job order)."""
        opts = self.options
        factors: np.ndarray | None = None
        if opts.error_sigma is not None:
            rng = np.random.default_rng([opts.seed, 0x5E57])
            draws = rng.standard_normal(sum(len(j.job.variants) for j in self._jobs))
            factors = 1.0 + np.clip(draws * opts.error_sigma, -opts.error_clamp, opts.error_clamp)
        vectors: dict[tuple[str, Resources], Vector] = {}
        next_vid = 1
        drawn = 0
        for j in self._jobs:
            job = j.job
            if job.job_id in self._by_id:
                raise SimulationError(f"workload: job id {job.job_id!r} appears twice")
            self._by_id[job.job_id] = j
            kinds = []
            for kind, variant in job.variants.items():
                drawn += 1
                if kind not in self.cluster.kinds:
                    continue
                key = (kind, variant.request)
                vec = vectors.get(key)
                if vec is None:
                    vec = vectors[key] = self._checked_vector(job, kind, variant.request)
                base = variant.estimate_s if variant.estimate_s is not None else variant.duration_s
                kinds.append(kind)
                j.requests[kind] = variant.request
                j.vectors[kind] = vec
                j.est_total[kind] = float(base * factors[drawn - 1]) if factors is not None else float(base)
                j.vids[kind] = next_vid
                next_vid += 1
            if not kinds:
                raise SimulationError(f"job {job.job_id}: none of its kinds ({', '.join(job.variants)}) is served "
                                      f"by this cluster (kinds: {', '.join(self.cluster.kinds)})")
            j.kinds = tuple(kinds)

    def _checked_vector(self, job: SimJob, kind: str, request: Resources) -> Vector:
        try:
            vec = self.cluster.vector(request)
        except SimulationError as exc:
            raise SimulationError(f"job {job.job_id} variant {kind}: {exc}") from None
        largest = self._largest.get(kind)
        if largest is None:
            largest = self._largest[kind] = self.cluster.largest(kind)
        if any(v > c for v, c in zip(vec, largest, strict=True)):
            raise SimulationError(f"job {job.job_id} variant {kind}: requests {request}, more than any node of "
                                  f"partition {self.cluster.kinds[kind]} has ({self.cluster.resources(largest)})")
        return vec

    # ---- the kernel ------------------------------------------------------------------------------------

    def _push(self, t: float, prio: int, payload: int, version: int = 0) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, prio, self._seq, payload, version))

    def _push_next_arrival(self) -> None:
        if self._next_arrival < len(self._jobs):
            j = self._jobs[self._next_arrival]
            self._next_arrival += 1
            self._push(j.job.submit_time, ARRIVAL, j.idx)

    def run(self) -> SimResult:
        if self._ran:
            raise SimulationError("an Engine runs once; build a new one")
        self._ran = True
        started = time.perf_counter()
        periodic = self.options.mode != "event"
        idle_calls = self.options.call_when_idle
        heap = self._heap
        self._push_next_arrival()
        if periodic and self._jobs:
            period = self.options.period_s
            self._push(math.ceil(self._jobs[0].job.submit_time / period) * period, TICK, 0)
        handlers = (self._on_finish, self._on_grace_end, self._on_arrival, self._on_profiled, self._on_tick)
        pop = heapq.heappop
        by_event = self._by_event
        events = 0
        next_progress = 0
        while heap:
            t = heap[0][0]
            if t < self.now:
                raise SimulationInvariantError(f"t={t:g}: time went backwards from {self.now:g}")
            self.now = t
            changed = False
            for _ in range(_MAX_CALLS_PER_INSTANT):
                while heap and heap[0][0] == t:
                    _, prio, _, payload, version = pop(heap)
                    if handlers[prio](payload, version, t):
                        changed = True
                        events += 1
                        by_event[prio] += 1
                # A scheduling point: every event of the instant is in.
                if periodic or not changed or not (self._pending or idle_calls):
                    break
                # A plan that freed resources (cancel, zero-grace preemption) is followed by another decision
                # at the same instant, as if the release were an event; otherwise the instant is done.
                changed = self._schedule(t)[1]
            else:
                raise SimulationError(f"t={t:g}: {_MAX_CALLS_PER_INSTANT} policy calls at one instant; the plans "
                                      "keep creating events at the same time")
            if self._alloc_changed:
                self._sample(t)
            if self.progress is not None and events >= next_progress:
                next_progress = events + _PROGRESS_EVERY
                self.progress(Progress(len(self._records), len(self._jobs), events, t))
        self._events = events
        self._finish_checks()
        if self.progress is not None:
            self.progress(Progress(len(self._records), len(self._jobs), events, self.now))
        return self._result(time.perf_counter() - started)

    def _sample(self, t: float) -> None:
        if self._util_t and self._util_t[-1] == t:
            del self._util_v[-len(self._util_cols):]
            self._util_t.pop()
        self._util_t.append(t)
        for p in self.cluster.partitions:
            self._util_v.extend(self.cluster.used[p])
        self._alloc_changed = False

    # ---- events ----------------------------------------------------------------------------------------

    def _on_arrival(self, idx: int, _version: int, t: float) -> bool:
        self._push_next_arrival()
        self._arrived += 1
        j = self._jobs[idx]
        opts = self.options
        measured = j.job.meta.get("profiling_delay_s")  # set by sim.profiling_model: the samples' own times
        if measured is not None:
            delay = float(measured)
        elif opts.profiling_fixed_s > 0 or opts.profiling_fraction > 0:
            longest = max(v.duration_s for v in j.job.variants.values())
            delay = opts.profiling_fixed_s + opts.profiling_fraction * longest
        else:
            delay = 0.0
        if delay > 0:
            j.status = PROFILING
            self._busy += 1
            self._push(t + delay, PROFILED, idx)
            return True
        self._make_visible(j)
        return True

    def _on_profiled(self, idx: int, _version: int, t: float) -> bool:
        self._busy -= 1
        self._make_visible(self._jobs[idx])
        return True

    def _make_visible(self, j: _Job) -> None:
        j.status = PENDING
        self._pending += 1
        self._max_pending = max(self._max_pending, self._pending)
        self._visible[j.group_id] = j
        self._dirty[j.idx] = None

    def _on_finish(self, idx: int, version: int, t: float) -> bool:
        j = self._jobs[idx]
        if version != j.version:
            return False  # superseded by a preemption or cancel
        j.done += j.rate * (j.complete_at - j.seg_start)
        j.productive += j.complete_at - j.seg_start
        total = j.job.work
        if not math.isclose(j.done, total, rel_tol=_REL_TOL, abs_tol=_REL_TOL * total):
            raise SimulationInvariantError(f"t={t:g}: group {j.group_id} finished with work {j.done!r} of {total!r}")
        j.done = total
        self._release(j, t)
        self._close(j, t, DONE)
        return True

    def _on_grace_end(self, idx: int, version: int, t: float) -> bool:
        j = self._jobs[idx]
        if version != j.version:
            return False
        self._requeue(j, t)
        return True

    def _on_tick(self, _payload: int, _version: int, t: float) -> bool:
        moved = self._schedule(t)[0] if self._pending or self.options.call_when_idle else False
        if self._open:
            if not moved and not self._busy and self._arrived == len(self._jobs):
                self._stalled(t)
            self._push(t + self.options.period_s, TICK, 0)
        return True

    def _finish_checks(self) -> None:
        if self._open:
            self._stalled(self.now)
        busy = self.cluster.busy_nodes()
        if busy:
            raise SimulationInvariantError(f"t={self.now:g}: every job ended but nodes still hold resources: "
                                           f"{', '.join(busy[:5])}")

    def _stalled(self, t: float) -> None:
        waiting = [j.group_id for j in self._visible.values() if j.status == PENDING]
        raise SimulationError(f"t={t:g}: stalled with {self._open} unfinished jobs, nothing running and no event "
                              f"left; the policy starts none of the pending groups (first: {', '.join(waiting[:3])})")

    # ---- state changes ---------------------------------------------------------------------------------

    def _release(self, j: _Job, t: float) -> None:
        self._releases += 1
        self.cluster.release(j.node, j.alloc_vec, j.group_id, t)
        self._alloc_changed = True
        self._busy -= 1
        j.node = -1

    def _close(self, j: _Job, t: float, status: int) -> None:
        self._clear_marks_for(j.group_id)
        j.status = status
        j.version += 1
        self._open -= 1
        del self._visible[j.group_id]
        self._dirty[j.idx] = None
        self._records.append(JobRecord(
            j.group_id, j.job.user, j.job.job_class, j.job.submit_time, j.first_start, t, j.productive, j.kind,
            j.preemptions, cancelled=status == CANCELLED, deadline=j.job.deadline))

    def _clear_marks_for(self, beneficiary: str) -> None:
        """The beneficiary started or left: its victims' earmarks are void."""
        for idx in self._victims.pop(beneficiary, ()):
            victim = self._jobs[idx]
            if victim.beneficiary == beneficiary:
                victim.beneficiary = None
                victim.marked_nodes = ()
                self._dirty[idx] = None

    def _requeue(self, j: _Job, t: float) -> None:
        self._release(j, t)
        if j.resize_to is not None:
            self._resize_kinds(j, j.resize_to)
            j.resize_to = None
        else:
            j.preemptions += 1  # counted when it is back in the queue, as slurmxd counts it
        j.grace_deadline = None
        j.requeue_time = t
        if self.options.checkpoint == "lose":
            j.done = 0.0
            j.productive = 0.0
        j.status = PENDING
        j.version += 1
        j.run_estimate = None
        self._pending += 1
        self._max_pending = max(self._max_pending, self._pending)
        self._dirty[j.idx] = None

    # ---- the policy ------------------------------------------------------------------------------------

    def _schedule(self, now: float) -> tuple[bool, bool]:
        """One decision of the shared cycle (`slurmx.cycle.decide`); says whether anything started, stopped or was
        cancelled, and whether resources were released (event mode then decides again at the same instant)."""
        moves, releases = self._moves, self._releases
        self._calls += 1
        try:
            decision = decide(self.policy, self, now, self.decisions, self._calls)
        except PlanError as exc:
            raise SimulationError(str(exc)) from None
        self._policy_wall += decision.policy_s
        return self._moves != moves, self._releases != releases

    # ---- the cycle's backend: observe, notes, one handler per action type --------------------------------

    def observe(self, now: float) -> ClusterView:
        return self._view(now)

    def take_notes(self, plan: Plan, now: float) -> None:
        """Count the notes the run reports; first, the view is gone: what it still lends is frozen before the plan
        changes the engine's state."""
        if freeze_if_alive(self._lent):
            self._queues.keep_read()
        for note in plan.notes:
            for prefix in self.options.count_notes:
                if note.startswith(prefix):
                    self._notes[prefix] += 1

    def _each(self, apply: Callable[[Any, float], Outcome | None]) -> Handler:
        """A handler applying a batch action by action (`apply` returns None for an applied action)."""
        def handle(batch: Sequence[Action], now: float) -> list[Outcome]:
            done = []
            for action in batch:
                name = type(action).__name__
                self._actions[name] = self._actions.get(name, 0) + 1
                done.append(apply(action, now) or Outcome(APPLIED))
            return done
        return handle

    def _view(self, now: float) -> ClusterView:
        if self.options.view == "naive":
            every_node = self.cluster.rebuild_views()
            every_group = {gid: self._group_view(j) for gid, j in self._visible.items()}
            self._dirty.clear()
            return ClusterView(now, every_node, self.cluster.partitions, every_group, self.cluster.kinds)
        nodes = self.cluster.refresh_views()
        groups, stale = self._groups, self._stale_groups
        self._queues.new_generation()
        for idx in self._dirty:
            j = self._jobs[idx]
            gid = j.group_id
            if gid in self._visible:
                if gid in groups:
                    stale.add(gid)  # rebuilt if read: a FIFO never reads most running groups
                else:
                    groups[gid] = self._group_view(j)
                self._file(j, 1 if j.status == PENDING else 2)
            else:
                self._file(j, 0)
                stale.discard(gid)
                if groups.pop(gid, None) is not None:
                    self._holes += 1
        self._dirty.clear()
        if self._holes * 2 > len(groups):
            # A view that outlives its decision is frozen with a copy of this dict, and CPython copies a dict
            # with many deleted slots key by key instead of cloning its table: keep it compact.
            self._groups = groups = dict(groups)
            self._holes = 0
        lent = LentSnapshot(groups, stale, self._group_view_of)
        self._lent[:] = [weakref.ref(nodes), weakref.ref(lent)]
        index = _Index(self.cluster, nodes, self._queues)
        return ClusterView(now, nodes, self.cluster.partitions, lent, self.cluster.kinds, index)

    def _file(self, j: _Job, queue: int) -> None:
        """Move `j` into sorted queue `queue` (0: out of both), keeping each sorted by (submit, id)."""
        if j.listed == queue:
            return
        key = (j.job.submit_time, j.group_id)
        if j.listed:
            listed = self._queues.keys[j.listed]
            del listed[bisect.bisect_left(listed, key)]
        if queue:
            bisect.insort(self._queues.keys[queue], key)
        j.listed = queue

    def _group_view_of(self, group_id: str) -> Group:
        return self._group_view(self._by_id[group_id])

    def _group_view(self, j: _Job) -> Group:
        job = j.job
        kinds = self.cluster.kinds
        remaining = job.work - j.done
        if j.status == PENDING:
            state = VariantState.HELD if j.held else VariantState.PENDING
            share = remaining / job.work
            variants = tuple(
                Variant(j.group_id, k, j.vids[k], state, j.requests[k], kinds[k], (), j.est_total[k] * share,
                        j.priority, job.submit_time)
                for k in j.kinds)
        else:
            assert j.kind is not None
            node = self.cluster.nodes[j.node].name
            variants = (Variant(j.group_id, j.kind, j.vids[j.kind], VariantState.RUNNING, j.alloc, kinds[j.kind],
                                (node,), j.run_estimate, j.priority, job.submit_time, j.seg_start),)
        return Group(j.group_id, j.group_id, job.user, job.job_class, variants, work=remaining, grace_s=job.grace_s,
                     preemptions=j.preemptions, submit_time=job.submit_time, grace_deadline=j.grace_deadline,
                     preempted_for=j.beneficiary, preempted_nodes=j.marked_nodes, requeue_time=j.requeue_time)

    def _set_priority(self, a: SetPriority, now: float) -> Outcome | None:
        j = self._known(a.group_id, "SetPriority", now)
        if j.status != PENDING:
            return Outcome(REFUSED, "no waiting variant")  # as on Slurm: only pending variants take a priority
        j.priority = a.priority
        self._dirty[j.idx] = None
        return None

    def _hold(self, a: Hold, now: float) -> Outcome | None:
        j = self._known(a.group_id, "Hold", now)
        if j.status != PENDING:
            return Outcome(REFUSED, "no waiting variant")
        if j.held:
            return Outcome(REPEATED)
        j.held = True
        self._dirty[j.idx] = None
        return None

    def _release_hold(self, a: Release, now: float) -> Outcome | None:
        j = self._known(a.group_id, "Release", now)
        if j.status != PENDING:
            return Outcome(REFUSED, "no waiting variant")
        if not j.held:
            return Outcome(REPEATED)
        j.held = False
        self._dirty[j.idx] = None
        return None

    def _known(self, group_id: str, what: str, now: float) -> _Job:
        j = self._by_id.get(group_id)
        if j is None:
            raise SimulationError(f"t={now:g}: {what}: unknown group {group_id!r}")
        if j.status in (WAITING, PROFILING):
            raise SimulationError(f"t={now:g}: {what}: group {group_id} is not in the view yet (not submitted or "
                                  "still profiling)")
        if j.status in (DONE, CANCELLED):
            word = "completed" if j.status == DONE else "was cancelled"
            raise SimulationInvariantError(f"t={now:g}: {what}: group {group_id} {word} already")
        return j

    def _start(self, a: Start, now: float) -> Outcome | None:
        j = self._known(a.group_id, "Start", now)
        if j.status in (RUNNING, GRACE):
            where = self.cluster.nodes[j.node].name
            raise SimulationInvariantError(f"t={now:g}: group {a.group_id} started twice: it already runs "
                                           f"({j.kind} on {where} since t={j.seg_start:g})")
        if a.kind not in j.vectors or a.kind not in j.kinds:
            raise SimulationError(f"t={now:g}: Start: group {a.group_id} has no active {a.kind!r} variant "
                                  f"(active: {', '.join(j.kinds)})")
        request = j.requests[a.kind]
        alloc = request if a.alloc is None or a.alloc is request or a.alloc == request else a.alloc
        vec = j.vectors[a.kind] if alloc is request else self.cluster.vector(alloc)
        node = self._start_node(a, vec, now)
        self.cluster.allocate(node, vec, a.group_id, now)
        self._moves += 1
        speed = 1.0
        if j.job.speed is not None and alloc is not request:
            speed = float(j.job.speed(a.kind, alloc.cpus, alloc.mem_mb))
            if not speed > 0:
                raise SimulationError(f"t={now:g}: group {a.group_id}: speed({a.kind}, {alloc.cpus}, "
                                      f"{alloc.mem_mb}) = {speed}; must be > 0")
        variant = j.job.variants[a.kind]
        j.rate = j.job.work / variant.duration_s * speed
        if j.preempted_at is not None:
            self._reschedule.append(now - j.preempted_at)
            j.preempted_at = None
        if j.first_start is None:
            j.first_start = now
        j.status = RUNNING
        j.kind = a.kind
        j.kinds = (a.kind,)
        j.node = node
        j.alloc = alloc
        j.alloc_vec = vec
        j.seg_start = now
        j.held = False
        remaining = j.job.work - j.done
        j.run_estimate = j.est_total[a.kind] * remaining / j.job.work
        # Time left as a share of the variant's duration: exact for whole durations, where `remaining / rate`
        # rounds up (7 min -> 420.00000000000006 s) and a tick-mode job would free its node a tick late.
        j.complete_at = now + remaining / j.job.work * variant.duration_s / speed
        j.version += 1
        finish = j.complete_at
        if self.options.mode == "round":
            period = self.options.period_s
            finish = max(now, math.ceil(finish / period - 1e-9) * period)
        self._push(finish, FINISH, j.idx, j.version)
        if j.group_id in self._victims:
            self._clear_marks_for(j.group_id)
        self._pending -= 1
        self._busy += 1
        self._alloc_changed = True
        self._dirty[j.idx] = None
        return None

    def _start_node(self, a: Start, vec: Vector, now: float) -> int:
        partition = self.cluster.kinds.get(a.kind)
        if partition is None:
            raise SimulationError(f"t={now:g}: Start {a.group_id}: no partition serves kind {a.kind!r}")
        if len(a.nodes) > 1:
            raise SimulationError(f"t={now:g}: Start {a.group_id}: multi-node starts ({', '.join(a.nodes)}) are not "
                                  "modelled; jobs run on one node")
        if a.nodes:
            index = self.cluster.index.get(a.nodes[0])
            if index is None:
                raise SimulationError(f"t={now:g}: Start {a.group_id}: unknown node {a.nodes[0]!r}")
            if self.cluster.nodes[index].partition != partition:
                raise SimulationError(f"t={now:g}: Start {a.group_id}: node {a.nodes[0]} is not in partition "
                                      f"{partition} serving {a.kind}")
            return index
        found = self.cluster.first_fit(a.kind, vec)
        if found is None:
            raise SimulationInvariantError(f"t={now:g}: Start {a.group_id}: no node of partition {partition} has "
                                           f"room for {self.cluster.resources(vec)}; the policy over-allocates")
        return found

    def _preempt(self, a: Preempt, now: float) -> Outcome | None:
        j = self._known(a.group_id, "Preempt", now)
        if j.status == GRACE:
            self._repeated_preempts += 1  # already signalled: the enforcer skips it as already applied
            return Outcome(REPEATED)
        if j.status != RUNNING:
            raise SimulationError(f"t={now:g}: Preempt: group {a.group_id} is not running")
        if a.grace_s < 0:
            raise SimulationError(f"t={now:g}: Preempt {a.group_id}: negative grace {a.grace_s}")
        if now > j.complete_at:
            raise SimulationInvariantError(f"t={now:g}: Preempt {a.group_id}: its work completed at "
                                           f"t={j.complete_at:g} and it still runs")
        if a.beneficiary is not None:
            other = self._by_id.get(a.beneficiary)
            if other is None or other.group_id not in self._visible:
                raise SimulationError(f"t={now:g}: Preempt {a.group_id}: beneficiary {a.beneficiary!r} is not a "
                                      "group in the view")
            self._victims.setdefault(a.beneficiary, []).append(j.idx)
        j.beneficiary = a.beneficiary
        self._enter_grace(j, a.grace_s, now)
        return None

    def _enter_grace(self, j: _Job, grace_s: int, now: float) -> None:
        """The grace protocol, as slurmxd runs it: the job stops making progress, and is requeued at the deadline."""
        self._moves += 1
        j.done = min(j.job.work, j.done + j.rate * (now - j.seg_start))
        j.productive += now - j.seg_start
        j.status = GRACE
        j.version += 1
        j.preempted_at = now
        j.grace_deadline = now + grace_s
        # The nodes it frees are earmarked for its beneficiary; a victim preempted for no one earmarks nothing.
        j.marked_nodes = (self.cluster.nodes[j.node].name,) if j.beneficiary is not None else ()
        self._dirty[j.idx] = None
        if grace_s == 0:
            self._requeue(j, now)
        else:
            self._push(now + grace_s, GRACE_END, j.idx, j.version)

    def _cancel(self, a: Cancel, now: float) -> Outcome | None:
        j = self._known(a.group_id, "Cancel", now)
        self._moves += 1
        if j.status == PENDING:
            self._pending -= 1
        else:
            if j.status == RUNNING:
                j.done += j.rate * (now - j.seg_start)
                j.productive += now - j.seg_start
            self._release(j, now)
        self._close(j, now, CANCELLED)
        return None

    def _resize(self, a: Resize, now: float) -> Outcome | None:
        """A pending group is resized in place; a running one, as slurmxd does it, through the grace protocol:
        its own grace period, then a requeue at the new size (not counted as a preemption)."""
        j = self._known(a.group_id, "Resize", now)
        if j.status == PENDING:
            self._resize_kinds(j, a)
            self._dirty[j.idx] = None
            return None
        if j.status == GRACE:
            return Outcome(REPEATED)  # already being preempted or resized
        if j.alloc.cpus == a.cpus and j.alloc.mem_mb == a.mem_mb:
            return Outcome(REPEATED, "already of that size")
        for k in j.kinds:  # the size is checked now, as Slurm would refuse it at the update
            self._checked_vector(j.job, k, Resources(a.cpus, a.mem_mb, j.requests[k].gres))
        j.resize_to = a
        self._enter_grace(j, j.job.grace_s, now)
        return None

    def _resize_kinds(self, j: _Job, a: Resize) -> None:
        for k in j.kinds:
            request = Resources(a.cpus, a.mem_mb, j.requests[k].gres)
            j.vectors[k] = self._checked_vector(j.job, k, request)
            j.requests[k] = request

    # ---- result ----------------------------------------------------------------------------------------

    def _result(self, wall: float) -> SimResult:
        cols = len(self._util_cols)
        values = np.frombuffer(self._util_v, dtype=np.float64).reshape(-1, cols) if cols else np.zeros((0, 0))
        capacity = tuple(c for p in self.cluster.partitions for c in self.cluster.partition_dims[p])
        stats = RunStats(
            events=self._events,
            by_event={name: n for name, n in zip(EVENT_NAMES, self._by_event, strict=True)},
            policy_calls=self._calls,
            actions=dict(sorted(self._actions.items())),
            repeated_preempts=self._repeated_preempts,
            max_pending=self._max_pending,
            notes=dict(self._notes),
            end_time=self.now,
            wall_s=wall,
            policy_wall_s=self._policy_wall,
        )
        records = tuple(sorted(self._records, key=lambda r: self._by_id[r.job_id].idx))
        return SimResult(records, np.frombuffer(self._util_t, dtype=np.float64).copy(), values.copy(),
                         self._util_cols, capacity, tuple(self._reschedule), stats, self.options)
