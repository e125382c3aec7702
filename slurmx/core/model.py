"""Immutable domain model: the cluster snapshot a policy reads.

Policies are pure functions of a `ClusterView`, so everything here is a frozen value: a policy cannot
change the world behind the daemon's back, and two runs on the same view give the same plan.
Resource kinds ("cpu", "gpu", "accel", ...) are site-defined names, hence plain strings.
Long because it is the one vocabulary every policy reads (states, nodes, variants, groups, their queues and the
view, types that refer to one another), and nearly a fifth of it is state tables, one entry a line (Slurm's job and
node state names, the active and finished sets).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from operator import itemgetter
from types import MappingProxyType
from typing import Protocol, overload

from slurmx.core.fastinit import fast_init
from slurmx.core.placement import ANYWHERE, Placement
from slurmx.core.resources import Resources
from slurmx.core.snapshot import LentSnapshot

__all__ = [
    "ClusterView",
    "EndKey",
    "Group",
    "GroupQueue",
    "GroupState",
    "JobClass",
    "KindName",
    "Node",
    "Partition",
    "Variant",
    "VariantState",
    "ViewIndex",
    "expected_end",
]

KindName = str


class JobClass(StrEnum):
    """Service class of a group; a site maps each to a Slurm QOS."""

    TE = "te"  # trial-and-error: interactive-ish, latency sensitive
    BE = "be"  # best-effort: throughput work that may be preempted


class GroupState(StrEnum):
    """Lifecycle of a whole group, as slurmx reports it to the user."""

    PENDING = "pending"
    PROFILING = "profiling"
    STARTING = "starting"
    RUNNING = "running"
    PREEMPTING = "preempting"
    REQUEUED = "requeued"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class VariantState(StrEnum):
    """The Slurm job states slurmx distinguishes for one variant (one Slurm job)."""

    PENDING = "pending"
    HELD = "held"
    RUNNING = "running"
    COMPLETING = "completing"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMEOUT = "timeout"
    PREEMPTED = "preempted"
    NODE_FAIL = "node_fail"
    OUT_OF_MEMORY = "out_of_memory"
    REQUEUED = "requeued"
    SUSPENDED = "suspended"
    UNKNOWN = "unknown"

    @classmethod
    def from_slurm(cls, state: str) -> VariantState:
        """Map squeue/sacct spellings ("CANCELLED by 0", "R", "REQUEUE_HOLD") to a state.

        Anything unrecognised is UNKNOWN rather than an error: newer Slurm versions add states,
        and the daemon must keep running on them.
        """
        words = state.strip().split()
        if not words:
            return cls.UNKNOWN
        token = words[0].rstrip("+*").upper()
        return _SLURM_STATES.get(token, cls.UNKNOWN)

    @property
    def is_active(self) -> bool:
        """Still owned by Slurm's queue: may run, runs, or will run again."""
        return self in _ACTIVE

    @property
    def is_finished(self) -> bool:
        """Terminal for this Slurm job; it will not run again without a new submission or requeue."""
        return self in _FINISHED


_ACTIVE = frozenset(
    {
        VariantState.PENDING,
        VariantState.HELD,
        VariantState.RUNNING,
        VariantState.COMPLETING,
        VariantState.REQUEUED,
        VariantState.SUSPENDED,
    }
)
_FINISHED = frozenset(
    {
        VariantState.COMPLETED,
        VariantState.FAILED,
        VariantState.CANCELLED,
        VariantState.TIMEOUT,
        VariantState.PREEMPTED,
        VariantState.NODE_FAIL,
        VariantState.OUT_OF_MEMORY,
    }
)
_OCCUPYING = frozenset({VariantState.RUNNING, VariantState.COMPLETING})
_NEVER_STARTED = frozenset({VariantState.PENDING, VariantState.HELD})

