"""The view the policy reads of the simulator's model world, built incrementally; a mixin of `Engine`.

Apart from the kernel because it is its own machinery: cached immutable `Group`s rebuilt only when read after a
change, snapshots lent to the policy, and sorted queues answering `ClusterView`'s index queries.

What the view shows of a job: pending, its active variants (PENDING, or HELD after `Hold`) with the estimate
of its remaining work and `Group.work` = the work left; running (also during a grace period), one RUNNING
variant on its node with its allocation, `start_time` of the current run and the estimate from there; a
preempted group carries `grace_deadline` while in grace, `requeue_time` once back in the queue, and
`preempted_for`/`preempted_nodes` until its beneficiary starts or leaves. Finished groups leave the view,
as they leave squeue.
"""

from __future__ import annotations

import bisect
import weakref
from collections.abc import Iterator, Mapping
from typing import Any

from slurmx.core.model import (
    ClusterView,
    EndKey,
    Group,
    KindName,
    Node,
    Partition,
    QueueKey,
    Variant,
    VariantState,
    expected_end,
)
from slurmx.core.resources import Resources
from slurmx.core.snapshot import LentSnapshot
from slurmx.sim.cluster import ModelCluster, SimulationError
from slurmx.sim.engine_state import PENDING, EngineState, JobState

__all__ = ["Queues", "ViewSteps"]


class Queues:
    """The engine's sorted queues (index 1 pending, 2 running), each kind's running jobs by expected end, and
    which of them the current view has read."""

    __slots__ = ("ends", "ends_kept", "ends_read", "ends_wanted", "generation", "keys", "read", "running_kept",
                 "running_wanted")

    def __init__(self) -> None:
        self.keys: list[list[QueueKey]] = [[], [], []]
        self.read = [False, False, False]
        self.ends: dict[KindName, list[EndKey]] = {}
        self.ends_read: set[KindName] = set()
        # The by-end lists cost every run a sorted insert per start and finish; they are kept only from the
        # first view after a policy asked for them (EASY's reservation), which meanwhile scans its own groups.
        self.ends_wanted = False
        self.ends_kept = False
        # Likewise the running queue (a bisect in and out per job): kept from the first view after a policy read
        # `running_groups` (or the by-end lists, which are filed from it); until then a view scans its groups.
        self.running_wanted = False
        self.running_kept = False
        self.generation = 0

    def keep_read(self) -> None:
        """The last view outlived its decision: a queue it read is left to it, the engine goes on with a copy
        (a list of pointers); an unread one is changed in place, and the old view scans instead."""
        for q, read in enumerate(self.read):
            if read:
                self.keys[q] = self.keys[q].copy()
        for kind in self.ends_read:
            self.ends[kind] = self.ends[kind].copy()

    def new_generation(self) -> None:
        """A new snapshot is coming: an older view's index answers "no longer known" from now on."""
        self.read = [False, False, False]
        self.ends_read.clear()
        self.generation += 1


class _Index:
    """The engine's `ViewIndex`: pending and running queues kept sorted as jobs change (bisect on
    `(submit_time, group_id)`, the order `ClusterView` defines), and first-fit candidates from the model
    cluster's free-capacity arrays."""

    __slots__ = ("_cluster", "_generation", "_nodes", "_queues")

    def __init__(self, cluster: ModelCluster, nodes: Mapping[str, Node], queues: Queues) -> None:
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
        queues = self._queues
        if not queues.running_kept:
            queues.running_wanted = True
            return None
        return self._keys(2)

    def running_end_keys(self, kind: KindName) -> list[EndKey] | None:
        queues = self._queues
        if queues.generation != self._generation:
            return None
        if not queues.ends_kept:
            queues.ends_wanted = True
            return None
        queues.ends_read.add(kind)
        return queues.ends.setdefault(kind, [])

    def node_names_of_kind(self, kind: KindName) -> frozenset[str]:
        return self._cluster.node_names_of_kind(kind)

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

    def fitting_node_names(self, kind: KindName, request: Resources) -> Iterator[str]:
        cluster = self._cluster
        if kind not in cluster.kind_nodes:
            return iter(())
        try:
            vec = cluster.vector(request)
        except SimulationError:
            return iter(())
        return cluster.fitting_names(kind, vec)


