"""The baselines of the AlloX paper (§5.1.1), on the same machine model as AlloX (`allox.read_cluster`).

- `es`: equal share. Every kind's machines are split statically among the users; within a user, a freed
  machine takes her job that is shortest on it (evaluation), or her jobs go first come first served, each to
  its favourite kind if her share of it is free, else another (`order: fcfs`, the intro's Table 1).
- `drff`, `drfs`: online DRF (the user with the least dominant share goes next), FCFS within a user and
  always the accelerator variant (DRFF: no estimator), or shortest job first on its faster kind (DRFS).
  If that user's job cannot start, nothing behind it does (head-of-line blocking, as in the authors' code).
- `drfa`: DRF over one "virtual CPU" resource, an accelerator counting as β CPU machines (the average
  speedup); SJF within a user, accelerator first, then the other kinds.
- `srpt`: shortest remaining processing time over all (job, kind) pairs, with FREE preemption and
  migration between kinds. Simulator only: it returns `Preempt(grace_s=0)` and, in the same plan, the
  `Start` that takes the freed machine, and assumes the driver applies them in order at no cost.
- `sjf`: one queue, shortest best-case job first, each on its fastest kind with an idle machine.
- `jsq_plus`, `sjf_plus`: the intro's strawmen (§2.2) for the worked examples.
FIFO is `baselines.fifo`. "Waiting" users and ties follow `allox`: accelerators first, then site order.

Long because it holds the paper's five baselines, each a page, on one
shared machine model and with the authors'-simulator options each of them takes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Generic, Literal, TypeVar

from slurmx.core.actions import Note, Plan, Preempt, Start
from slurmx.core.model import ClusterView, Group, Variant, VariantState
from slurmx.policies.allox_model import (
    Cluster,
    Job,
    Machine,
    SamplesArgs,
    SampleSort,
    favoured,
    read_cluster,
    start_samples,
)
from slurmx.policies.base import Capabilities, PolicyArgs, register

__all__ = [
    "Drfa",
    "DrfaArgs",
    "Drff",
    "DrffArgs",
    "Drfs",
    "DrfsArgs",
    "EqualShare",
    "EqualShareArgs",
    "JsqPlus",
    "JsqPlusArgs",
    "Sjf",
    "SjfArgs",
    "SjfPlus",
    "SjfPlusArgs",
    "Srpt",
    "SrptArgs",
]

Usage = dict[str, float]  # units per kind, and "mem" in MB


def _units(cluster: Cluster, kind: str, group: Group) -> float:
    variant = group.variant(kind)
    gres = cluster.unit_gres.get(kind)
    return float(variant.request.gres_count(gres)) if variant is not None and gres is not None else 1.0


def _usage(view: ClusterView, cluster: Cluster) -> dict[str, Usage]:
    """What each user's running jobs hold: machines per kind and memory."""
    usage: dict[str, Usage] = {}
    for group in view.running_groups():
        variant = group.running_variant()
        if variant is None or variant.kind not in cluster.capacity:
            continue
        mine = usage.setdefault(group.user, {})
        mine[variant.kind] = mine.get(variant.kind, 0.0) + _units(cluster, variant.kind, group)
        mine["mem"] = mine.get("mem", 0.0) + variant.request.mem_mb
    for user, kind in cluster.samples:  # started this decision (`start_samples`): they count as running
        mine = usage.setdefault(user, {})
        mine[kind] = mine.get(kind, 0.0) + 1.0
    return usage


def _first_submit(jobs: list[Job]) -> dict[str, float]:
    first: dict[str, float] = {}
    for job in jobs:
        first[job.user] = min(first.get(job.user, math.inf), job.group.submit_time)
    return first


def _fcfs(job: Job) -> tuple[float, str]:
    return job.group.submit_time, job.group.group_id


Rank = Mapping[str, Mapping[str, int]]  # kind -> group -> place in its owner's list as sorted for that kind


Pick = Callable[[str], tuple[Job, str] | None]
Share = Callable[[Usage], float]


Reason = Callable[[Job, str], str]
A = TypeVar("A", bound=PolicyArgs)


