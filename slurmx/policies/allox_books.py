"""AlloX keeping its books as the authors' simulator does (`AlloxArgs.books`, off by default: an artifact of their
code, not the paper's design; docs/policies/allox.md, "Their AlloX's books").

Their AlloX numbers its machines (the accelerators first, then the CPU nodes) and keeps three things from one
decision to the next; this module keeps them in the policy's memo (`Plan.memo` -> `ClusterView.memo`, `Books`):

- *bookings*: a machine that starts a job stays booked, until that job ends, to the time every job the solve planned
  on it would have ended (not the started job's end); the matching reads it as the machine's ω;
- *progress*: each user's progress is a running sum, the job's value added when it starts and taken off when it
  ends (floating-point sums in that order, so equal progress is equal as theirs is);
- the machine *numbers* a job holds, which decide where the next plans go: profiling samples hold no number of
  their own, they make the lowest free numbers of their kind unavailable, and the matching's ties between equal
  machines go to the lowest numbers (their assignment solver's habit), so a job is often planned on a number a
  sample holds and waits.

Within a decision it follows their loop: users in name order, re-sorted stably by progress before every solve (ties
keep the order of the previous solve), the ⌈α·n⌉ first (n: the users waiting when the decision began); at most
`n_max` of their jobs, the next shortest on each kind in turn, in the order a Java `HashSet` of their numeric ids
iterates (the matching's columns; a tie within a level goes to the earlier column); one start per solve, on the
highest free number with a plan; α doubles while nothing starts. Built from an empty memo, the bookings are each
running job's start + estimate and the numbers the lowest free ones: a lost memo (a daemon restart) costs accuracy
for the jobs running then, not correctness.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from slurmx.core.actions import Note, Plan, Start
from slurmx.core.model import ClusterView, Group, JobClass
from slurmx.policies.allox_model import (
    Cluster,
    Job,
    Machine,
    dominant_share,
    favoured,
    job_value,
    job_value_on,
    matching_instance,
    read_cluster,
    start_samples,
)
from slurmx.policies.matching import Instance, solve

__all__ = ["Booking", "Books", "BooksArgs", "hash_set_order", "schedule_with_books"]

_DIGITS = re.compile(r"(\d+)$")


class BooksArgs(Protocol):
    """What the books read of `AlloxArgs` (named here so that this module does not import the policy's)."""

    @property
    def alpha(self) -> float: ...
    @property
    def n_max(self) -> int | None: ...
    @property
    def widen_alpha(self) -> bool: ...
    @property
    def samples_first(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Booking:
    """A running job's machine number (of its kind) and the time (s, absolute) its machine is booked until."""

    kind: str
    number: int
    until: float
    user: str
    value: float  # what its start added to the user's progress, taken off when it ends


@dataclass(frozen=True, slots=True)
class Books:
    """The memo: bookings of the running jobs AlloX started, and each user's progress as a running sum."""

    booked: Mapping[str, Booking]
    progress: Mapping[str, float]


def hash_set_order(ids: Sequence[int]) -> list[int]:
    """The order a Java `HashSet<Integer>` iterates `ids` (distinct, inserted in this order): by bucket (the id's
    low bits over the final table size, 16 doubled while more than 3/4 full), then insertion order within a bucket
    (a resize keeps it). Ids are below 2^16 in any input this is used on, so the hash's high-bit spread is moot."""
    size = 16
    while len(ids) > size * 3 // 4:
        size *= 2
    rank = {i: n for n, i in enumerate(ids)}
    return sorted(ids, key=lambda i: ((i ^ (i >> 16)) & (size - 1), rank[i]))


def _number(group_id: str) -> int | None:
    found = _DIGITS.search(group_id)
    return int(found.group(1)) if found else None


def _subset(jobs: list[Job], n_max: int | None, kinds: Sequence[str]) -> list[Job]:
    """Their matching's columns: the next shortest job on each kind in turn (each kind's order a stable sort of
    the previous kind's), adding one per kind before checking the cap (so the cap may be passed by one), in the
    order their HashSet of ids iterates (jobs whose id has no digits keep the order they were taken in)."""
    orders: list[list[Job]] = []
    previous = jobs
    for kind in kinds:
        previous = sorted(previous, key=lambda j, k=kind: j.estimates.get(k, math.inf))  # type: ignore[misc]
        orders.append(previous)
    chosen: dict[str, Job] = {}
    cursor = [0] * len(orders)
    limit = n_max if n_max is not None else len(jobs)
    while any(c < len(jobs) for c in cursor):
        for q, order in enumerate(orders):
            if cursor[q] < len(order):
                chosen.setdefault(order[cursor[q]].group.group_id, order[cursor[q]])
                cursor[q] += 1
        if len(chosen) >= limit:
            break
    taken = list(chosen.values())
    numbers = [_number(j.group.group_id) for j in taken]
    if any(n is None for n in numbers) or len(set(numbers)) != len(numbers):
        return taken
    by_number = {n: j for n, j in zip(numbers, taken, strict=True)}
    return [by_number[n] for n in hash_set_order([n for n in numbers if n is not None])]


class _Machines:
    """The numbered machines of one decision: kind and ω (s from now) per number; numbers held by samples."""

    def __init__(self, cluster: Cluster, view: ClusterView, books: Books, now: float) -> None:
        self.kinds = cluster.kinds
        self.kind: list[str] = []
        for kind in cluster.kinds:
            self.kind += [kind] * cluster.capacity[kind]
        self.omega = [0.0] * len(self.kind)
        self.booked: dict[str, Booking] = {}
        taken: set[int] = set()
        running = [g for g in view.running_groups() if g.job_class is not JobClass.TE]
        unbooked: list[Group] = []
        for group in running:
            booking = books.booked.get(group.group_id)
            variant = group.running_variant()
            if variant is None or variant.kind not in cluster.capacity:
                continue
            if booking is None or booking.kind != variant.kind or booking.number in taken:
                unbooked.append(group)
                continue
            self.booked[group.group_id] = booking
            taken.add(booking.number)
        for group in unbooked:  # no memo for it (the first decision after a restart): the lowest free number
            variant = group.running_variant()
            assert variant is not None
            number = next((n for n in self._numbers(variant.kind) if n not in taken), None)
            if number is None:
                continue
            start = variant.start_time if variant.start_time is not None else now
            est = variant.estimate_s if variant.estimate_s is not None and math.isfinite(variant.estimate_s) else 0.0
            self.booked[group.group_id] = Booking(variant.kind, number, start + est, group.user,
                                                  _running_value(group, cluster))
            taken.add(number)
        for booking in self.booked.values():
            self.omega[booking.number] = max(0.0, booking.until - now)
        samples: dict[str, int] = {}
        for group in view.running_groups():
            variant = group.running_variant()
            if group.job_class is JobClass.TE and variant is not None:
                samples[variant.kind] = samples.get(variant.kind, 0) + 1
        for _, kind in cluster.samples:  # started by this decision, before the matching
            samples[kind] = samples.get(kind, 0) + 1
        self.free: list[int] = []
        for kind in cluster.kinds:
            free = [n for n in self._numbers(kind) if n not in taken]
            self.free += free[samples.get(kind, 0):]  # samples make the lowest free numbers unavailable

    def _numbers(self, kind: str) -> Iterable[int]:
        return (n for n, k in enumerate(self.kind) if k == kind)

    def instance(self, cluster: Cluster, jobs: Sequence[Job], now: float) -> Instance:
        """The matching over `jobs` and every numbered machine (free and sample-held ones free now)."""
        numbered = [Machine(kind, "", n, omega, False) for n, (kind, omega) in enumerate(zip(self.kind, self.omega,
                                                                                               strict=True))]
        return matching_instance(replace(cluster, machines=numbered), jobs, now)


def _running_value(group: Group, cluster: Cluster) -> float:
    """A running job's value as AlloX's progress counts it (`allox.user_progress`), for jobs the memo lacks."""
    running = group.running_variant()
    assert running is not None
    estimates = {v.kind: float(v.estimate_s) for v in group.variants
                 if v.estimate_s is not None and math.isfinite(v.estimate_s) and v.kind in cluster.capacity}
    if running.kind not in estimates:
        return dominant_share(running.request, running.kind, cluster)
    fav = favoured(estimates, cluster.kinds)
    fav_variant = group.variant(fav)
    assert fav_variant is not None
    return job_value(dominant_share(fav_variant.request, fav, cluster), estimates[fav], estimates[running.kind])


def _plans(machines: _Machines, cluster: Cluster, jobs: list[Job], now: float) -> dict[int, list[Job]]:
    """Each number's planned jobs, first to run first; within a level (kind, position) the earlier column takes
    the lower (ω, number) machine, as their solver's ties fall."""
    solution = solve(machines.instance(cluster, jobs, now), certify=False)
    levels: dict[tuple[int, int], list[int]] = {}
    for j in range(len(jobs)):
        m = int(solution.machine[j])
        levels.setdefault((machines.kinds.index(machines.kind[m]), int(solution.position[j])), []).append(j)
    queues: dict[int, list[tuple[int, Job]]] = {}
    for (_, position), members in levels.items():
        seats = sorted((int(solution.machine[j]) for j in members), key=lambda m: (machines.omega[m], m))
        for seat, j in zip(seats, sorted(members), strict=True):
            queues.setdefault(seat, []).append((position, jobs[j]))
    return {m: [job for _, job in sorted(q, key=lambda pj: -pj[0])] for m, q in queues.items()}


def _books_of(view: ClusterView) -> Books:
    memo = view.memo
    return memo if isinstance(memo, Books) else Books({}, {})


def _progress(books: Books, view: ClusterView) -> dict[str, float]:
    """The users' running sums, less the values of the jobs that ended since the last decision (in id order)."""
    progress = dict(books.progress)
    running = {g.group_id for g in view.running_groups()}
    for gid in sorted(books.booked):
        if gid not in running:
            booking = books.booked[gid]
            progress[booking.user] = progress.get(booking.user, 0.0) - booking.value
    return progress


def schedule_with_books(args: BooksArgs, view: ClusterView, now: float) -> Plan:
    """One decision of AlloX with their books (module docstring); the plan carries the updated books."""
    books = _books_of(view)
    cluster = read_cluster(view, now)
    actions: list[Start] = start_samples(cluster) if args.samples_first else []
    machines = _Machines(cluster, view, books, now)
    booked = dict(machines.booked)
    progress = _progress(books, view)
    for gid, booking in booked.items():  # running jobs the memo did not know (an empty memo): counted now
        if gid not in books.booked:
            progress[booking.user] = progress.get(booking.user, 0.0) + booking.value
    order = sorted({j.user for j in cluster.jobs})
    population = len(order)
    alpha = args.alpha
    while cluster.jobs and cluster.idle() and machines.free:
        order.sort(key=lambda u: progress.get(u, 0.0))
        chosen = order[:max(1, min(population, math.ceil(alpha * population)))]
        mine: dict[str, list[Job]] = {}
        for j in cluster.jobs:
            mine.setdefault(j.user, []).append(j)
        jobs = _subset([j for u in chosen for j in mine.get(u, ())], args.n_max, cluster.kinds)
        plans = _plans(machines, cluster, jobs, now) if jobs else {}
        number = next((n for n in sorted(machines.free, reverse=True) if plans.get(n)), None)
        if number is None:
            if alpha > 1.0 or not args.widen_alpha:
                break
            alpha *= 2.0
            continue
        kind = machines.kind[number]
        job = plans[number][0]
        start = next((s for i in cluster.idle(kind) if (s := cluster.start(
            i, job, kind, f"allox: first of {len(plans[number])} planned on {kind} machine {number}, α={alpha:g}"))),
            None)
        machines.free.remove(number)
        if start is None:
            continue
        actions.append(start)
        until = now + sum(p.estimates[kind] for p in plans[number])
        machines.omega[number] = until - now
        value = job_value_on(job, kind, cluster)
        progress[job.user] = progress.get(job.user, 0.0) + value
        booked[job.group.group_id] = Booking(kind, number, until, job.user, value)
    waiting = len(cluster.jobs)
    notes = (*cluster.notes, *((Note(f"{waiting} jobs wait (their books)", kind="allox"),) if waiting else ()))
    return Plan(tuple(actions), notes, Books(booked, progress))
