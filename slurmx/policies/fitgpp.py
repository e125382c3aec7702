"""FitGpp — Fitting Grace Period Preemption (Yabuuchi, Taniwaki, Omura, USENIX OpML 2019).

When a latency-sensitive TE job does not fit, preempt the one running BE job that (Eq. 2) makes room for it on
its own node, preferring small jobs (cheap to re-place, no head-of-line blocking) with short grace periods (the
TE job waits for the victim's grace): Eq. 3 scores `Size/maxSize + s * GP/maxGP` over all running BE jobs and
Eq. 4 takes the lowest score among jobs preempted fewer than P times. The base discipline is FIFO: TE jobs are
served ahead of queued BE jobs, BE jobs strictly in order (no backfill, so a blocked head blocks everyone — the
paper's argument for small victims), and a victim returns to the head of the BE queue with its remaining work.
Digest: `../shared/papers/fitgpp.md`; every choice the paper leaves open is an argument (docs/policies/fitgpp.md).

This module also holds what the LRTP and RAND baselines (`fitgpp_baselines`) share: the `Round` — the view as
numpy arrays (one row per running BE job, one per node), so Eqs. 2–4 are vector operations even with 10,000
running jobs — its `Ledger` of free, releasing (victims in grace) and earmarked resources, and `run_round`, the
TE-first / strict-FIFO-BE round parameterised by a victim selector. A policy keeps no state between calls, so
what must outlive a round (who is in grace, for whom) is read back from the view — see `preemption_marks`.
Long because that shared round is most of it: FitGpp's own arguments and selection are its last 70 lines, and the
`Round`, its `Ledger` and `run_round` read each other's arrays, so they stay beside the equations they serve.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, ClassVar, Generic, Literal, TypeVar, cast

import numpy as np
import numpy.typing as npt
from pydantic import Field

from slurmx.core.actions import Action, Note, Plan, Preempt, Start
from slurmx.core.model import ClusterView, Group, GroupState, JobClass, Node, Variant, VariantState
from slurmx.core.resources import Resources
from slurmx.policies.base import Capabilities, PolicyArgs, register

__all__ = [
    "FALLBACK_NOTE",
    "FitGpp",
    "FitGppArgs",
    "Ledger",
    "Marks",
    "PreemptiveArgs",
    "Round",
    "fallback_count",
    "preemption_marks",
    "random_order",
    "run_round",
    "score",
    "size",
]

FALLBACK = "fitgpp-fallback"  # the kind of the plan note written at each firing of the random fallback
FALLBACK_NOTE = f"{FALLBACK}:"  # how that note's text begins, the prefix the simulator's `count_notes` counts
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def size(request: Resources, capacity: Resources) -> float:
    """Eq. 1: Euclidean norm of the request as fractions of the node's capacity (unit-free).

    A dimension the node does not have (capacity 0, e.g. GPUs on a CPU node) is left out, as the digest advises.
    """
    total = 0.0
    if capacity.cpus > 0:
        total += (request.cpus / capacity.cpus) ** 2
    if capacity.mem_mb > 0:
        total += (request.mem_mb / capacity.mem_mb) ** 2
    for name, cap in capacity.gres.items():
        if cap > 0:
            total += (request.gres.get(name, 0) / cap) ** 2
    return math.sqrt(total)


def score(job_size: float, grace_s: float, max_size: float, max_grace_s: float, s: float) -> float:
    """Eq. 3. A zero maximum makes its term 0: every job then has the same term, so the choice cannot change."""
    size_term = job_size / max_size if max_size > 0 else 0.0
    grace_term = grace_s / max_grace_s if max_grace_s > 0 else 0.0
    return size_term + s * grace_term


def fallback_count(plan: Plan) -> int:
    """How often the random fallback fired in this plan (policies keep no counters; the notes carry it)."""
    return sum(1 for note in plan.notes if note.kind == FALLBACK)


def random_order(seed: int, now: float, te_id: str, rows: IntArray) -> IntArray:
    """`rows` in a seeded random order that depends only on (seed, time, TE job, the rows): no RNG state outlives
    the call, so the same view always gives the same plan. Rows are in group-id order, so the view's dict order
    cannot leak in."""
    digest = hashlib.blake2b(f"{seed}|{now!r}|{te_id}".encode(), digest_size=8).digest()
    rng = np.random.Generator(np.random.PCG64(int.from_bytes(digest, "big")))
    shuffled: IntArray = rows[rng.permutation(len(rows))]
    return shuffled


@dataclass(frozen=True, slots=True)
class Marks:
    """What a driver must tell a policy about a preemption in flight (see `preemption_marks`)."""

    grace_deadline: float | None = None  # t0 + grace while the victim still holds its nodes
    beneficiary: str | None = None  # the Preempt's beneficiary, kept until that group starts or leaves
    nodes: tuple[str, ...] = ()  # the nodes the victim held when signalled (the earmark survives the requeue)


def preemption_marks(group: Group) -> Marks:
    """A group's preemption-in-flight marks (grace deadline, beneficiary, nodes it still holds)."""
    if group.grace_deadline is None and group.preempted_for is None:
        return _NO_MARKS
    return Marks(group.grace_deadline, group.preempted_for, group.preempted_nodes)