class ViewSteps(EngineState):
    """The policy's `ClusterView`: nodes from the model cluster, groups from the engine's jobs."""

    _groups: dict[str, Group]  # the cached group views, lent to the policy
    _stale_groups: set[str]  # groups whose view is rebuilt when a policy reads it
    _lent: list[weakref.ReferenceType[LentSnapshot[str, Any]]]  # this decision's snapshots
    _holes: int  # deletions from _groups since it was last rebuilt
    _queues: Queues
    _partitions: LentSnapshot[str, Partition]  # the site's, which never change: lent to each view uncopied
    _kinds: LentSnapshot[KindName, str]

    def _view(self, now: float) -> ClusterView:
        if self.options.view == "naive":
            every_node = self.cluster.rebuild_views()
            every_group = {gid: self._group_view(j) for gid, j in self._visible.items()}
            self._dirty.clear()
            self._drop_gone()
            return ClusterView(now, every_node, self.cluster.partitions, every_group, self.cluster.kinds)
        nodes = self.cluster.refresh_views()
        groups, stale = self._groups, self._stale_groups
        queues = self._queues
        queues.new_generation()
        if (queues.running_wanted or queues.ends_wanted) and not queues.running_kept:
            self._start_keeping_running()
        if queues.ends_wanted and not queues.ends_kept:
            self._start_keeping_ends()
        keep_ends = queues.ends_kept
        running = 2 if queues.running_kept else 0
        for idx in self._dirty:
            j = self._jobs[idx]
            gid = j.group_id
            if gid in self._visible:
                if gid in groups:
                    stale.add(gid)  # rebuilt if read: a FIFO never reads most running groups
                else:
                    groups[gid] = self._group_view(j)
                self._file(j, 1 if j.status == PENDING else running)
            else:
                self._file(j, 0)
                stale.discard(gid)
                if groups.pop(gid, None) is not None:
                    self._holes += 1
            if keep_ends:
                self._file_end(j)
        self._dirty.clear()
        self._drop_gone()
        if self._holes * 2 > len(groups):
            # A view that outlives its decision is frozen with a copy of this dict, and CPython copies a dict
            # with many deleted slots key by key instead of cloning its table: keep it compact.
            self._groups = groups = dict(groups)
            self._holes = 0
        lent = LentSnapshot(groups, stale, self._group_view_of)
        self._lent[:] = [weakref.ref(nodes), weakref.ref(lent)]
        index = _Index(self.cluster, nodes, self._queues)
        return ClusterView(now, nodes, self._partitions, lent, self._kinds, index)

    def _drop_gone(self) -> None:
        """Forget the jobs that ended (their records stay): a long replay holds only the jobs in the system."""
        for idx in self._gone:
            j = self._jobs.pop(idx)
            del self._by_id[j.group_id]
        self._gone.clear()

    def _file(self, j: JobState, queue: int) -> None:
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

    def _start_keeping_running(self) -> None:
        """From now on keep the running queue: filed for every job already running (dirty ones follow in `_view`)."""
        self._queues.running_kept = True
        for j in self._visible.values():
            if j.status != PENDING:
                self._file(j, 2)

    def _start_keeping_ends(self) -> None:
        """From now on keep the by-end lists: filed for every job already running (dirty ones follow in `_view`)."""
        self._queues.ends_kept = True
        for j in self._visible.values():
            if j.listed == 2:
                self._file_end(j)

    def _file_end(self, j: JobState) -> None:
        """Keep `j` in its kind's by-expected-end list while it runs (visible, not pending), at its current end."""
        filed = j.end_filed
        wanted = None
        if j.listed == 2 and j.kind is not None:
            wanted = (j.kind, (expected_end(j.seg_start, j.run_estimate, j.seg_start), j.job.submit_time, j.group_id))
        if wanted == filed:
            return
        ends = self._queues.ends
        if filed is not None:
            listed = ends[filed[0]]
            del listed[bisect.bisect_left(listed, filed[1])]
        if wanted is not None:
            bisect.insort(ends.setdefault(wanted[0], []), wanted[1])
        j.end_filed = wanted

    def _group_view_of(self, group_id: str) -> Group:
        return self._group_view(self._by_id[group_id])

    def _group_view(self, j: JobState) -> Group:
        job = j.job
        kinds = self.cluster.kinds
        remaining = job.work - j.done
        if j.status == PENDING:
            state = VariantState.HELD if j.held else VariantState.PENDING
            share = remaining / job.work
            facts = j.facts
            variants = tuple([
                Variant(j.group_id, k, f.vid, state, f.request, kinds[k], (), f.est_total * share, j.priority,
                        job.submit_time, node_count=f.node_count, placement=f.placement)
                for k, f in zip(j.kinds, map(facts.__getitem__, j.kinds))])  # noqa: B905 (the same kinds)
        else:
            assert j.kind is not None
            nodes = self.cluster.nodes
            ran = j.facts[j.kind]
            variants = (Variant(j.group_id, j.kind, ran.vid, VariantState.RUNNING, j.alloc, kinds[j.kind],
                                tuple([nodes[n].name for n in j.nodes]), j.run_estimate, j.priority, job.submit_time,
                                j.seg_start, node_count=ran.node_count, placement=ran.placement),)
        return Group(j.group_id, j.group_id, job.user, job.job_class, variants, work=remaining, grace_s=job.grace_s,
                     preemptions=j.preemptions, submit_time=job.submit_time, grace_deadline=j.grace_deadline,
                     preempted_for=j.beneficiary, preempted_nodes=j.marked_nodes, requeue_time=j.requeue_time)