@dataclass(frozen=True)
class _OnMachines(Generic[A]):
    """What every baseline does around its own rule (`decide`): read AlloX's machine model from the view, and
    return the rule's actions with the model's notes. `needs_estimates` False admits unestimated jobs."""

    args: A
    needs_estimates: ClassVar[bool] = True
    capabilities: ClassVar[Capabilities] = Capabilities()  # one node each, no placement rules, profiled

    def schedule(self, view: ClusterView, now: float) -> Plan:
        cluster = read_cluster(view, now, self.needs_estimates)
        memo: SampleSort | None = None
        first: list[Start] = []
        if isinstance(self.args, SamplesArgs) and self.args.samples_first:
            last = view.memo.last_sort if isinstance(view.memo, SampleSort) else None
            first = start_samples(cluster, getattr(self.args, "samples_in_passes", False), now,
                                  self.args.samples_order, last)
            if self.args.samples_order != "arrival":  # when their scheduler last sorted the queues
                memo = SampleSort(now) if cluster.scheduler_runs else None if last is None else SampleSort(last)
        actions = self.decide(view, cluster, now)
        return Plan((*first, *actions), tuple(cluster.notes), memo)

    def decide(self, view: ClusterView, cluster: Cluster, now: float) -> Sequence[Start | Preempt]:
        """The baseline's rule: the starts (and, for SRPT, preemptions) on `cluster`, which it updates."""
        raise NotImplementedError


def _start_in_order(cluster: Cluster, pairs: Iterable[tuple[Job, str]], reason: Reason) -> list[Start]:
    """The start loop the list policies share (SJF, SJF+, SRPT): each (job, kind) pair in the given order
    starts if that job has not started yet and the kind has an idle machine with room."""
    started: set[str] = set()
    actions: list[Start] = []
    for job, kind in pairs:
        idle = cluster.idle(kind)
        if job.group.group_id not in started and idle:
            start = cluster.start(idle[0], job, kind, reason(job, kind))
            if start is not None:
                started.add(job.group.group_id)
                actions.append(start)
    return actions


Ties = Literal["earliest_waiting", "by_name"]


def _progressive_filling(view: ClusterView, cluster: Cluster, share: Share, pick: Pick, tag: str,
                         ties: Ties = "earliest_waiting") -> list[Start]:
    """Online DRF: the waiting user with the least share picks a (job, kind); stop when it cannot start."""
    usage = _usage(view, cluster)
    actions: list[Start] = []
    while cluster.jobs and cluster.idle():
        first = _first_submit(cluster.jobs)
        if ties == "by_name":
            first = dict.fromkeys(first, 0.0)
        user = min(first, key=lambda u: (share(usage.get(u, {})), first[u], u))
        choice = pick(user)
        idle = cluster.idle(choice[1]) if choice is not None else []
        if choice is None or not idle:
            cluster.notes.append(Note(f"{user}'s next job cannot start; nothing behind it does", kind=tag))
            break
        job, kind = choice
        start = cluster.start(idle[0], job, kind, f"{tag}: {user} has the least dominant share")
        if start is not None:
            actions.append(start)
            mine = usage.setdefault(user, {})
            mine[kind] = mine.get(kind, 0.0) + _units(cluster, kind, job.group)
            mine["mem"] = mine.get("mem", 0.0) + job.variant(kind).request.mem_mb
    return actions


def _drf_share(cluster: Cluster) -> Share:
    def share(use: Usage) -> float:
        parts = [use.get(k, 0.0) / cap for k, cap in cluster.capacity.items() if cap]
        parts.append(use.get("mem", 0.0) / cluster.total_mem if cluster.total_mem else 0.0)
        return max(parts)

    return share


class DrffArgs(SamplesArgs):
    """`config`: "accelerator" always takes the first accelerator variant a job has (the authors' DRFF);
    "first" takes the variant the user listed first (her stated preference).

    `ties`: who goes first among users with equal shares (frequent: every job is one machine of 20).
    "earliest_waiting": the user whose oldest waiting job arrived first, then by name. "by_name": the first
    user by name, as in the authors' simulator (its lowest queue index; an artifact, off by default)."""

    config: Literal["accelerator", "first"] = "accelerator"
    ties: Ties = "earliest_waiting"