_NO_MARKS = Marks()
_LISTED = frozenset({GroupState.RUNNING, GroupState.PENDING, GroupState.REQUEUED})  # in a view's queues


def _requeue_time(group: Group) -> float:
    """When a victim went back to the queue: the proposed `Group.requeue_time`, else the latest variant submit
    time (Slurm resets a job's submit time at requeue), else the group's own submit time."""
    if group.requeue_time is not None:
        return group.requeue_time
    times = [v.submit_time for v in group.variants if v.submit_time is not None]
    return max(times) if times else group.submit_time


class PreemptiveArgs(PolicyArgs):
    """Choices shared by FitGpp, LRTP and RAND (digest §6.1 item 10); defaults as the digest recommends."""

    max_preemptions: int | None = Field(1, ge=0, description="P: never preempt a job this often; null = no cap")
    placement: Literal["first_fit", "best_fit"] = "first_fit"
    requeued_order: Literal["submit", "latest_first"] = "submit"
    tie_break: Literal["job_id", "oldest_start", "youngest_start"] = "job_id"
    blocked_te: Literal["skip", "stop"] = "skip"
    # A TE job whose victims are still in grace: "wait" - it waits for them, their room counted as coming (the
    # digest's reading, §1.4); "reselect" - every round it selects victims again as if room still held by victims
    # in grace did not count, as a tick simulator without in-flight preemption state would (see docs).
    in_grace: Literal["wait", "reselect"] = "wait"


# Memos of pure functions of immutable view objects (a driver hands the same Group / Resources object again
# while it is unchanged). Each entry holds its object, so an id is never reused while the entry lives; the
# memos change no decision, only skip recomputing it, and are dropped whole when they grow past `_MEMO_MAX`.
_MEMO_MAX = 200_000
_VECTORS: dict[tuple[int, tuple[str, ...]], tuple[Resources, list[int] | None]] = {}
_ARRAYS: dict[tuple[int, tuple[str, ...]], tuple[Resources, IntArray | None]] = {}
_HOLDS: dict[tuple[str, int], tuple[Resources, _NodeLayout, bool]] = {}
# What a round derives from one running group in one node layout: its row if it is a BE job on one known usable
# node (`_NOT_A_ROW` for a BE job elsewhere, None for any other group).
_Facts = tuple[Group, "_NodeLayout", "_Row | None"]
_FACTS: dict[int, _Facts] = {}


def _memo(memo: dict[Any, Any], key: Any, value: Any) -> None:
    if len(memo) >= _MEMO_MAX:
        memo.clear()
    memo[key] = value


class Ledger:
    """Per-node resources for one round (rows = nodes): free now, releasing when the victims in grace there
    stop, and earmarked for TE jobs. An earmark is met first from what is releasing on its node; only the unmet
    rest is withheld from the free resources others may use, so nobody takes room a preemption was made for."""

    def __init__(self, free: IntArray) -> None:
        self.free = free
        self.releasing = np.zeros_like(free)
        self.reserved: dict[int, dict[str, IntArray]] = {}

    def _others(self, node: int, group_id: str | None) -> IntArray | None:
        amounts = [a for b, a in self.reserved[node].items() if b != group_id]
        return np.sum(amounts, axis=0) if amounts else None

    def now(self, group_id: str | None = None) -> IntArray:
        """What `group_id` may use on each node right now (its own earmarks included)."""
        avail = self.free.copy()
        for node in self.reserved:
            others = self._others(node, group_id)
            if others is not None:
                avail[node] = np.maximum(self.free[node] - np.maximum(others - self.releasing[node], 0), 0)
        return avail

    def later(self, group_id: str | None = None) -> IntArray:
        """What `group_id` may use on each node once the victims in grace have released their resources."""
        avail = self.free + self.releasing
        for node in self.reserved:
            others = self._others(node, group_id)
            if others is not None:
                avail[node] = np.maximum(avail[node] - others, 0)
        return avail


