"""Per-group isolation of the policy's decision: a group whose data makes the policy raise is set aside, and the
others are decided without it.

Why: a policy reads every group's numbers, and users control some of them (estimates, tag fields, progress
files). Without isolation one group whose value trips a solver (accel_batch's LP on an estimate of 1e15 s) or a
policy bug fails every decision, for every user, for as long as that group waits.

How, when `policy.schedule` raises on the view (anything but the backend's `fatal` exceptions, the cycle's own
ends, which propagate): the pending groups are bisected, the running and other groups always kept. The view with
no pending group is tried first (if it fails too, no group is to blame); then halves of the pending groups are
added to the set known to pass, a failing half split again, down to single culprits. `k` culprits among `n`
pending groups cost about `1 + 2k log2(n)` calls; the plan is the one of the last call that passed, which is the
view without the culprits. The calls are capped (`Quarantine.max_calls`, and a wall-time budget the daemon sets
under its watchdog's limit): at the cap, or when no group is to blame, this decision is strict FIFO's on the view
without the groups set aside (`slurmx.policies.baselines.Fifo`; at the cap, without the groups not yet tried
either: any of them may be a culprit), or the empty plan if FIFO raises too.

A culprit stays quarantined, not shown to the policy, while its entry in the view is the one it failed on (Slurm's
own priority aside): a bad group costs one bisection, not one per cycle; once its data changes (a new estimate, it
started) it is tried again, and it is forgotten when it leaves the view. The quarantine is the backend's, so the
daemon keeps it across cycles and the simulator one per run. The normal path costs one length check: the view is
handed over as is while nothing is quarantined, and a narrowed view is built lazily over the original (no group
is built or copied until the policy reads it).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from typing import NamedTuple, cast

from slurmx.core.actions import Plan
from slurmx.core.model import ClusterView, EndKey, Group, KindName, Node, QueueKey, ViewIndex
from slurmx.core.resources import Resources
from slurmx.core.snapshot import LentSnapshot
from slurmx.policies.base import Policy, make_policy

__all__ = ["MAX_CALLS", "MAX_QUARANTINED", "Isolated", "Quarantine", "SetAside", "plan_isolated", "reason_of",
           "without"]

MAX_CALLS = 64  # schedule calls in one decision, the first failing one included (2 culprits among 10^6 groups)
MAX_QUARANTINED = 1024  # groups held at once; past it the oldest is let go (tried again, at one bisection's cost)
_REASON_CHARS = 300


@dataclass(frozen=True, slots=True)
class SetAside:
    group_id: str
    reason: str  # the exception's type and message, on one line


class Isolated(NamedTuple):
    """A decision's plan and what isolation did to get it (nothing, on the normal path; a tuple: built at every
    decision, it costs less than a frozen dataclass)."""

    plan: Plan
    hidden: AbstractSet[str] = frozenset()  # groups the plan's view lacked: its actions on them are refused
    set_aside: tuple[SetAside, ...] = ()  # culprits found by this decision (each reported once)
    fallback: str | None = None  # why the plan is not the policy's own (FIFO's, or empty)
    calls: int = 1


def reason_of(exc: BaseException) -> str:
    """`Type: message` on one line, cut to a few hundred characters (it ends in a log line and an audit row)."""
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:_REASON_CHARS]


def _entry(group: Group) -> Group:
    """What a quarantined group is compared by: its entry without Slurm's priority (Slurm moves it with age)."""
    if all(v.priority is None for v in group.variants):
        return group
    return replace(group, variants=tuple(replace(v, priority=None) for v in group.variants))