# Long names from squeue -o %T / sacct, and the compact codes from squeue -o %t.
_SLURM_STATES: dict[str, VariantState] = {
    "PENDING": VariantState.PENDING,
    "PD": VariantState.PENDING,
    "REQUEUE_HOLD": VariantState.HELD,
    "RH": VariantState.HELD,
    "SPECIAL_EXIT": VariantState.HELD,  # Slurm holds the job after a special exit
    "SE": VariantState.HELD,
    "RUNNING": VariantState.RUNNING,
    "R": VariantState.RUNNING,
    "CONFIGURING": VariantState.RUNNING,  # nodes allocated and booting: the variant has started
    "CF": VariantState.RUNNING,
    "RESIZING": VariantState.RUNNING,
    "RS": VariantState.RUNNING,
    "SIGNALING": VariantState.RUNNING,
    "SI": VariantState.RUNNING,
    "COMPLETING": VariantState.COMPLETING,
    "CG": VariantState.COMPLETING,
    "STAGE_OUT": VariantState.COMPLETING,
    "SO": VariantState.COMPLETING,
    "COMPLETED": VariantState.COMPLETED,
    "CD": VariantState.COMPLETED,
    "FAILED": VariantState.FAILED,
    "F": VariantState.FAILED,
    "BOOT_FAIL": VariantState.FAILED,
    "BF": VariantState.FAILED,
    "CANCELLED": VariantState.CANCELLED,
    "CA": VariantState.CANCELLED,
    "REVOKED": VariantState.CANCELLED,  # a federation sibling started elsewhere
    "RV": VariantState.CANCELLED,
    "TIMEOUT": VariantState.TIMEOUT,
    "TO": VariantState.TIMEOUT,
    "DEADLINE": VariantState.TIMEOUT,
    "DL": VariantState.TIMEOUT,
    "PREEMPTED": VariantState.PREEMPTED,
    "PR": VariantState.PREEMPTED,
    "NODE_FAIL": VariantState.NODE_FAIL,
    "NF": VariantState.NODE_FAIL,
    "OUT_OF_MEMORY": VariantState.OUT_OF_MEMORY,
    "OOM": VariantState.OUT_OF_MEMORY,
    "REQUEUED": VariantState.REQUEUED,
    "RQ": VariantState.REQUEUED,
    "REQUEUE_FED": VariantState.REQUEUED,
    "RF": VariantState.REQUEUED,
    "SUSPENDED": VariantState.SUSPENDED,
    "S": VariantState.SUSPENDED,
    "STOPPED": VariantState.SUSPENDED,
    "ST": VariantState.SUSPENDED,
}

# Node state flags that make a node unfit for new work. Slurm writes compound states ("IDLE+DRAIN",
# "MIXED+NOT_RESPONDING") and sinfo's compact forms ("drng", "down*"); a trailing "*" means not responding.
_UNUSABLE_NODE_FLAGS = frozenset(
    {
        "DOWN",
        "DRAIN",
        "DRAINED",
        "DRAINING",
        "DRNG",
        "DRAIN_PENDING",
        "FAIL",
        "FAILING",
        "FAILG",
        "NOT_RESPONDING",
        "NO_RESPOND",
    }
)


def _clip(res: Resources) -> Resources:
    return Resources(max(res.cpus, 0), max(res.mem_mb, 0), {k: max(v, 0) for k, v in res.gres.items()})


@dataclass(frozen=True, slots=True)
class Node:
    """One compute node: what it has, what Slurm has handed out, and its state string."""

    name: str
    partitions: tuple[str, ...]
    capacity: Resources
    allocated: Resources
    state: str
    features: tuple[str, ...] = ()
    # Derived on first use and kept: the node is immutable, and a policy reads every node's `free` per pass.
    _free: Resources | None = field(default=None, init=False, repr=False, compare=False)
    _usable: bool | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "partitions", tuple(self.partitions))
        object.__setattr__(self, "features", tuple(self.features))

    @property
    def free(self) -> Resources:
        """Unallocated resources, clipped at zero: Slurm can report more allocated than configured."""
        free = self._free
        if free is None:
            free = _clip(self.capacity - self.allocated)
            object.__setattr__(self, "_free", free)
        return free

    @property
    def is_usable(self) -> bool:
        """False for down, draining, failed or unresponsive nodes: they take no new work."""
        usable = self._usable
        if usable is None:
            text = self.state.strip().upper()
            if not text or text.endswith("*"):  # no state reported, or "*" = not responding
                usable = False
            else:
                flags = {part.strip().rstrip("~#!%$@^-") for part in text.split("+")}
                usable = not (flags & _UNUSABLE_NODE_FLAGS)
            object.__setattr__(self, "_usable", usable)
        return usable