class Drff(_OnMachines[DrffArgs]):
    """DRF + FCFS, no estimator: jobs need no estimates."""

    name: ClassVar[str] = "drff"
    needs_estimates: ClassVar[bool] = False

    def decide(self, view: ClusterView, cluster: Cluster, now: float) -> Sequence[Start | Preempt]:

        def pick(user: str) -> tuple[Job, str] | None:
            job = min((j for j in cluster.jobs if j.user == user), key=_fcfs)
            if self.args.config == "first":
                listed = [v.kind for v in job.group.variants if v.kind in job.estimates]
                return job, listed[0]
            return job, min(job.estimates, key=cluster.kinds.index)

        return _progressive_filling(view, cluster, _drf_share(cluster), pick, "drff", self.args.ties)


class DrfsArgs(SamplesArgs):
    """SJF by the best estimate within a user, on the faster kind.

    `ties`: who goes first among users with equal shares (frequent: every job is one machine of 20).
    "earliest_waiting": the user whose oldest waiting job arrived first, then by name. "by_name": the first
    user by name, as in the authors' simulator (its lowest queue index; an artifact, off by default)."""

    ties: Ties = "earliest_waiting"


class Drfs(_OnMachines[DrfsArgs]):
    """DRF + SJF: each user's shortest job (by its best estimate), on its faster kind."""

    name: ClassVar[str] = "drfs"

    def decide(self, view: ClusterView, cluster: Cluster, now: float) -> Sequence[Start | Preempt]:

        def pick(user: str) -> tuple[Job, str] | None:
            job = min((j for j in cluster.jobs if j.user == user), key=lambda j: (min(j.estimates.values()), _fcfs(j)))
            return job, favoured(job.estimates, cluster.kinds)

        return _progressive_filling(view, cluster, _drf_share(cluster), pick, "drfs", self.args.ties)


class DrfaArgs(SamplesArgs):
    """`beta`: machines of the base kind one machine of each kind is worth (the base kind, the first kind
    without GRES, is 1). None: the mean over the view's jobs with estimates on both of base time / kind
    time, i.e. the average speedup (the authors average over the whole workload, known in advance).

    `ties`: who goes first among users with equal shares (frequent: every job is one machine of 20).
    "earliest_waiting": the user whose oldest waiting job arrived first, then by name. "by_name": the first
    user by name, as in the authors' simulator (its lowest queue index; an artifact, off by default)."""

    beta: dict[str, float] | None = None
    ties: Ties = "earliest_waiting"


class Drfa(_OnMachines[DrfaArgs]):
    """DRF on one converted resource: share = max(sum β_k·machines_k / sum β_k·capacity_k, memory)."""

    name: ClassVar[str] = "drfa"

    def schedule(self, view: ClusterView, now: float) -> Plan:
        if self.args.samples_first and self.args.samples_order == "accelerator":  # their queue, kept in the memo
            from slurmx.policies.allox_queue_order import schedule_in_queue_order  # it builds on this module

            return schedule_in_queue_order(view, now, self._share, _usage, _units, self.args.ties == "by_name")
        return super().schedule(view, now)

    def _share(self, view: ClusterView, cluster: Cluster) -> Share:
        beta = self.args.beta if self.args.beta is not None else _average_speedups(view, cluster)
        total = sum(beta.get(k, 1.0) * cap for k, cap in cluster.capacity.items())

        def share(use: Usage) -> float:
            cpu = sum(beta.get(k, 1.0) * use.get(k, 0.0) for k in cluster.capacity) / total if total else 0.0
            return max(cpu, use.get("mem", 0.0) / cluster.total_mem if cluster.total_mem else 0.0)

        return share

    def decide(self, view: ClusterView, cluster: Cluster, now: float) -> Sequence[Start | Preempt]:
        share = self._share(view, cluster)

        def pick(user: str) -> tuple[Job, str] | None:
            for kind in cluster.kinds:
                mine = [j for j in cluster.jobs if j.user == user and kind in j.estimates]
                if mine and cluster.idle(kind):
                    return min(mine, key=lambda j: (j.estimates[kind], _fcfs(j))), kind
            return None

        return _progressive_filling(view, cluster, share, pick, "drfa", self.args.ties)