class Quarantine:
    """Groups set aside, each with the entry it failed on; bounded (`limit`), oldest let go first. It is the cycle's
    state each backend keeps from one decision to the next, so it also holds the policy's `memo` (the last plan's
    `Plan.memo`, handed back by `cycle.run.decide` as the next view's `ClusterView.memo`): one place for both
    backends, in memory only."""

    __slots__ = ("_held", "budget_s", "fallback", "limit", "max_calls", "memo")

    def __init__(self, limit: int = MAX_QUARANTINED, max_calls: int = MAX_CALLS, budget_s: float | None = None,
                 fallback: Policy | None = None) -> None:
        self._held: dict[str, Group] = {}
        self.limit = limit
        self.max_calls = max_calls
        self.budget_s = budget_s  # wall time for one decision's bisection; None: calls only (the simulator's runs
        # must not depend on the machine's speed)
        self.fallback = fallback  # asked when no group is to blame; None: strict FIFO
        self.memo: object = None  # the policy's memo for its next decision (cycle.run.decide)

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, group_id: object) -> bool:
        return group_id in self._held

    def hidden(self, groups: Mapping[str, Group]) -> frozenset[str]:
        """The quarantined groups still in `groups` as they failed; the others are forgotten (tried again)."""
        kept = {gid: entry for gid, entry in self._held.items()
                if (group := groups.get(gid)) is not None and _entry(group) == entry}
        if len(kept) != len(self._held):
            self._held = kept
        return frozenset(kept)

    def hold(self, group: Group) -> None:
        self._held.pop(group.group_id, None)
        while len(self._held) >= self.limit > 0:
            del self._held[next(iter(self._held))]
        if self.limit > 0:
            self._held[group.group_id] = _entry(group)


class _IndexWithout:
    """The view's index with some groups left out of its queues; node answers are the original's."""

    __slots__ = ("_drop", "_index")

    def __init__(self, index: ViewIndex, drop: AbstractSet[str]) -> None:
        self._index = index
        self._drop = drop

    def pending_keys(self) -> Sequence[QueueKey] | None:
        keys = self._index.pending_keys()
        return None if keys is None else [k for k in keys if k[1] not in self._drop]

    def running_keys(self) -> Sequence[QueueKey] | None:
        keys = self._index.running_keys()
        return None if keys is None else [k for k in keys if k[1] not in self._drop]

    def running_end_keys(self, kind: KindName) -> Sequence[EndKey] | None:
        keys = self._index.running_end_keys(kind)
        return None if keys is None else [k for k in keys if k[2] not in self._drop]

    def nodes_of_kind(self, kind: KindName) -> tuple[Node, ...]:
        return self._index.nodes_of_kind(kind)

    def fitting_nodes(self, kind: KindName, request: Resources) -> Iterator[Node]:
        return self._index.fitting_nodes(kind, request)

    def fitting_node_names(self, kind: KindName, request: Resources) -> Iterator[str]:
        return self._index.fitting_node_names(kind, request)

    def node_names_of_kind(self, kind: KindName) -> frozenset[str]:
        return self._index.node_names_of_kind(kind)


def without(view: ClusterView, drop: AbstractSet[str]) -> ClusterView:
    """`view` without the groups in `drop`; each kept group is read from `view` only when the policy reads it."""
    groups = view.groups
    keys = [gid for gid in groups if gid not in drop]
    lent = LentSnapshot(cast("dict[str, Group]", dict.fromkeys(keys)), set(keys), groups.__getitem__)
    index = None if view.index is None else _IndexWithout(view.index, drop)
    return ClusterView(view.now, view.nodes, view.partitions, lent, view.kinds, index, view.memo)


def plan_isolated(policy: Policy, view: ClusterView, now: float, quarantine: Quarantine,
                  fatal: tuple[type[BaseException], ...] = ()) -> Plan | Isolated:
    """The policy's plan on `view` without its quarantined groups; when it raises, the plan without the groups to
    blame (found, quarantined and returned in `set_aside`), else FIFO's. Raises only what `fatal` names.

    The normal path (no quarantined group in the view, no exception) returns what the policy returned, as is: a
    decision then builds nothing more than it did before isolation."""
    hidden = quarantine.hidden(view.groups) if quarantine else _NONE
    try:
        plan = policy.schedule(without(view, hidden) if hidden else view, now)
    except fatal:
        raise
    except Exception as exc:
        first = reason_of(exc)  # a string: the exception's frames hold the view
    else:
        return Isolated(plan, hidden) if hidden else plan
    return _Bisection(policy, view, now, quarantine, fatal, hidden).run(first)


_NONE: frozenset[str] = frozenset()


