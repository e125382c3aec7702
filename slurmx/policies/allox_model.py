"""AlloX's machine model, fairness and profiling samples: what AlloX, AlloX+ (`allox`), their books
(`allox_books`) and the baselines (`allox_baselines`, `allox_queue_order`) all read.

`read_cluster(view, now)` turns a view into *machines* (every unit of a GRES kind, every whole node of a kind
without GRES) and waiting jobs with their estimates; the fairness functions give a running job its value and a
user her progress; `matching_instance` is the paper's matching over them; `start_samples` runs the authors'
simulator's profiling samples first (`SamplesArgs`). Apart from `allox`, so that the modules built on AlloX's
policies (`allox_books`) can use it without importing the policies back.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from slurmx.core.actions import Note, Start
from slurmx.core.model import ClusterView, Group, JobClass, Variant, VariantState
from slurmx.core.resources import Resources
from slurmx.policies.base import PolicyArgs
from slurmx.policies.matching import Instance

__all__ = [
    "Cluster",
    "Job",
    "Machine",
    "SampleSort",
    "SamplesArgs",
    "SamplesOrder",
    "dominant_share",
    "favoured",
    "job_value",
    "job_value_on",
    "known",
    "matching_instance",
    "read_cluster",
    "select_users",
    "start_samples",
    "user_progress",
]

_STARTABLE = frozenset({VariantState.PENDING, VariantState.HELD, VariantState.REQUEUED})


@dataclass(frozen=True, slots=True)
class Machine:
    """One GPU (unit `unit` of the kind's GRES on `node`) or one whole node; `ready_s` >= 0 seconds from now
    until it is free, `idle` when it is free now and can take a job."""

    kind: str
    node: str
    unit: int
    ready_s: float
    idle: bool


@dataclass(frozen=True, slots=True)
class Job:
    """A waiting group as the policies see it: estimated seconds on each kind it can start on here."""

    group: Group
    estimates: Mapping[str, float]

    @property
    def user(self) -> str:
        return self.group.user

    def variant(self, kind: str) -> Variant:
        found = self.group.variant(kind)
        assert found is not None
        return found


@dataclass
class Cluster:
    """The machines of a view and the state a decision mutates as it starts jobs (free resources per node).

    `kinds` are the site's kinds that have machines, accelerators (GRES kinds) first, then site order: the
    order ties are broken in (the paper gives ties to the GPU).
    """

    kinds: tuple[str, ...]
    machines: list[Machine]
    unit_gres: dict[str, str | None]
    capacity: dict[str, int]  # machines per kind, busy or idle
    total_mem: int
    free: dict[str, Resources]
    jobs: list[Job] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    samples: list[tuple[str, str]] = field(default_factory=list)  # (user, kind) of the samples started now
    # kind -> nodes where every running job of the kind is a profiling sample (JobClass.TE)
    sample_nodes: dict[str, frozenset[str]] = field(default_factory=dict)
    scheduler_runs: bool = True  # False when the samples' turn found every kind full (`start_samples`)

    def idle(self, kind: str | None = None) -> list[int]:
        return [i for i, m in enumerate(self.machines) if m.idle and (kind is None or m.kind == kind)]

    def start(self, i: int, job: Job, kind: str, reason: str) -> Start | None:
        """Occupy machine i with `job` on `kind` if its node still has room; None (and a note) if not."""
        machine = self.machines[i]
        request = job.variant(kind).request
        if not request.fits_in(self.free[machine.node]):
            self.notes.append(Note(f"{kind} request does not fit on {machine.node} now", job.group.group_id))
            self.machines[i] = Machine(machine.kind, machine.node, machine.unit, machine.ready_s, False)
            return None
        self.free[machine.node] = self.free[machine.node] - request
        self.machines[i] = Machine(machine.kind, machine.node, machine.unit, job.estimates[kind], False)
        if job in self.jobs:
            self.jobs.remove(job)
        return Start(job.group.group_id, kind, (machine.node,), request, reason=reason)


def _unit_gres(view: ClusterView, kind: str) -> str | None:
    """The GRES a kind is counted in (its variants' first requested GRES); None counts whole nodes."""
    for group in view.groups.values():
        variant = group.variant(kind)
        if variant is not None and variant.request.gres:
            return next(iter(variant.request.gres))
    return None


def _remaining(variant: Variant, now: float) -> float:
    """Seconds until a running variant is expected to end; an overdue or unestimated one is due now."""
    if variant.start_time is None or variant.estimate_s is None or not known(variant.estimate_s):
        return 0.0
    return max(0.0, variant.start_time + variant.estimate_s - now)


def _fits(free: Resources, request: Resources) -> int:
    """How many copies of `request` fit in `free`."""
    dims = [(free.cpus, request.cpus), (free.mem_mb, request.mem_mb)]
    dims += [(free.gres.get(name, 0), count) for name, count in request.gres.items()]
    counts = [have // need for have, need in dims if need > 0]
    return min(counts) if counts else 1


def read_cluster(view: ClusterView, now: float, need_estimates: bool = True) -> Cluster:
    """Machines and waiting jobs of a view (pure). A node serves the first kind (site order) listing it;
    units or nodes held by work slurmx does not know about are left out (their end is unknown). Without
    `need_estimates`, a variant with no estimate counts as taking forever (for policies that need none)."""
    running: dict[str, list[Variant]] = {}
    sampled: dict[tuple[str, str], set[bool]] = {}  # (kind, node) -> whether each job running there is a sample
    for group in view.running_groups():
        variant = group.running_variant()
        if variant is not None:
            for name in variant.nodes:
                running.setdefault(name, []).append(variant)
                sampled.setdefault((variant.kind, name), set()).add(group.job_class is JobClass.TE)
    pending = view.pending_groups()
    site = list(view.kinds)
    unit_gres = {kind: _unit_gres(view, kind) for kind in site}
    order = sorted(site, key=lambda k: (unit_gres[k] is None, site.index(k)))
    machines: list[Machine] = []
    capacity: dict[str, int] = {}
    seen: set[str] = set()
    for kind in site:
        gres = unit_gres[kind]
        requests = [v.request for g in pending if (v := g.variant(kind)) is not None]
        smallest = _smallest(requests)
        for node in view.nodes_of_kind(kind):
            if node.name in seen or not node.is_usable:
                continue
            seen.add(node.name)
            mine = [v for v in running.get(node.name, []) if v.kind == kind]
            if gres is not None:  # one machine per unit: busy ones per known job, then the free ones that fit
                busy = sorted(_remaining(v, now) for v in mine for _ in range(max(1, v.request.gres_count(gres))))
                free_units = node.free.gres_count(gres)
                if smallest is not None:
                    free_units = min(free_units, _fits(node.free, smallest))
                units = [(r, False) for r in busy] + [(0.0, True)] * free_units
                capacity[kind] = capacity.get(kind, 0) + node.capacity.gres_count(gres)
            else:
                capacity[kind] = capacity.get(kind, 0) + 1
                if mine:
                    units = [(max(_remaining(v, now) for v in mine), False)]
                elif not running.get(node.name) and node.allocated.cpus == 0 and (
                    smallest is None or smallest.fits_in(node.free)
                ):
                    units = [(0.0, True)]
                else:
                    units = []
            machines += [Machine(kind, node.name, u, r, idle) for u, (r, idle) in enumerate(units)]
    kinds = tuple(k for k in order if any(m.kind == k for m in machines))
    machines.sort(key=lambda m: (kinds.index(m.kind) if m.kind in kinds else 0, not m.idle, m.node, m.unit))
    total_mem = sum(view.nodes[n].capacity.mem_mb for n in seen)
    free = {name: node.free for name, node in view.nodes.items()}
    cluster = Cluster(kinds, machines, unit_gres, capacity, total_mem, free)
    cluster.jobs = _waiting_jobs(pending, cluster, need_estimates)
    cluster.sample_nodes = _sample_nodes(sampled)
    return cluster


def _sample_nodes(sampled: dict[tuple[str, str], set[bool]]) -> dict[str, frozenset[str]]:
    """Per kind, the nodes whose running jobs of that kind are all profiling samples (JobClass.TE)."""
    out: dict[str, set[str]] = {}
    for (kind, name), sample in sampled.items():
        if sample == {True}:
            out.setdefault(kind, set()).add(name)
    return {kind: frozenset(names) for kind, names in out.items()}


def _smallest(requests: Sequence[Resources]) -> Resources | None:
    if not requests:
        return None
    names = set.intersection(*(set(r.gres) for r in requests))
    return Resources(
        min(r.cpus for r in requests),
        min(r.mem_mb for r in requests),
        {n: min(r.gres_count(n) for r in requests) for n in names},
    )


def known(estimate: float | None) -> bool:
    """An estimate a policy can use: present and finite (a failed profile must not read as zero)."""
    return estimate is not None and math.isfinite(estimate)


def _waiting_jobs(pending: Iterable[Group], cluster: Cluster, need_estimates: bool) -> list[Job]:
    jobs = []
    for group in pending:
        estimates: dict[str, float] = {}
        for variant in group.variants:
            gres = cluster.unit_gres.get(variant.kind)
            if (
                variant.kind in cluster.kinds
                and variant.state in _STARTABLE
                and (known(variant.estimate_s) or not need_estimates)
                and (gres is None or variant.request.gres_count(gres) == 1)
            ):
                est = variant.estimate_s
                estimates[variant.kind] = max(0.0, est) if est is not None and known(est) else math.inf
        if estimates:
            jobs.append(Job(group, estimates))
        else:
            cluster.notes.append(Note("no startable variant with an estimate on a kind with machines", group.group_id))
    return jobs


# ---------------------------------------------------------------------------------------------- fairness


def dominant_share(request: Resources, kind: str, cluster: Cluster) -> float:
    """max(machines taken / machines of the kind, memory / cluster memory): the paper's d_i with a machine
    counted as one GPU or one whole node (the paper's GPU case prints m_c; m_g is meant, erratum 3)."""
    gres = cluster.unit_gres.get(kind)
    units = request.gres_count(gres) if gres is not None else 1
    share = units / cluster.capacity[kind] if cluster.capacity.get(kind) else 0.0
    return max(share, request.mem_mb / cluster.total_mem if cluster.total_mem else 0.0)


def job_value(share_on_favoured: float, favoured_s: float, actual_s: float) -> float:
    """Value of a running job: its dominant share on the favoured kind, times favoured time / actual time,
    so value x runtime is the same on every kind ("progress is her instantaneous throughput", §3.3.2)."""
    if actual_s <= 0 or not math.isfinite(actual_s):
        return share_on_favoured
    return share_on_favoured * min(1.0, favoured_s / actual_s)


def favoured(estimates: Mapping[str, float], kinds: Sequence[str]) -> str:
    """The kind with the smallest estimate; ties go to the earlier kind in `kinds` (accelerators first)."""
    return min(estimates, key=lambda k: (estimates[k], kinds.index(k) if k in kinds else len(kinds)))


def user_progress(view: ClusterView, cluster: Cluster | None = None, samples: bool = True) -> dict[str, float]:
    """Each user's progress: the sum of her running jobs' values (pure; users with nothing running get 0
    if they wait). Derived from the view each time, so no event can be missed. Estimates stand in for
    the true times the paper's simulator used. Without `samples`, profiling samples (`samples_first`'s
    JobClass.TE groups) count for nothing, as in the authors' simulator, whose samples leave progress alone."""
    cluster = cluster if cluster is not None else read_cluster(view, view.now)
    progress = {job.user: 0.0 for job in cluster.jobs}
    for group in view.running_groups():
        running = group.running_variant()
        if running is None or running.kind not in cluster.capacity or (
                not samples and group.job_class is JobClass.TE):
            continue
        estimates = {
            v.kind: float(v.estimate_s)
            for v in group.variants
            if v.estimate_s is not None and v.kind in cluster.capacity
        }
        value = dominant_share(running.request, running.kind, cluster)
        if running.kind in estimates:
            fav = favoured(estimates, cluster.kinds)
            fav_variant = group.variant(fav)
            assert fav_variant is not None
            share = dominant_share(fav_variant.request, fav, cluster)
            value = job_value(share, estimates[fav], estimates[running.kind])
        progress[group.user] = progress.get(group.user, 0.0) + value
    return progress


def select_users(jobs: Sequence[Job], progress: Mapping[str, float], alpha: float, population: int,
                 ties: Literal["earliest_waiting", "by_name"] = "earliest_waiting") -> set[str]:
    """The max(1, ceil(α · population)) waiting users with the lowest progress (ties: the user waiting
    longest, then name; or by name alone). α = 0 means strict fairness: one user (the paper's ⌈0·n⌉ = 0 is
    read that way)."""
    first: dict[str, float] = {}
    for job in jobs:
        first[job.user] = 0.0 if ties == "by_name" else min(first.get(job.user, math.inf), job.group.submit_time)
    ranked = sorted(first, key=lambda u: (progress.get(u, 0.0), first[u], u))
    count = max(1, math.ceil(alpha * population - 1e-9))
    return set(ranked[:count])


def _cap_jobs(jobs: list[Job], n_max: int | None, kinds: Sequence[str]) -> list[Job]:
    """At most n_max jobs: the next shortest on each kind in turn (C-sim's jobSubSet, any number of kinds)."""
    if n_max is None or len(jobs) <= n_max:
        return jobs
    queues = [sorted((j for j in jobs if k in j.estimates), key=lambda j: (j.estimates[k], j.group.submit_time))
              for k in kinds]
    chosen: dict[str, Job] = {}
    cursor = [0] * len(queues)
    while len(chosen) < n_max and any(c < len(q) for c, q in zip(cursor, queues, strict=True)):
        for q, queue in enumerate(queues):
            while cursor[q] < len(queue) and queue[cursor[q]].group.group_id in chosen:
                cursor[q] += 1
            if cursor[q] < len(queue) and len(chosen) < n_max:
                chosen[queue[cursor[q]].group.group_id] = queue[cursor[q]]
    return [j for j in jobs if j.group.group_id in chosen]


_MAX_TIME = 2.0**40  # the largest time handed to the matching: position x time stays far from overflowing


def matching_instance(cluster: Cluster, jobs: Sequence[Job], now: float) -> Instance:
    """The matching over `jobs` and the cluster's machines, times measured from now (pure).

    Estimates are the users' numbers, and any finite one is valid (1e300 s included): when the largest time
    exceeds 2^40 s, every time is divided by one power of two (exact; the optimal matching is the same for
    costs scaled alike), so `position x time` and the sums of the path search stay finite."""
    index = {k: t for t, k in enumerate(cluster.kinds)}
    proc = np.full((len(jobs), len(cluster.kinds)), np.inf)
    for j, job in enumerate(jobs):
        for kind, est in job.estimates.items():
            proc[j, index[kind]] = est
    arrival = np.array([job.group.submit_time - now for job in jobs], dtype=np.float64)
    types = np.array([index[m.kind] for m in cluster.machines], dtype=np.int64)
    avail = np.array([m.ready_s for m in cluster.machines], dtype=np.float64)
    times = np.abs(np.concatenate([proc.ravel(), arrival, avail]))
    top = float(times[np.isfinite(times)].max(initial=0.0))
    if top > _MAX_TIME:
        scale = float(2.0 ** np.ceil(np.log2(top / _MAX_TIME)))
        proc, arrival, avail = proc / scale, arrival / scale, avail / scale
    return Instance(proc, arrival, types, avail)


# ---------------------------------------------------------------------------------------------- samples


SamplesOrder = Literal["arrival", "base_kind", "fastest", "accelerator"]  # `SamplesArgs.samples_order`


class SamplesArgs(PolicyArgs):
    """`samples_first`: profiling samples as the AlloX authors' simulator runs them (off by default: an
    artifact of their code, not the paper's design; docs/policies/allox.md). With it, every trial-and-error
    group (`JobClass.TE`) is taken for a sample, so it is meant for the reproduction's workloads, not a site's
    TE jobs: a sample starts before anything the policy's own rule starts, round robin over users (by name),
    on an idle machine of its first variant's kind, and counts against its owner's share while it runs.

    `samples_order` (with `samples_first`; "arrival" by default): the order of a user's samples in that
    round robin. Their schedulers sort each user's queue in place, samples among the jobs, and the samples'
    turn reads it: "base_kind" (their ES: base-kind time, then accelerator time), "fastest" (their DRFS:
    shortest time on any kind), "accelerator" (their DRFA: accelerator time); see `_sorted_order`."""

    samples_first: bool = False
    samples_order: SamplesOrder = "arrival"


@dataclass(frozen=True, slots=True)
class SampleSort:
    """A baseline's memo with `samples_order`: when their scheduler last ran, i.e. last sorted the queues."""

    last_sort: float


def _sorted_order(cluster: Cluster, samples: Sequence[Job], now: float, order: SamplesOrder,
                  last_sort: float | None = None) -> Callable[[Job], tuple[float, ...]]:
    """A user's waiting samples in the order the authors' scheduler leaves her queue (`samples_order`): at
    every decision where the samples' turn left some kind with room, it sorts the queue in place ("base_kind":
    ES, by accelerator time, then stably by base-kind time; "fastest": DRFS, by the shortest time on any kind;
    "accelerator": DRFA, by accelerator time), so a sample that arrived before now sits in that order (ties by
    arrival), and one arriving now behind all those, in arrival order. While samples that arrived before now
    wait for every kind (their turn filled every kind, so their scheduler did not run and did not sort), all
    go in arrival order: a pure policy cannot tell when the last sort ran; this rule guesses that such a
    backlog means none did since they arrived (docs/policies/allox.md: where it guesses wrong). With `last_sort`
    (the time their scheduler last ran, which the baselines keep in their memo, `SampleSort`), no guess: the
    samples that arrived by then sit in sorted order, later ones behind in arrival order."""
    base = [k for k in cluster.kinds if cluster.unit_gres.get(k) is None]
    accelerators = [k for k in cluster.kinds if k not in base]

    def length(job: Job) -> tuple[float, ...]:
        if order == "fastest":
            return (min(job.estimates.values()),)
        kinds = accelerators if order == "accelerator" else [*base, *accelerators]
        return tuple(job.estimates.get(k, math.inf) for k in kinds)

    width = len(length(samples[0]))
    backlog = last_sort is None and \
        {next(iter(j.estimates)) for j in samples if j.group.submit_time < now} >= set(cluster.kinds)

    def behind(job: Job) -> bool:  # arrived after the last sort
        return job.group.submit_time >= now if last_sort is None else job.group.submit_time > last_sort

    def key(job: Job) -> tuple[float, ...]:
        if backlog or order == "arrival":
            return (0.0, *(0.0,) * width, job.group.submit_time)
        if behind(job):
            return (1.0, *(0.0,) * width, job.group.submit_time)
        return (0.0, *length(job), job.group.submit_time)
    return key


def start_samples(cluster: Cluster, keep_waiting: bool = False, now: float = 0.0,
                  order: SamplesOrder = "arrival", last_sort: float | None = None,
                  rank: Mapping[str, int] | None = None) -> list[Start]:
    """Start the waiting samples (`SamplesArgs.samples_first`) in the authors' simulator's order: users by name
    in turn, round r taking the r-th of the user's samples still waiting (a user's samples by arrival, then
    id; a started one leaves her list, so a round skips ahead), until a round past the longest list; a kind
    takes no more samples once one of them found no idle machine. With an `order` other than arrival, a
    user's samples go in the order their scheduler's in-place sort leaves them (`_sorted_order`). Every sample leaves
    `cluster.jobs`: no policy's own rule starts one. `cluster.scheduler_runs` says whether their scheduler runs
    after this turn (not when every kind refused a sample), i.e. whether it sorts the queues now. `rank` (a
    group's place in its owner's queue, kept by the caller: `allox_queue_order`) replaces `order`."""
    samples = [j for j in cluster.jobs if j.group.job_class is JobClass.TE]
    if not samples:
        return []
    others = [j for j in cluster.jobs if j.group.job_class is not JobClass.TE]
    cluster.jobs = others
    waiting: dict[str, list[Job]] = {}
    key = _sorted_order(cluster, samples, now, order, last_sort) if rank is None else \
        (lambda j: (float(rank.get(j.group.group_id, len(rank))), j.group.submit_time))
    for job in sorted(samples, key=lambda j: (*key(j), j.group.group_id)):
        waiting.setdefault(job.user, []).append(job)
    users = sorted(waiting)
    longest = max(len(q) for q in waiting.values())
    full: set[str] = set()
    actions: list[Start] = []
    for r in range(longest + 1):
        for user in users:
            mine = waiting[user]
            if r >= len(mine):
                continue
            job = mine[r]
            kind = next(iter(job.estimates))
            if kind in full:
                continue
            idle = cluster.idle(kind)
            start = cluster.start(idle[0], job, kind, "profiling sample first") if idle else None
            if start is None:
                full.add(kind)
                continue
            mine.pop(r)
            actions.append(start)
            cluster.samples.append((user, kind))
        if len(full) == len(cluster.kinds):
            cluster.scheduler_runs = False
            break
    if keep_waiting:
        cluster.jobs = [*(j for user in users for j in waiting[user]), *others]
    return actions


def job_value_on(job: Job, kind: str, cluster: Cluster) -> float:
    """A waiting job's value were it to run on `kind` (`job_value` with its estimates)."""
    fav = favoured(job.estimates, cluster.kinds)
    share = dominant_share(job.variant(fav).request, fav, cluster)
    return job_value(share, job.estimates[fav], job.estimates[kind])