def _average_speedups(view: ClusterView, cluster: Cluster) -> dict[str, float]:
    base = next((k for k in view.kinds if cluster.unit_gres.get(k) is None and k in cluster.capacity), None)
    base = base or (cluster.kinds[0] if cluster.kinds else "")
    beta = {base: 1.0}
    for kind in cluster.capacity:
        ratios = []
        for group in view.groups.values():
            b, k = group.variant(base), group.variant(kind)
            if b is not None and k is not None and b.estimate_s and k.estimate_s:
                ratios.append(b.estimate_s / k.estimate_s)
        beta.setdefault(kind, sum(ratios) / len(ratios) if ratios else 1.0)
    return beta


class EqualShareArgs(SamplesArgs):
    """`order`: "sjf" (evaluation, §5.1.1): a freed machine takes the user's job shortest on it, kinds in
    turn, accelerators first; "fcfs" (intro, Table 1): the user's jobs in order, each on its favourite kind
    if her share of it is free, else on another, and her later jobs wait behind it. A kind's m machines
    split among the n users as m // n each, the first m % n users (by name) one more.

    `users`: who the split is among. The paper's ES divides "statically" among all users, so a user with
    nothing to run leaves her share idle: list them here (the site's user population; a user in the view
    but not listed joins the split). None: the users in the view, so an absent user's share goes to others
    (work-conserving across users, which the paper's ES is not).

    `split`: "static" (the paper's §5.1.1 wording: each user's share is fixed) or "online" (the authors'
    simulator as stored in their IRFsim repository, `EqualShareScheduler.onlineEqualShare`: kinds in turn,
    accelerators first, the waiting user holding the fewest machines of the kind starts her job shortest on
    it, until the kind has no idle machine; no per-user cap, so it is work-conserving). `order` and `users`
    apply to "static" only.

    `base_blocks_accelerators` (order "sjf", static split; off by default: an artifact): as in the authors'
    simulator (IRFsim's `EqualShareScheduler`, whose accelerator pass is given a CPU share of 0 and then
    subtracts the user's CPU use), a user holding any machine of a kind without GRES gets no accelerator pass;
    her accelerator share is filled only in the base-kind pass, where her jobs go in order of base-kind
    time, each to an accelerator of her share when she has room there, else to the base kind.

    `samples_in_passes` (with `samples_first`; off by default: an artifact): as in the authors' simulator,
    whose ES passes take the user's waiting items sorted by length, profiling samples among them, the
    samples still waiting after the samples' own turn are jobs of their owner in her passes, on either kind.

    `over_share_blocks` (with `base_blocks_accelerators`; off by default: an artifact): as in the authors'
    simulator, whose passes subtract the user's whole usage from her share and then ask every component of
    a demand to fit (a GPU job's 0 cores do not fit in a negative CPU remainder), a user holding more than
    her share of any kind starts nothing in the base-kind pass either; only profiling samples, which start
    outside the shares, put her there.

    `share_picks_kind` (with `base_blocks_accelerators`; off by default: an artifact): as in the authors'
    simulator, whose base-kind pass picks a job's kind by the room in her share alone (an accelerator of her
    share if she has one to spare, else the base kind) and ends her pass when no machine of that kind is free in
    the cluster; without it, a job whose accelerator share has room but finds no free accelerator goes to the
    base kind."""

    order: Literal["sjf", "fcfs"] = "sjf"
    users: tuple[str, ...] | None = None
    split: Literal["static", "online"] = "static"
    base_blocks_accelerators: bool = False
    samples_in_passes: bool = False
    over_share_blocks: bool = False
    share_picks_kind: bool = False