class _Bisection:
    """One decision's search for the groups the policy fails on; see the module's docstring."""

    def __init__(self, policy: Policy, view: ClusterView, now: float, quarantine: Quarantine,
                 fatal: tuple[type[BaseException], ...], hidden: frozenset[str]) -> None:
        self.policy, self.view, self.now, self.fatal, self.hidden = policy, view, now, fatal, hidden
        self.quarantine = quarantine
        self.pending = [g.group_id for g in view.pending_groups() if g.group_id not in hidden]
        self.calls = 1  # the call that failed
        self.began = time.perf_counter()
        self.good: list[str] = []  # pending groups known to pass together
        self.plan: Plan | None = None  # the plan of the last call that passed: on `good`
        self.found: list[SetAside] = []

    def run(self, first: str) -> Isolated:
        if not self.pending:
            return self._fallback(f"policy {self.policy.name} raised with no pending group shown ({first})")
        plan, failed = self._try(())
        if plan is None:
            return self._fallback(f"policy {self.policy.name} fails with no pending group shown ({failed}), and "
                                  f"with them ({first})")
        self.plan = plan
        try:
            self._split(self.pending, first)  # the whole set is known to fail: the first call
        except _Capped:
            aside = ", ".join(s.group_id for s in self.found) or "none"
            found = {s.group_id for s in self.found}
            unverified = {gid for gid in self.pending if gid not in found} - set(self.good)
            return self._fallback(f"policy {self.policy.name} raised ({first}); culprits not all found within "
                                  f"{self.calls} calls (set aside so far: {aside}; {len(unverified)} group(s) "
                                  "not tried, left out of this cycle)", unverified)
        assert self.plan is not None and self.found  # a failing set is split down to a culprit
        return Isolated(self.plan, self.hidden | {s.group_id for s in self.found}, tuple(self.found), None,
                        self.calls)

    def _split(self, failing: list[str], reason: str) -> None:
        """`good + failing` failed with `reason`: find the culprits among `failing`."""
        if len(failing) == 1:
            self._culprit(failing[0], reason)
            return
        mid = len(failing) // 2
        first, second = failing[:mid], failing[mid:]
        if self._visit(first):
            self._split(second, reason)  # good + second is the set that failed: known without a call
        else:
            self._visit(second)

    def _visit(self, part: list[str]) -> bool:
        """Try `good + part`: keep `part` if it passes, else find its culprits; says whether it passed."""
        plan, failed = self._try(part)
        if plan is not None:
            self.good.extend(part)
            self.plan = plan
            return True
        self._split(part, failed)
        return False

    def _culprit(self, group_id: str, reason: str) -> None:
        self.found.append(SetAside(group_id, reason))
        self.quarantine.hold(self.view.groups[group_id])

    def _try(self, part: Sequence[str]) -> tuple[Plan | None, str]:
        """The policy's plan on the view with `good + part` as the only pending groups, or None and why."""
        q = self.quarantine
        if self.calls >= q.max_calls or \
                (q.budget_s is not None and time.perf_counter() - self.began > q.budget_s):
            raise _Capped
        self.calls += 1
        shown = {*self.good, *part}
        drop = self.hidden | {gid for gid in self.pending if gid not in shown}
        try:
            return self.policy.schedule(without(self.view, drop), self.now), ""
        except self.fatal:
            raise
        except Exception as exc:
            return None, reason_of(exc)

    def _fallback(self, why: str, unverified: AbstractSet[str] = frozenset()) -> Isolated:
        """FIFO's plan on the view without the groups set aside, nor those the search did not get to (any of them
        may be a culprit too)."""
        hidden = self.hidden | {s.group_id for s in self.found} | unverified
        plan, how = fifo_plan(self.view, self.now, hidden, self.fatal, self.quarantine.fallback)
        return Isolated(plan, hidden, tuple(self.found), f"{why}; {how}", self.calls)


class _Capped(Exception):
    """The bisection's calls or time ran out."""


_FIFO: list[Policy] = []


def fifo_plan(view: ClusterView, now: float, hidden: AbstractSet[str], fatal: tuple[type[BaseException], ...],
              policy: Policy | None = None) -> tuple[Plan, str]:
    """Strict FIFO's plan (or `policy`'s) on `view` without `hidden`, or the empty plan if it raises too; and which
    it was."""
    if policy is None:
        if not _FIFO:
            _FIFO.append(make_policy("fifo"))
        policy = _FIFO[0]
    try:
        return policy.schedule(without(view, hidden) if hidden else view, now), f"{policy.name} decided this cycle"
    except fatal:
        raise
    except Exception as exc:
        return Plan(), f"{policy.name} failed too ({reason_of(exc)}): nothing decided this cycle"