Victims = list[tuple[int, str | None, str]]  # (row of the victim, beneficiary, reason)
# One running BE job on one known usable node: group id, group, variant, node row, request vector, in grace, grace
# (s), preemptions, job id, start time (inf: unknown), estimate (nan: unknown); `_Rows` are its columns.
_Row = tuple[str, Group, Variant, int, list[int], bool, float, int, float, float, float]
_NOT_A_ROW: _Row = ("", Group("", "", "", JobClass.BE, ()),
                    Variant("", "", None, VariantState.RUNNING, Resources(), ""), -1, [], False, 0.0, 0, 0.0, 0.0, 0.0)
Selector = Callable[[Group, "Round"], tuple[Victims, list[Note]]]


T = TypeVar("T")


class _FromRows(Generic[T]):
    """A `Round` attribute held by its rows, which are built the first time one of them is read."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    def __get__(self, rnd: Round, owner: type | None = None) -> T:
        return cast(T, getattr(rnd._rows, self._name))


class Round:
    """One scheduling round's working state, derived from the view alone (the policy keeps none).

    Rows of the job arrays are the running BE jobs on one known usable node, sorted by group id, so a lower row
    is a lower group id (the last tie-break). Jobs on several nodes are outside the paper's model: never
    victims, but their size and grace count in Eq. 3's maxima (`others`). The rows are built when a round first
    reads them: most rounds start their queue heads and never look for a victim.
    """

    def __init__(self, view: ClusterView, now: float, args: PreemptiveArgs) -> None:
        self.view, self.now, self.args = view, now, args
        layout, free = _nodes_now(view)
        self.node_names, self.node_index, self._gres, self.capacity, self.kind_nodes, self._whole = layout
        self._node_layout = layout
        self._layout = tuple(self._gres)
        self.dims = 2 + len(self._gres)
        self.ledger = Ledger(free)
        self.waiting_on: dict[str, int] = {}  # TE group -> victims still in grace for it
        self.earmarks: dict[str, list[int]] = {}  # TE group -> nodes earmarked for it
        self.actions: list[Action] = []
        self.notes: list[Note] = []
        self._walk(view)

    def _vector(self, res: Resources) -> list[int] | None:
        """The resource vector in this round's dimensions; None if it asks for a GRES no usable node has."""
        key = (id(res), self._layout)
        cached = _VECTORS.get(key)  # the entry holds `res`, so its id cannot be reused while it is there
        if cached is not None and cached[0] is res:
            return cached[1]
        row = _vector_in(res, self._gres, self.dims)
        _memo(_VECTORS, key, (res, row))
        return row

    def vector(self, res: Resources) -> IntArray | None:
        """`_vector` as a read-only array, memoised as it is."""
        key = (id(res), self._layout)
        cached = _ARRAYS.get(key)
        if cached is not None and cached[0] is res:
            return cached[1]
        row = self._vector(res)
        array = None
        if row is not None:
            array = np.array(row, dtype=np.int64)
            array.flags.writeable = False
        _memo(_ARRAYS, key, (res, array))
        return array

    def _walk(self, view: ClusterView) -> None:
        """Preemptions in flight into the ledger, and the TE and BE queues: one pass over the queue, and over the
        running groups one look at each for marks (the rows, built when a round looks for a victim, read them
        again); groups that neither run nor wait (a driver may still show a finished victim's marks) only when
        a view has any.

        Marks become earmarks in queue order (submit time, group id), whatever order the driver's mapping has,
        so the same preemptions in flight give the same earmarks in the daemon and in the simulator."""
        running, pending = view.running_groups(), view.pending_groups()
        marked = [(group, group.running_variant(), preemption_marks(group)) for group in running[:]
                  if group.grace_deadline is not None or group.preempted_for is not None]
        self.pending_te, self.pending_be = self._queues(pending[:], marked)
        if len(running) + len(pending) != len(view.groups):
            marked += [(group, group.running_variant(), preemption_marks(group)) for group in view.groups.values()
                       if group.state not in _LISTED and preemption_marks(group) is not _NO_MARKS]
        if not marked:
            return
        marked.sort(key=lambda m: (m[0].submit_time, m[0].group_id))
        pending_ids = {g.group_id for g in self.pending_te}
        node_index, releasing = self.node_index, self.ledger.releasing
        for group, variant, marks in marked:
            if marks.grace_deadline is not None and variant is not None and group.job_class is JobClass.BE \
                    and len(variant.nodes) == 1 and variant.nodes[0] in node_index:  # a row's room coming back
                vec = self._vector(variant.request)
                if vec is not None:
                    releasing[node_index[variant.nodes[0]]] += vec
            if marks.beneficiary in pending_ids and marks.beneficiary is not None:
                for name in marks.nodes or (variant.nodes if variant is not None else ()):
                    if name in node_index:
                        self.earmark(view.groups[marks.beneficiary], node_index[name])
                if marks.grace_deadline is not None and variant is not None:
                    self.waiting_on[marks.beneficiary] = self.waiting_on.get(marks.beneficiary, 0) + 1

    def running_rows(self) -> tuple[list[_Row], list[tuple[float, float, bool]]]:
        """The running BE jobs: rows (those on one known usable node) in queue order, and the others' Eq. 3 terms
        (size, grace, in grace); a group's row is memoised while the driver hands the same object in the same
        layout."""
        rows: list[_Row] = []
        others: list[tuple[float, float, bool]] = []
        layout, nodes = self._node_layout, self.view.nodes
        for group in self.view.running_groups()[:]:
            facts = _FACTS.get(id(group))
            if facts is None or facts[0] is not group or facts[1] is not layout:
                facts = (group, layout, self._row_of(group))
                _memo(_FACTS, id(group), facts)
            row = facts[2]
            if row is None:
                continue
            if row is not _NOT_A_ROW:
                rows.append(row)
                continue
            variant = group.running_variant()  # a BE job elsewhere: its node's capacity is not in the layout
            if variant is not None and variant.nodes and variant.nodes[0] in nodes:
                others.append((size(variant.request, nodes[variant.nodes[0]].capacity), float(group.grace_s),
                               group.grace_deadline is not None))
        return rows, others

    def _row_of(self, group: Group) -> _Row | None:
        """`group`'s row; `_NOT_A_ROW` for a BE job not on one known usable node, None for any other group."""
        variant = group.running_variant()
        if variant is None or group.job_class is not JobClass.BE:
            return None
        vec = self._vector(variant.request)
        where = [self.node_index.get(n, -1) for n in variant.nodes]
        if len(where) != 1 or where[0] < 0 or vec is None:
            return _NOT_A_ROW
        return (group.group_id, group, variant, where[0], vec, group.grace_deadline is not None, float(group.grace_s),
                group.preemptions, math.inf if variant.job_id is None else float(variant.job_id),
                math.inf if variant.start_time is None else variant.start_time,
                math.nan if variant.estimate_s is None else variant.estimate_s)

    @functools.cached_property
    def _rows(self) -> _Rows:
        return _Rows(self)

    gids: _FromRows[list[str]] = _FromRows()
    groups: _FromRows[list[Group]] = _FromRows()
    variants: _FromRows[list[Variant]] = _FromRows()
    node: _FromRows[IntArray] = _FromRows()
    req: _FromRows[IntArray] = _FromRows()
    in_grace: _FromRows[BoolArray] = _FromRows()
    grace: _FromRows[FloatArray] = _FromRows()
    count: _FromRows[IntArray] = _FromRows()
    size: _FromRows[FloatArray] = _FromRows()
    job_id: _FromRows[FloatArray] = _FromRows()
    start_time: _FromRows[FloatArray] = _FromRows()
    estimate: _FromRows[FloatArray] = _FromRows()
    others: _FromRows[list[tuple[float, float, bool]]] = _FromRows()

    def _queues(self, pending: Sequence[Group], marked: list[tuple[Group, Variant | None, Marks]]
                ) -> tuple[list[Group], list[Group]]:
        """The TE jobs in submit order, and the BE queue: requeued victims first (the head of the queue), then
        strict FIFO, from the view's queue, which is in submit order (no per-round sort of it); marks of requeued
        victims into `marked`. A few passes, each a comprehension: most rounds read hundreds of waiting groups."""
        be, requeued_state = JobClass.BE, GroupState.REQUEUED
        marked += [(g, None, preemption_marks(g)) for g in pending
                   if g.grace_deadline is not None or g.preempted_for is not None]
        te = [g for g in pending if g.job_class is not be]
        requeued = [g for g in pending if g.job_class is be and (g.preemptions > 0 or g.state is requeued_state)]
        if not requeued:
            return te, [g for g in pending if g.job_class is be] if te else list(pending)
        first = {id(g) for g in requeued}
        waiting = [g for g in pending if g.job_class is be and id(g) not in first]
        if self.args.requeued_order == "latest_first":
            requeued.sort(key=lambda g: (-_requeue_time(g), g.group_id))
        return te, requeued + waiting

    def sizes(self, amounts: IntArray, nodes: IntArray) -> FloatArray:
        """Eq. 1 for many rows at once, each against its node's capacity."""
        cap = self.capacity[nodes]
        frac = np.divide(amounts, cap, out=np.zeros(cap.shape), where=cap > 0)
        result: FloatArray = np.sqrt(np.sum(frac * frac, axis=1))
        return result

    def requests_by_node(self, group: Group) -> tuple[IntArray, BoolArray]:
        """The group's request on every node (its variant of the first kind, in the site's order, the node
        serves) and whether it has one there."""
        matrix = np.zeros((len(self.node_names), self.dims), dtype=np.int64)
        has = np.zeros(len(self.node_names), dtype=bool)
        for kind, nodes in self.kind_nodes.items():
            variant = group.variant(kind)
            vec = None if variant is None else self.vector(variant.request)
            if vec is not None and len(nodes):
                new = nodes[~has[nodes]]
                matrix[new] = vec
                has[new] = True
        return matrix, has

    def earmark(self, group: Group, node: int) -> None:
        matrix, has = self.requests_by_node(group)
        if has[node]:
            self.ledger.reserved.setdefault(node, {})[group.group_id] = matrix[node]
            nodes = self.earmarks.setdefault(group.group_id, [])
            if node not in nodes:
                nodes.append(node)

    def eligible(self) -> BoolArray:
        """Rows not already being preempted and preempted fewer than P times."""
        cap = self.args.max_preemptions
        free: BoolArray = ~self.in_grace
        return free if cap is None else free & (self.count < cap)

    def tie_keys(self) -> FloatArray:
        """The configured tie-break per row (lower first); the row itself (group id) breaks what remains."""
        if self.args.tie_break == "job_id":
            return self.job_id
        return self.start_time if self.args.tie_break == "oldest_start" else -self.start_time

    def ever_fits(self, group: Group) -> bool:
        """Whether some usable node could hold the group when empty: if none can, preempting is pointless."""
        for kind, nodes in self.kind_nodes.items():
            variant = group.variant(kind)
            if variant is not None and self._holds(kind, nodes, variant.request):
                return True
        return False

    def _holds(self, kind: str, nodes: IntArray, request: Resources) -> bool:
        """Whether an empty node of `kind` holds `request`, memoised per request object and node layout (a TE job
        waiting for its victims asks this every round)."""
        key = (kind, id(request))
        found = _HOLDS.get(key)
        if found is not None and found[0] is request and found[1] is self._node_layout:
            return found[2]
        vec = self.vector(request)
        holds = vec is not None and len(nodes) > 0 and bool((self.capacity[nodes] >= vec).all(axis=1).any())
        _memo(_HOLDS, key, (request, self._node_layout, holds))
        return holds

    def place(self, group: Group, prefer: Sequence[int] = ()) -> tuple[str, int, Resources] | None:
        """(kind, node, request) to start `group` on now: earmarked nodes first, then first- or best-fit."""
        avail: IntArray | None = None
        for kind in self.view.kinds:
            variant = group.variant(kind)
            nodes = self.kind_nodes.get(kind)
            vec = None if variant is None else self.vector(variant.request)
            if variant is None or vec is None or nodes is None or not len(nodes):
                continue
            if avail is None:  # read only here: the free matrix itself when nothing is earmarked
                avail = self.ledger.now(group.group_id) if self.ledger.reserved else self.ledger.free
            for node in prefer:
                if node in nodes and bool(np.all(avail[node] >= vec)):
                    return kind, node, variant.request
            here = avail if kind in self._whole else avail[nodes]
            fits = (here >= vec).all(axis=1)
            if not fits.any():
                continue
            if self.args.placement == "first_fit":
                return kind, int(nodes[int(fits.argmax())]), variant.request
            leftover = self.sizes(here - vec, nodes)  # best fit: least room left, by Eq. 1
            leftover[~fits] = np.inf
            return kind, int(nodes[int(np.argmin(leftover))]), variant.request
        return None

    def start(self, group: Group, placed: tuple[str, int, Resources], reason: str) -> None:
        kind, node, request = placed
        vec = self.vector(request)
        assert vec is not None  # placed, so every GRES it asks for exists
        self.ledger.free[node] -= vec
        self.actions.append(Start(group.group_id, kind, (self.node_names[node],), request, reason=reason))

    def preempt(self, te: Group, row: int, beneficiary: str | None, reason: str) -> None:
        """Signal the job in `row`; its resources stay put for its grace period, earmarked for `beneficiary`."""
        self.in_grace[row] = True
        node = int(self.node[row])
        self.ledger.releasing[node] += self.req[row]
        if beneficiary is not None:
            self.earmark(te, node)
        self.actions.append(Preempt(self.gids[row], self.groups[row].grace_s, beneficiary, reason=reason))

    def until_fits(self, te: Group, rows: Iterable[int]) -> Victims | None:
        """Take victims from `rows` (already filtered for eligibility) until `te` fits on one of their nodes once
        their grace ends (LRTP, RAND, FitGpp's looping fallback). Victims on that node name `te` as beneficiary;
        the others were preempted in vain and free their room for anyone. None — nothing is preempted — when even
        all of them would not make room."""
        want, has = self.requests_by_node(te)
        later = self.ledger.later(te.group_id) if self.args.in_grace == "wait" else self.ledger.now(te.group_id)
        chosen: list[int] = []
        for row in rows:
            node = int(self.node[row])
            if not has[node] or self.in_grace[row]:
                continue
            chosen.append(row)
            later[node] += self.req[row]
            if bool(np.all(want[node] <= later[node])):
                where = self.node_names[node]
                return [(r, te.group_id, f"frees room for {te.group_id} on {where}") if self.node[r] == node
                        else (r, None, f"preempted for {te.group_id}, in vain") for r in chosen]
        return None