class EqualShare(_OnMachines[EqualShareArgs]):
    """ES: a static, equal split of every kind's machines among the users."""

    name: ClassVar[str] = "es"

    def schedule(self, view: ClusterView, now: float) -> Plan:
        a = self.args
        if a.samples_first and a.samples_order == "base_kind" and a.order == "sjf" and a.base_blocks_accelerators:
            from slurmx.policies.allox_queue_order import es_in_queue_order  # their queues, kept in the memo

            return es_in_queue_order(view, now, a.samples_in_passes, self._passes)
        return super().schedule(view, now)

    def decide(self, view: ClusterView, cluster: Cluster, now: float) -> Sequence[Start | Preempt]:
        return self._passes(view, cluster, None)

    def _passes(self, view: ClusterView, cluster: Cluster, rank: Rank | None) -> list[Start]:
        """The rule; `rank` (per kind, each item's place in its owner's list as sorted for that kind's pass) breaks
        ties between equal times where the authors' simulator's lists do, instead of arrival."""
        if self.args.split == "online":
            return _online_equal_share(view, cluster)
        users = sorted({g.user for g in (*view.pending_groups(), *view.running_groups())} | set(self.args.users or ()))
        if not users:
            return []
        usage = _usage(view, cluster)
        quota = {
            (u, k): cap // len(users) + (1 if r < cap % len(users) else 0)
            for r, u in enumerate(users)
            for k, cap in cluster.capacity.items()
        }

        def share_room(user: str, kind: str) -> bool:
            return usage.get(user, {}).get(kind, 0.0) < quota[user, kind]

        def room(user: str, kind: str) -> bool:
            return share_room(user, kind) and bool(cluster.idle(kind))

        actions: list[Start] = []

        def take(job: Job, kind: str, why: str) -> bool:
            start = cluster.start(cluster.idle(kind)[0], job, kind, f"es: {why}")
            if start is None:
                return False
            actions.append(start)
            mine = usage.setdefault(job.user, {})
            mine[kind] = mine.get(kind, 0.0) + _units(cluster, kind, job.group)
            return True

        def over(user: str) -> bool:  # holds more than her share of some kind (samples start outside shares)
            return self.args.over_share_blocks and any(
                usage.get(user, {}).get(k, 0.0) > quota[user, k] for k in cluster.capacity)

        if self.args.order == "sjf" and self.args.base_blocks_accelerators:
            _es_blocked_passes(cluster, users, usage, room, take, over, rank,
                               share_room if self.args.share_picks_kind else None)
        elif self.args.order == "sjf":
            for kind in cluster.kinds:
                for user in users:
                    while room(user, kind):
                        mine = [j for j in cluster.jobs if j.user == user and kind in j.estimates]
                        if not mine or not take(min(mine, key=lambda j: (j.estimates[kind], _fcfs(j))), kind, "sjf"):
                            break
        else:
            for user in users:
                for job in sorted((j for j in cluster.jobs if j.user == user), key=_fcfs):
                    kinds = sorted(job.estimates, key=lambda k: (job.estimates[k], cluster.kinds.index(k)))
                    if not any(room(user, k) and take(job, k, "fcfs, favourite first") for k in kinds):
                        break
        return actions


def _es_blocked_passes(cluster: Cluster, users: Sequence[str], usage: Mapping[str, Usage],
                       room: Callable[[str, str], bool], take: Callable[[Job, str, str], bool],
                       over: Callable[[str], bool], rank: Rank | None = None,
                       share_room: Callable[[str, str], bool] | None = None) -> None:
    """ES's passes as the authors' simulator runs them (`EqualShareArgs.base_blocks_accelerators`): per user,
    the accelerator passes unless she holds a base-kind machine, then the base-kind pass in base-kind-time
    order, each job to an accelerator of her share first, else to the base kind; a job that fits neither ends
    her pass. A user `over` her share of some kind gets no base-kind pass either (`over_share_blocks`). Equal
    times go by `rank` when given, else by arrival. With `share_room` (`share_picks_kind`), the base-kind pass
    picks a job's kind by her share's room alone and ends when no machine of that kind is free."""
    base = [k for k in cluster.kinds if cluster.unit_gres.get(k) is None]
    accelerators = [k for k in cluster.kinds if k not in base]

    def tie(kind: str) -> Callable[[Job], tuple[float, float, str]]:
        if rank is None:
            return lambda j: (j.estimates[kind], *_fcfs(j))
        return lambda j: (j.estimates[kind], float(rank[kind].get(j.group.group_id, len(rank[kind]))), "")

    for user in users:
        holds_base = any(usage.get(user, {}).get(k, 0.0) > 0 for k in base)
        for kind in [] if holds_base else accelerators:
            while room(user, kind):
                mine = [j for j in cluster.jobs if j.user == user and kind in j.estimates]
                if not mine or not take(min(mine, key=tie(kind)), kind, "sjf"):
                    break
        for kind in [] if over(user) else base:
            mine = sorted((j for j in cluster.jobs if j.user == user and kind in j.estimates), key=tie(kind))
            fits = room if share_room is None else share_room
            for job in mine:
                target = next((k for k in (*accelerators, kind) if k in job.estimates and fits(user, k)), None)
                if target is None or not cluster.idle(target) or \
                        not take(job, target, f"sjf by {kind} time (base use blocks accelerators)"):
                    break