@dataclass(frozen=True, slots=True)
class Partition:
    """A Slurm partition; `kind` is the slurmx resource kind served by it, if any."""

    name: str
    nodes: tuple[str, ...]
    kind: KindName | None = None
    max_time_s: int | None = None
    default: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))


@fast_init  # built for every waiting job each cycle: `object.__setattr__` per field was most of a view
@dataclass(frozen=True, slots=True)
class Variant:
    """One resource-kind incarnation of a group: a single Slurm job (or one not yet submitted)."""

    group_id: str
    kind: KindName
    job_id: int | None
    state: VariantState
    request: Resources
    partition: str
    nodes: tuple[str, ...] = ()
    estimate_s: float | None = None
    priority: int | None = None
    submit_time: float | None = None
    start_time: float | None = None
    # Measured CPU sensitivity (Synergy's search): (CPUs, steps/s) points at full memory; () when not measured.
    cpu_rates: tuple[tuple[int, float], ...] = ()
    # How many nodes the variant runs on; `request` is what it takes on each (Slurm's -N with per-node sizes).
    node_count: int = 1
    # Where it may run (features, the user's -w and -x, whole nodes); ANYWHERE for most variants.
    placement: Placement = ANYWHERE

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))

    @property
    def is_occupying(self) -> bool:
        """Holds resources right now (running, or still tearing down)."""
        return self.state in _OCCUPYING

    def admits(self, node: Node) -> bool:
        """Whether `node` may hold this variant as its placement asks (the partition is the caller's to check)."""
        placement = self.placement
        if placement is ANYWHERE:
            return True
        return placement.admits(node.name, node.features, not _any(node.allocated))

    def taken_on(self, node: Node) -> Resources:
        """What the variant holds on `node` once started: its request, or the whole node when exclusive."""
        return node.capacity if self.placement.exclusive else self.request


def _any(res: Resources) -> bool:
    return res.cpus > 0 or res.mem_mb > 0 or any(v > 0 for v in res.gres.values())