class _Rows:
    """The running BE jobs on one known usable node as arrays, sorted by group id, and the others' Eq. 3 terms
    (see `Round`)."""

    def __init__(self, rnd: Round) -> None:
        rows, others = rnd.running_rows()
        rows.sort(key=itemgetter(0))
        columns: list[tuple[Any, ...]] = list(zip(*rows, strict=True)) if rows else [()] * 11
        gids, groups, variants, node, req, in_grace, grace, count, job_id, start_time, estimate = columns
        self.gids: list[str] = list(gids)
        self.groups: list[Group] = list(groups)
        self.variants: list[Variant] = list(variants)
        self.node = np.array(node, dtype=np.int64)
        self.req = np.array(req, dtype=np.int64).reshape(len(rows), rnd.dims)
        self.in_grace = np.array(in_grace, dtype=bool)
        self.grace = np.array(grace, dtype=np.float64)
        self.count = np.array(count, dtype=np.int64)
        self.size = rnd.sizes(self.req, self.node)
        self.job_id = np.array(job_id, dtype=np.float64)
        self.start_time = np.array(start_time, dtype=np.float64)
        self.estimate = np.array(estimate, dtype=np.float64)
        self.others = others


# The usable nodes' names (sorted) and index, the GRES dimensions, the capacity matrix and each kind's node rows:
# the same from round to round while no node's capacity or usability changes, so kept by what they derive from
# (read-only arrays, shared by the rounds).
_NodeLayout = tuple[list[str], dict[str, int], dict[str, int], FloatArray, dict[str, IntArray], frozenset[str]]
_LAYOUTS: dict[Any, _NodeLayout] = {}