def _online_equal_share(view: ClusterView, cluster: Cluster) -> list[Start]:
    """ES as the authors' stored simulator runs it: per kind, the waiting user with the fewest of its machines
    in use starts her job shortest on it (ties: user name), until the kind has no idle machine."""
    usage = _usage(view, cluster)
    actions: list[Start] = []
    for kind in cluster.kinds:
        while cluster.idle(kind):
            waiting = sorted({j.user for j in cluster.jobs if kind in j.estimates})
            if not waiting:
                break
            user = min(waiting, key=lambda u: (usage.get(u, {}).get(kind, 0.0), u))
            job = min((j for j in cluster.jobs if j.user == user and kind in j.estimates),
                      key=lambda j: (j.estimates[kind], _fcfs(j)))
            start = cluster.start(cluster.idle(kind)[0], job, kind, f"es (online): {user} holds the fewest {kind}")
            if start is None:
                break
            actions.append(start)
            mine = usage.setdefault(user, {})
            mine[kind] = mine.get(kind, 0.0) + _units(cluster, kind, job.group)
    return actions


class SrptArgs(SamplesArgs):
    """No knobs. Free preemption and migration: simulator only (module docstring)."""


class Srpt(_OnMachines[SrptArgs]):
    """SRPT over (job, kind) pairs of running and waiting jobs; a running job's remaining fraction applies to
    every kind. A requeued job's estimates are taken as its remaining times (the driver's contract)."""

    name: ClassVar[str] = "srpt"

    def decide(self, view: ClusterView, cluster: Cluster, now: float) -> Sequence[Start | Preempt]:
        candidates = list(cluster.jobs)
        running: dict[str, tuple[Job, Variant]] = {}
        slots = {k: len(cluster.idle(k)) for k in cluster.kinds}  # free now, or held by a job SRPT may stop
        for group in view.running_groups():
            found = _running_job(group, now, cluster)
            if found is not None:
                job, variant = found
                running[group.group_id] = found
                candidates.append(job)
                slots[variant.kind] += 1
        pairs = sorted(
            ((job, k) for job in candidates for k in job.estimates),
            key=lambda p: (p[0].estimates[p[1]], _fcfs(p[0]), cluster.kinds.index(p[1])),
        )
        want: dict[str, str] = {}
        for job, kind in pairs:
            if job.group.group_id not in want and slots[kind] > 0:
                want[job.group.group_id] = kind
                slots[kind] -= 1
        actions: list[Preempt | Start] = []
        for gid, (_, variant) in running.items():
            if want.get(gid) == variant.kind:
                del want[gid]  # keeps its machine
            else:
                actions.append(Preempt(gid, 0, reason="srpt: shorter remaining work needs the machine"))
                _release(cluster, variant)
        by_rank = {job.group.group_id: job for job, _ in pairs}  # each job once, at its best pair's rank
        moves = [(job, want[gid]) for gid, job in by_rank.items() if gid in want]
        actions += _start_in_order(cluster, moves, lambda job, kind: f"srpt: {job.estimates[kind]:.0f}s left")
        return actions


def _running_job(group: Group, now: float, cluster: Cluster) -> tuple[Job, Variant] | None:
    """A running group as a candidate: its remaining fraction applied to every kind it may still run on."""
    variant = group.running_variant()
    if variant is None or variant.kind not in cluster.kinds or not variant.estimate_s:
        return None
    elapsed = now - (variant.start_time if variant.start_time is not None else now)
    left = max(0.0, 1.0 - elapsed / variant.estimate_s)
    estimates = {
        v.kind: left * float(v.estimate_s)
        for v in group.variants
        if v.kind in cluster.kinds
        and v.estimate_s is not None
        and (v is variant or v.state in (VariantState.PENDING, VariantState.HELD, VariantState.REQUEUED))
    }
    return Job(group, estimates), variant