@fast_init
@dataclass(frozen=True, slots=True)
class Group:
    """One user job: the variants slurmx submitted for it, of which at most one should run."""

    group_id: str
    name: str
    user: str
    job_class: JobClass
    variants: tuple[Variant, ...]
    work: float | None = None
    grace_s: int = 120
    preemptions: int = 0
    submit_time: float = 0.0  # the original submission, never Slurm's reset time after a requeue
    # While a preempted group is in its grace period it still holds `preempted_nodes` until `grace_deadline`;
    # the room it frees is earmarked for `preempted_for` (the Preempt's beneficiary) until that group starts.
    grace_deadline: float | None = None
    preempted_for: str | None = None
    preempted_nodes: tuple[str, ...] = ()
    requeue_time: float | None = None
    _state: GroupState | None = field(default=None, init=False, repr=False, compare=False)  # `state`, once derived

    def __post_init__(self) -> None:
        object.__setattr__(self, "variants", tuple(self.variants))
        object.__setattr__(self, "preempted_nodes", tuple(self.preempted_nodes))

    def variant(self, kind: KindName) -> Variant | None:
        for v in self.variants:  # a plain loop: policies ask this of every queued group at every decision
            if v.kind == kind:
                return v
        return None

    def running_variant(self) -> Variant | None:
        for v in self.variants:
            if v.is_occupying:
                return v
        return None

    def kinds(self) -> tuple[KindName, ...]:
        return tuple(v.kind for v in self.variants)

    def chosen_variant(self) -> Variant | None:
        """The variant that ran (or runs): the latest started one, else a non-cancelled finished one.

        Siblings that never started are cancelled once one variant wins, so they do not decide the outcome.
        """
        started = [v for v in self.variants if v.is_occupying or v.start_time is not None]
        if started:
            return max(started, key=lambda v: v.start_time if v.start_time is not None else float("inf"))
        ended = [v for v in self.variants if v.state.is_finished and v.state is not VariantState.CANCELLED]
        return ended[0] if ended else None

    @property
    def state(self) -> GroupState:
        """Derived from the variants, so it can never disagree with what Slurm reports (derived once)."""
        state = self._state
        if state is None:
            state = self._derive_state()
            object.__setattr__(self, "_state", state)
        return state

    def _derive_state(self) -> GroupState:
        variants = self.variants
        if variants and all(v.state in _NEVER_STARTED and v.start_time is None for v in variants):
            return GroupState.PENDING  # the usual waiting group, decided without the general rules below
        if any(v.is_occupying for v in variants):
            return GroupState.RUNNING
        chosen = self.chosen_variant()
        if chosen is not None and chosen.state.is_finished:
            return _GROUP_OUTCOME[chosen.state]
        if any(v.state is VariantState.REQUEUED for v in self.variants):
            return GroupState.REQUEUED
        if self.variants and all(v.state is VariantState.CANCELLED for v in self.variants):
            return GroupState.CANCELLED
        return GroupState.PENDING


# slurmx always requeues preempted work (preemption.mode), so a preempted variant means "will run again".
_GROUP_OUTCOME: dict[VariantState, GroupState] = {
    VariantState.COMPLETED: GroupState.COMPLETED,
    VariantState.CANCELLED: GroupState.CANCELLED,
    VariantState.PREEMPTED: GroupState.REQUEUED,
    VariantState.FAILED: GroupState.FAILED,
    VariantState.TIMEOUT: GroupState.FAILED,
    VariantState.NODE_FAIL: GroupState.FAILED,
    VariantState.OUT_OF_MEMORY: GroupState.FAILED,
}


def _by_submit(groups: Iterable[Group]) -> tuple[Group, ...]:
    return tuple(sorted(groups, key=lambda g: (g.submit_time, g.group_id)))


QueueKey = tuple[float, str]  # (submit_time, group_id): the order of pending and running queues
EndKey = tuple[float, float, str]  # (expected end, submit_time, group_id): running groups by when they end


def expected_end(start: float | None, estimate: float | None, now: float) -> float:
    """When a job is expected to end: its start (now when not started) plus its estimate; never when the estimate
    is unknown (as a job without a time limit in Slurm)."""
    if estimate is None or not math.isfinite(estimate):
        return math.inf
    return (now if start is None else start) + estimate


class GroupQueue(Sequence[Group]):
    """Groups in queue order, looked up only as they are read.

    A policy such as strict FIFO reads the head of a queue of thousands; building the whole tuple on every
    call cost more than the rest of a simulation. Equal to the tuple of the same groups.
    """

    __slots__ = ("_groups", "_keys")

    def __init__(self, keys: Sequence[QueueKey] | Sequence[EndKey], groups: Mapping[str, Group]) -> None:
        self._keys = keys
        self._groups = groups

    def __len__(self) -> int:
        return len(self._keys)

    @overload
    def __getitem__(self, index: int) -> Group: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Group, ...]: ...

    def __getitem__(self, index: int | slice) -> Group | tuple[Group, ...]:
        if isinstance(index, slice):  # the whole slice at once: `queue[:]` reads every group
            ids = list(map(itemgetter(-1), self._keys[index]))
            groups = self._groups
            if type(groups) is LentSnapshot:
                return groups.values_of(ids)
            return tuple(map(groups.__getitem__, ids))
        return self._groups[self._keys[index][-1]]

    def __iter__(self) -> Iterator[Group]:
        groups = self._groups
        return (groups[key[-1]] for key in self._keys)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    __hash__ = None  # type: ignore[assignment]  # equal to a tuple, but not one

    def __repr__(self) -> str:
        return f"GroupQueue({len(self)} groups)"