def _layout_of(view: ClusterView) -> _NodeLayout:
    key = (tuple([(name, node.capacity) for name, node in view.nodes.items() if node.is_usable]),
           tuple([(kind, view.node_names_of_kind(kind)) for kind in view.kinds]))
    found = _LAYOUTS.get(key)
    if found is not None:
        return found
    names = sorted(name for name, _ in key[0])
    index = {name: i for i, name in enumerate(names)}
    capacities = dict(key[0])
    gres_names = sorted({g for name in names for g in capacities[name].gres})
    gres = {name: 2 + i for i, name in enumerate(gres_names)}
    dims = 2 + len(gres_names)
    capacity = np.array([_vector_in(capacities[n], gres, dims) or [0] * dims for n in names],
                        dtype=np.int64).reshape(len(names), dims).astype(np.float64)
    capacity.flags.writeable = False
    kind_nodes: dict[str, IntArray] = {}
    for kind in view.kinds:
        rows = np.array([index[n.name] for n in view.nodes_of_kind(kind) if n.name in index], dtype=np.int64)
        rows.flags.writeable = False
        kind_nodes[kind] = rows
    # kinds served by every usable node in row order: their rows of a matrix are the matrix itself
    whole = frozenset(kind for kind, rows in kind_nodes.items() if np.array_equal(rows, np.arange(len(names))))
    if len(_LAYOUTS) >= 64:
        _LAYOUTS.clear()
    found = _LAYOUTS[key] = (names, index, gres, capacity, kind_nodes, whole)
    return found