def _release(cluster: Cluster, variant: Variant) -> None:
    """A preempted job's machine is free at once (free preemption)."""
    for node in variant.nodes:
        cluster.free[node] = cluster.free[node] + variant.request
        for i, m in enumerate(cluster.machines):
            if m.node == node and m.kind == variant.kind and not m.idle:
                cluster.machines[i] = Machine(m.kind, m.node, m.unit, 0.0, True)
                break


class SjfArgs(PolicyArgs):
    """No knobs: waiting jobs by their best estimate, each on its fastest kind with an idle machine."""


class Sjf(_OnMachines[SjfArgs]):
    """Shortest job first (best-case estimate), each job on the fastest kind that has an idle machine."""

    name: ClassVar[str] = "sjf"

    def decide(self, view: ClusterView, cluster: Cluster, now: float) -> Sequence[Start | Preempt]:
        pairs = [(job, kind)
                 for job in sorted(cluster.jobs, key=lambda j: (min(j.estimates.values()), _fcfs(j)))
                 for kind in sorted(job.estimates, key=lambda k: (job.estimates[k], cluster.kinds.index(k)))]
        return _start_in_order(cluster, pairs, lambda job, kind: "sjf")


class SjfPlusArgs(PolicyArgs):
    """No knobs: one queue per kind by the time on it; freed machines take their queue's head, the
    shortest (job, kind) pair first when several are free (§2.2)."""


class SjfPlus(_OnMachines[SjfPlusArgs]):
    """SJF+: the intro's strawman; it ignores how much faster a job is elsewhere (Fig. 5: 50 vs 20 min)."""

    name: ClassVar[str] = "sjf_plus"

    def decide(self, view: ClusterView, cluster: Cluster, now: float) -> Sequence[Start | Preempt]:
        pairs = sorted(
            ((j, k) for j in cluster.jobs for k in j.estimates),
            key=lambda p: (p[0].estimates[p[1]], _fcfs(p[0]), cluster.kinds.index(p[1])),
        )
        return _start_in_order(cluster, pairs, lambda job, kind: "sjf+")


class JsqPlusArgs(PolicyArgs):
    """`join_busy`: false (default) lets a job pick only among machines free now, which is what the paper's
    Fig. 4a shows (Jobs 3 and 4 "have no choices but to pick CPUs": 100 min); true applies the text's rule
    literally, waiting time + processing time over all machines (60 min on that example)."""

    join_busy: bool = False


class JsqPlus(_OnMachines[JsqPlusArgs]):
    """JSQ+: each job in arrival order takes the machine where it would finish first; short-sighted."""

    name: ClassVar[str] = "jsq_plus"

    def decide(self, view: ClusterView, cluster: Cluster, now: float) -> Sequence[Start | Preempt]:
        ready = [m.ready_s if not m.idle else 0.0 for m in cluster.machines]
        actions: list[Start] = []
        for job in sorted(cluster.jobs, key=_fcfs):
            options = [
                (ready[i] + job.estimates[m.kind], not m.idle, cluster.kinds.index(m.kind), i)
                for i, m in enumerate(cluster.machines)
                if m.kind in job.estimates and (m.idle or self.args.join_busy)
            ]
            if not options:
                continue
            finish, busy, _, i = min(options)
            if busy:
                ready[i] = finish  # it queues there: later jobs see the longer wait
                continue
            start = cluster.start(i, job, cluster.machines[i].kind, f"jsq+: finishes first here ({finish:.0f}s)")
            if start is not None:
                ready[i] = finish
                actions.append(start)
        return actions


register("es", EqualShareArgs)(EqualShare)
register("drff", DrffArgs)(Drff)
register("drfs", DrfsArgs)(Drfs)
register("drfa", DrfaArgs)(Drfa)
register("srpt", SrptArgs)(Srpt)
register("sjf", SjfArgs)(Sjf)
register("sjf_plus", SjfPlusArgs)(SjfPlus)
register("jsq_plus", JsqPlusArgs)(JsqPlus)