class ViewIndex(Protocol):
    """Answers a driver that tracks the cluster incrementally can give without scanning the snapshot.

    The simulator keeps its queues sorted and its free capacity in arrays, so it answers these in time
    proportional to what the policy reads, where a scan costs the whole cluster on every policy call. Every
    answer must equal the scan's (the engine's naive view is the reference the tests compare against). Queue
    keys, once returned, must not change afterwards; `None` means "no longer known here": the view then scans
    its own frozen groups.
    """

    def pending_keys(self) -> Sequence[QueueKey] | None: ...

    def running_keys(self) -> Sequence[QueueKey] | None: ...

    def nodes_of_kind(self, kind: KindName) -> tuple[Node, ...]: ...

    def fitting_nodes(self, kind: KindName, request: Resources) -> Iterator[Node]: ...

    def fitting_node_names(self, kind: KindName, request: Resources) -> Iterator[str]: ...

    def node_names_of_kind(self, kind: KindName) -> frozenset[str]: ...

    def running_end_keys(self, kind: KindName) -> Sequence[EndKey] | None: ...


@dataclass(frozen=True, slots=True)
class ClusterView:
    """Immutable snapshot of the cluster at `now`: the sole input of a policy.

    `kinds` maps each resource kind to the partition serving it. The mappings are read-only proxies
    over private copies, so neither the policy nor the caller can mutate the snapshot afterwards; a
    `LentSnapshot` (the simulator's nodes and groups) is taken as is, its owner freezes it before changing.
    `memo` is what the policy's previous plan left for it (`Plan.memo`), handed back by the cycle in both
    backends; None at the first decision and whenever it was lost (a restart), so a policy must work without it.
    """

    now: float
    nodes: Mapping[str, Node]
    partitions: Mapping[str, Partition]
    groups: Mapping[str, Group]
    kinds: Mapping[KindName, str]
    index: ViewIndex | None = field(default=None, repr=False, compare=False)
    memo: object = field(default=None, repr=False, compare=False)
    # Answers of the queries below, computed on first use: the snapshot never changes and policies ask often.
    _pending: Sequence[Group] | None = field(default=None, init=False, repr=False, compare=False)
    _running: Sequence[Group] | None = field(default=None, init=False, repr=False, compare=False)
    _of_kind: dict[KindName, tuple[Node, ...]] = field(default_factory=dict, init=False, repr=False, compare=False)
    _names_of_kind: dict[KindName, frozenset[str]] = field(default_factory=dict, init=False, repr=False,
                                                           compare=False)

    def __post_init__(self) -> None:
        for name in ("nodes", "partitions", "groups", "kinds"):
            value = getattr(self, name)
            if type(value) is LentSnapshot:
                continue  # immutable to its readers already (frozen by its owner before anything changes)
            # dict.copy() clones the table; dict(x) re-inserts every key when x ever had a deletion (10x slower).
            object.__setattr__(self, name, MappingProxyType(value.copy() if type(value) is dict else dict(value)))

    def with_memo(self, memo: object) -> ClusterView:
        """This snapshot with `memo` (what the cycle carries from the last plan): a shallow copy that shares the
        mappings and the answers already computed, which the memo does not change."""
        view = copy.copy(self)
        object.__setattr__(view, "memo", memo)
        return view

    def pending_groups(self) -> Sequence[Group]:
        """Groups waiting to start (including requeued ones), oldest first (a tuple, or a lazy `GroupQueue`)."""
        found = self._pending
        if found is None and self.index is not None:
            keys = self.index.pending_keys()
            if keys is not None:
                found = GroupQueue(keys, self.groups)
                object.__setattr__(self, "_pending", found)
        if found is None:
            waiting = (GroupState.PENDING, GroupState.REQUEUED)
            found = _by_submit(g for g in self.groups.values() if g.state in waiting)
            object.__setattr__(self, "_pending", found)
        return found

    def running_groups(self) -> Sequence[Group]:
        """Groups holding resources, oldest first."""
        found = self._running
        if found is None and self.index is not None:
            keys = self.index.running_keys()
            if keys is not None:
                found = GroupQueue(keys, self.groups)
                object.__setattr__(self, "_running", found)
        if found is None:
            found = _by_submit(g for g in self.groups.values() if g.state is GroupState.RUNNING)
            object.__setattr__(self, "_running", found)
        return found

    def nodes_of_kind(self, kind: KindName) -> tuple[Node, ...]:
        """Nodes of the partition serving `kind`, by name; empty when the site has no such kind."""
        found = self._of_kind.get(kind)
        if found is None:
            found = self.index.nodes_of_kind(kind) if self.index is not None else self._nodes_of_kind(kind)
            self._of_kind[kind] = found
        return found

    def fitting_nodes(self, kind: KindName, request: Resources) -> Iterator[Node]:
        """Usable nodes of `kind` whose free resources hold `request`, in `nodes_of_kind` order (first fit)."""
        if self.index is not None:
            return self.index.fitting_nodes(kind, request)
        return (n for n in self.nodes_of_kind(kind) if n.is_usable and request.fits_in(n.free))

    def fitting_node_names(self, kind: KindName, request: Resources) -> Iterator[str]:
        """The names of `fitting_nodes`: a policy that only needs where a job fits reads no `Node` (a driver may
        build a node's snapshot only when it is read)."""
        if self.index is not None:
            return self.index.fitting_node_names(kind, request)
        return (n.name for n in self.fitting_nodes(kind, request))

    def node_names_of_kind(self, kind: KindName) -> frozenset[str]:
        """The names of `nodes_of_kind`, as a set: which nodes a kind can use, without reading a `Node`."""
        found = self._names_of_kind.get(kind)
        if found is None:
            found = self.index.node_names_of_kind(kind) if self.index is not None else \
                frozenset(n.name for n in self.nodes_of_kind(kind))
            self._names_of_kind[kind] = found
        return found

    def running_by_expected_end(self, kind: KindName) -> Sequence[Group]:
        """Running groups holding a node of `kind`, by expected end (start + estimate; never for a run without an
        estimate), then submission: the order in which their nodes are expected back (EASY's reservation walks
        it until enough room is found, instead of reading every running job)."""
        if self.index is not None:
            keys = self.index.running_end_keys(kind)
            if keys is not None:
                return GroupQueue(keys, self.groups)
        names = self.node_names_of_kind(kind)
        ends: list[tuple[EndKey, Group]] = []
        for group in self.running_groups():
            variant = group.running_variant()
            if variant is not None and not names.isdisjoint(variant.nodes):
                end = expected_end(variant.start_time, variant.estimate_s, self.now)
                ends.append(((end, group.submit_time, group.group_id), group))
        ends.sort(key=lambda e: e[0])
        return tuple(group for _, group in ends)

    def _nodes_of_kind(self, kind: KindName) -> tuple[Node, ...]:
        partition_name = self.kinds.get(kind)
        if partition_name is None:
            return ()
        partition = self.partitions.get(partition_name)
        listed = set(partition.nodes) if partition is not None else set()
        nodes = self.nodes
        return tuple([nodes[n] for n in sorted(n for n, node in nodes.items()
                                               if n in listed or partition_name in node.partitions)])

    def free_total(self, kind: KindName) -> Resources:
        """Sum of free resources over the usable nodes of `kind` (an upper bound: jobs need one node)."""
        total = Resources()
        for node in self.nodes_of_kind(kind):
            if node.is_usable:
                total = total + node.free
        return total