@dataclass(frozen=True, slots=True)
class _Nodes:
    """A round's nodes: their objects in the view's order, the kinds' node names, the layout they give, each
    one's row in it (-1: not usable) and the free matrix (read-only: a round takes a copy)."""

    nodes: list[Node]
    kinds: tuple[tuple[str, frozenset[str]], ...]
    layout: _NodeLayout
    rows: list[int]
    free: IntArray


_LAST_NODES: list[_Nodes] = []  # the last round's, one entry: the next round's nodes are mostly the same objects


def _nodes_now(view: ClusterView) -> tuple[_NodeLayout, IntArray]:
    """The node layout and a free matrix of the round's own: from the last round's where the view's nodes are the
    same objects (a driver hands a node again while it is unchanged), only the nodes that changed read anew."""
    nodes = list(view.nodes.values())
    kinds = tuple([(kind, view.node_names_of_kind(kind)) for kind in view.kinds])
    last = _LAST_NODES[0] if _LAST_NODES else None
    found = _update(last, nodes, kinds) if last is not None else None
    if found is None:
        layout = _layout_of(view)
        names, index, gres, capacity, _, _ = layout
        dims = capacity.shape[1]
        rows = [index[n.name] if n.is_usable and n.name in index else -1 for n in nodes]
        free = np.zeros((len(names), dims), dtype=np.int64)
        for node, row in zip(nodes, rows, strict=True):
            if row >= 0:
                free[row] = _vector_in(node.free, gres, dims) or 0
        free.flags.writeable = False
        found = _Nodes(nodes, kinds, layout, rows, free)
    if found is not last:
        _LAST_NODES[:] = [found]
    return found.layout, found.free.copy()


def _update(last: _Nodes, nodes: list[Node], kinds: tuple[tuple[str, frozenset[str]], ...]) -> _Nodes | None:
    """`last` with the free rows of the nodes that are other objects now; None if the layout may have changed
    (a node renamed, resized or made usable or not, a kind's nodes changed)."""
    if len(nodes) != len(last.nodes) or kinds != last.kinds:
        return None
    changed = [i for i, (node, old) in enumerate(zip(nodes, last.nodes, strict=True)) if node is not old]
    if not changed:
        return last
    gres, capacity = last.layout[2], last.layout[3]
    free = last.free.copy()
    for i in changed:
        node, old = nodes[i], last.nodes[i]
        if node.name != old.name or node.is_usable != old.is_usable or (
                node.capacity is not old.capacity and node.capacity != old.capacity):
            return None
        if last.rows[i] >= 0:
            free[last.rows[i]] = _vector_in(node.free, gres, capacity.shape[1]) or 0
    free.flags.writeable = False
    return _Nodes(nodes, kinds, last.layout, last.rows, free)


def _vector_in(res: Resources, gres: dict[str, int], dims: int) -> list[int] | None:
    """`res` as [cpus, mem, GRES...] in these dimensions; None if it asks for a GRES none of them has."""
    row = [res.cpus, res.mem_mb] + [0] * (dims - 2)
    for name, count in res.gres.items():
        if name not in gres:
            return None
        row[gres[name]] = count
    return row


def run_round(view: ClusterView, now: float, args: PreemptiveArgs, select: Selector, tag: str) -> Plan:
    """TE jobs first, in submit order: start where they fit (their earmarked nodes first), else wait for their
    victims in grace, else preempt. Then BE jobs in strict FIFO with requeued victims at the head: the first BE
    job that does not fit stops the queue."""
    rnd = Round(view, now, args)
    for te in rnd.pending_te:
        mine = rnd.earmarks.get(te.group_id, [])
        placed = rnd.place(te, mine)
        if placed is not None:
            where = " on its earmarked node" if placed[1] in mine else ""
            rnd.start(te, placed, f"{tag}: TE ahead of queued BE{where}")
            continue
        if not rnd.ever_fits(te):
            rnd.notes.append(Note("larger than any node it can use; nothing is preempted for it", te.group_id))
            continue
        if rnd.waiting_on.get(te.group_id) and args.in_grace == "wait":
            rnd.notes.append(Note(f"waits for {rnd.waiting_on[te.group_id]} victim(s) in grace", te.group_id))
            continue
        victims, notes = select(te, rnd)
        rnd.notes.extend(notes)
        for row, beneficiary, reason in victims:
            rnd.preempt(te, row, beneficiary, f"{tag}: {reason}")
        if not victims:
            rnd.notes.append(Note("no node fits it and no victim can make room", te.group_id))
            if args.blocked_te == "stop":
                break
    for group in rnd.pending_be:
        placed = rnd.place(group)
        if placed is None:
            rnd.notes.append(Note("head of the BE queue does not fit; the queue waits (strict FIFO)", group.group_id))
            break
        rnd.start(group, placed, f"{tag}: BE queue head")
    return Plan(tuple(rnd.actions), tuple(rnd.notes))


class FitGppArgs(PreemptiveArgs):
    """FitGpp's own parameters: `s` (paper default 4.0) and the choices the paper leaves open."""

    s: float = Field(4.0, ge=0, description="weight of the grace-period term in Eq. 3")
    normalise_over: Literal["not_in_grace", "all_running"] = "not_in_grace"
    fallback: Literal["random", "none"] = "random"
    fallback_respects_cap: bool = True
    fallback_until_fits: bool = False
    seed: int = 0


@dataclass(frozen=True)
class FitGpp:
    """FitGpp (Eqs. 1–4) on the TE-first, strict-FIFO-BE round; pure and deterministic for a seed."""

    args: FitGppArgs = field(default_factory=FitGppArgs)
    name: ClassVar[str] = "fitgpp"
    # TE groups preempt BE ones (the round); it scores by elapsed time and grace, not by estimates
    capabilities: ClassVar[Capabilities] = Capabilities(profiled=False, te_preempts_be=True)

    def schedule(self, view: ClusterView, now: float) -> Plan:
        return run_round(view, now, self.args, self.select, "fitgpp")

    def select(self, te: Group, rnd: Round) -> tuple[Victims, list[Note]]:
        """Eq. 4: the lowest Eq. 3 score among eligible jobs passing Eq. 2 on their own node; else the fallback."""
        s = self.args.s
        pool = np.ones(len(rnd.gids), dtype=bool) if self.args.normalise_over == "all_running" else ~rnd.in_grace
        others = [o for o in rnd.others if self.args.normalise_over == "all_running" or not o[2]]
        max_size = max([float(rnd.size[pool].max(initial=0.0)), *(o[0] for o in others)])
        max_grace = max([float(rnd.grace[pool].max(initial=0.0)), *(o[1] for o in others)])
        want, has = rnd.requests_by_node(te)
        rows = np.flatnonzero(rnd.eligible() & has[rnd.node])
        if len(rows):  # Eq. 2 per row: D_TE <= D_j + N(node(j)), as D_j + (N - D_TE) >= 0
            slack = rnd.ledger.now(te.group_id) - want
            rows = rows[np.all(rnd.req[rows] + slack[rnd.node[rows]] >= 0, axis=1)]
        if len(rows):
            size_term = rnd.size[rows] / max_size if max_size > 0 else np.zeros(len(rows))
            grace_term = rnd.grace[rows] / max_grace if max_grace > 0 else np.zeros(len(rows))
            scores = np.round(size_term + s * grace_term, 12)
            row = int(rows[np.lexsort((rows, rnd.tie_keys()[rows], scores))[0]])
            value = score(float(rnd.size[row]), float(rnd.grace[row]), max_size, max_grace, s)
            why = (f"victim for {te.group_id}: score {value:.4f} (size {rnd.size[row]:.4f}, grace "
                   f"{rnd.groups[row].grace_s}s), fits on {rnd.node_names[int(rnd.node[row])]}")
            return [(row, te.group_id, why)], []
        return self._fallback(te, rnd, has)

    def _fallback(self, te: Group, rnd: Round, has: BoolArray) -> tuple[Victims, list[Note]]:
        """No job satisfies Eq. 2 under the cap: preempt a random running BE job (the paper: rare, never seen on
        84 nodes). Each firing leaves a `fitgpp-fallback:` note so a driver can count it."""
        args = self.args
        if args.fallback == "none":
            return [], []
        allowed = rnd.eligible() if args.fallback_respects_cap else ~rnd.in_grace
        pool = [int(r) for r in random_order(args.seed, rnd.now, te.group_id, np.flatnonzero(allowed & has[rnd.node]))]
        if not pool:
            return [], []
        if args.fallback_until_fits:
            victims = rnd.until_fits(te, pool)
            if victims is None:
                return [], []
        else:
            where = rnd.node_names[int(rnd.node[pool[0]])]
            victims = [(pool[0], te.group_id, f"random fallback victim for {te.group_id} on {where}")]
        chosen = ",".join(rnd.gids[r] for r, _, _ in victims)
        note = Note(f"no BE job satisfies Eq. 2 under P; random victim(s) {chosen}", te.group_id, FALLBACK)
        return victims, [note]


register("fitgpp", FitGppArgs)(FitGpp)
