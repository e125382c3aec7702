"""The lease: slurmxd holds a managed variant with a begin time it keeps moving, never with a hold that outlives it.

`slurmx submit` in managed mode submits every variant with `--begin=now+<daemon.lease>` and `l=<lease>` in its
tag. While slurmxd lives it renews each waiting variant's begin time (one `scontrol update JobId=a,b,... StartTime=`
per cycle, only for leases in their second half), so Slurm never starts a variant the policy did not choose;
"hold" is a push of the begin time to now + lease, "release" a begin time of now. If slurmxd stops, crashes or
loses its host, nothing renews: the leases run out and Slurm starts the variants by itself, and the job-side guard
every managed variant carries (`templates/_base.sh.j2`) lets exactly one of each group do the work. With the
`job_submit.lua` in `site-config/`, only slurmxd (root, SlurmUser or an operator) may move a leased variant's begin
time, hold, priority or comment: the lease runs out by itself, but only the daemon may move it.

To the policy and the enforcer a leased variant that waits looks exactly like a held one (`VariantState.HELD`),
so the cycle is the same with and without leases; jobs without `l=` (groups queued before leases) keep real holds.

A group submitted with the user's own `--begin` carries that time in its tag (`b=`, `core/tag.py`): the begin time
Slurm shows is the lease's and cannot tell the two apart. Every begin time this adapter sets (a renewal, a hold, a
release, a requeue) is at the user's time or later (`begin_after`), so neither slurmxd nor Slurm after a lease
starts it earlier; until then the group stays out of the policy's view (`observe.py`).

An array's tasks (`core/arrays.py`) are renewed per array, never task by task: the indices still in its pending
record share one begin time and are due together, and a renewal names them all (`A_[0-5,9]`, the adapter's
update), which Slurm applies to the record whole; naming only some would split each one off into a record of its
own (live, 24.11). Not `JobId=A`: that also moves the begin time of every task already split off, including the
ones slurmxd released and that wait only on the array's `%N`. An index group is settled by its own index alone:
index 3 running keeps index 3 of the other kinds from a renewal, not the array's other indices.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from operator import attrgetter

from slurmx.core.model import VariantState
from slurmx.core.tag import begin_floor_of
from slurmx.slurm import SlurmError
from slurmx.slurm.adapter import JobUpdate
from slurmx.slurm.records import SlurmJob
from slurmx.slurm.wrappers import CountingSlurm

__all__ = ["LeasedSlurm", "begin_after", "is_leased", "lease_renewals"]

_OCCUPYING = (VariantState.RUNNING, VariantState.COMPLETING, VariantState.SUSPENDED)
# A variant in one of these settles its group (it runs or ran): its waiting siblings are not renewed. Tuples, not
# sets: `in` on a few enum members tests identity first, where a set would hash each through Python code.
_SETTLING = tuple(s for s in VariantState if s in _OCCUPYING or (s.is_finished and s is not VariantState.CANCELLED))
_WAITING = (VariantState.PENDING, VariantState.HELD)
_FIELDS = attrgetter(*(f.name for f in fields(SlurmJob) if f.init))  # every field, in the constructor's order


def is_leased(job: SlurmJob) -> bool:
    """The job's tag says it was submitted under a lease (`l=`): `core.tag.leased`, from the tag read once."""
    if "l=" not in job.comment:
        return False
    tags = job.readable_group_tag()
    return tags is not None and tags.lease is not None


def begin_after(wait_s: float) -> str:
    """The `StartTime=` for a begin `wait_s` seconds from now: whole seconds rounded up, never earlier."""
    return "now" if wait_s <= 0 else f"now+{math.ceil(round(wait_s, 3))}"


def lease_renewals(jobs: Iterable[SlurmJob], now: float, lease_s: int, skip: Iterable[int] = ()) -> list[int]:
    """The leased variants whose begin time slurmxd must push to now + lease (pure, for tests and the backend).

    A waiting variant whose lease is in its second half, and one whose lease already ran out or was moved by
    someone else (slurmxd was down, a user's edit without the plugin) while its group has nothing running or done:
    the daemon takes it back. `skip`: jobs the daemon itself started (their begin time is now on purpose).
    """
    job_list = list(jobs)
    skipped = set(skip)
    # Groups with a variant that runs or ran: their waiting siblings are on their way out. An array task's group
    # is its index's (g, i), a plain job's (g, None).
    settled: set[tuple[str, int | None]] = set()
    waiting: list[tuple[SlurmJob, tuple[str, int | None] | None]] = []  # leased variants that may be due
    horizon = now + lease_s / 2
    for job in job_list:  # a plain loop over every job each cycle: the state decides first, the tag only then
        state = job.state
        if state in _SETTLING:
            tags = job.readable_group_tag()
            if tags is not None:
                settled.add((tags.group, job.array_task_id))
        elif state in _WAITING and "l=" in job.comment and job.job_id not in skipped and \
                (job.begin_time is None or job.begin_time <= horizon):
            tags = job.readable_group_tag()
            if tags is not None and tags.lease is not None:
                waiting.append((job, (tags.group, job.array_task_id)))
    due = [job for job, group in waiting if group not in settled]
    # An array's pending record is renewed whole: every index it holds, or Slurm splits the named ones off.
    records = {job.array_job_id for job in due if job.array_pending}
    if not records:
        return [job.job_id for job in due]
    named = [job.job_id for job in due]
    taken = set(named)
    return [*named, *(job.job_id for job in job_list if job.array_pending and job.array_job_id in records
                      and job.job_id not in taken and job.job_id not in skipped and "l=" in job.comment)]


@dataclass
class LeasedSlurm(CountingSlurm):
    """A counting adapter on which holding a leased variant moves its begin time instead of holding it.

    A requeued variant is never given a begin time before Slurm's own wait after a requeue is over (cred_expire + 1,
    or its node would refuse the relaunch): right after its own requeue the adapter reads the begin time Slurm set
    (`_ready_at`); `restart_delay_s` bounds what it infers for a variant Slurm requeued by itself.
    """

    lease_s: int = 600
    restart_delay_s: int = 121
    clock: Callable[[], float] = time.time
    _leased: set[int] = field(default_factory=set)  # leased job ids seen in the last read
    _slurm_held: set[int] = field(default_factory=set)  # of those, the ones Slurm really holds
    _ready_at: dict[int, float] = field(default_factory=dict)  # requeued job -> when Slurm lets it start again
    _released: set[int] = field(default_factory=set)  # leased jobs this daemon let go: not taken back by a renewal
    _not_before: dict[int, float] = field(default_factory=dict)  # leased job -> the user's --begin (`b=`)
    renewed: int = 0  # begin-time pushes sent, for the metrics

    def jobs(self, job_ids: Iterable[int] | None = None, user: str | None = None) -> list[SlurmJob]:
        jobs = super().jobs(job_ids, user)
        # An adapter that parses each answer anew (`CliSlurm.fresh_records`) hands over records no one else holds:
        # a waiting lease is marked on the record itself. Rebuilding 200,000 of them (`dataclasses.replace`) was
        # a third of a 100,000-group cycle. Others (the tests' fakes keep their records) get a marked copy.
        own = getattr(self.inner, "fresh_records", False) is True
        now = self.clock()
        if job_ids is None and user is None:
            self._leased.clear()
            self._slurm_held.clear()
            self._not_before.clear()
            self._ready_at = {j: t for j, t in self._ready_at.items() if t > now}
            if self._released:
                self._released &= {j.job_id for j in jobs if j.state in _WAITING}
        out = jobs if own else list(jobs)
        leased_ids, pending, held = self._leased, VariantState.PENDING, VariantState.HELD
        for i, job in enumerate(out):  # a plain loop over every job each cycle
            if "l=" not in job.comment:
                continue
            tags = job.readable_group_tag()  # the tag read once: trust and the view read the same (`group_tag`)
            if tags is None or tags.lease is None:
                continue  # not leased (`is_leased`)
            job_id = job.job_id
            leased_ids.add(job_id)
            if tags.begin is not None:
                floor = begin_floor_of(tags, job.submit_time)
                if floor is not None:
                    self._not_before[job_id] = floor
            if job.held:
                self._slurm_held.add(job_id)
            elif job.state is pending and job.begin_time is not None and job.begin_time > now:
                if job.restart_count and job.begin_time - now <= self.restart_delay_s:
                    # Requeued by Slurm itself (RequeueExit, a node failure): its restart delay still runs.
                    self._ready_at.setdefault(job_id, job.begin_time)
                if not own:
                    job = out[i] = SlurmJob(*_FIELDS(job))  # another's record: marked on a copy of ours
                job.state, job.held = held, True  # waits for the daemon: a hold
        return out

    def hold(self, job_ids: Iterable[int]) -> None:
        leased, other = self._split(job_ids)
        if other:
            super().hold(other)
        if leased:
            self._push(leased, self.clock())
            self._released -= set(leased)

    def release(self, job_ids: Iterable[int]) -> None:
        leased, other = self._split(job_ids)
        if other:
            super().release(other)
        if not leased:
            return
        now = self.clock()
        by_begin: dict[str, list[int]] = {}
        for job_id in leased:
            wait = max(self._ready_at.get(job_id, now), self._not_before.get(job_id, now)) - now
            by_begin.setdefault(f"now+{int(wait) + 1}" if wait > 0 else "now", []).append(job_id)
        for begin, ids in by_begin.items():
            super().update(ids, JobUpdate(begin=begin))
        self._released |= set(leased)
        really_held = [j for j in leased if j in self._slurm_held]
        if really_held:  # held by Slurm too (a requeue-hold of an older slurmxd, an admin): lift that as well
            super().release(really_held)

    def requeue(self, job_ids: Iterable[int], hold: bool = False) -> None:
        leased, other = self._split(job_ids)
        if other:
            super().requeue(other, hold)
        if not leased:
            return
        # Requeued without a hold, then leased at once: if this daemon dies between the two, the variant simply
        # runs again after Slurm's restart delay (fail-safe); a hold would keep it off forever.
        super().requeue(leased, False)
        now = self.clock()
        try:  # the begin time Slurm just set is when it lets each job start again
            ready = {j.job_id: j.begin_time for j in super().jobs(leased)}
        except SlurmError:
            ready = {}
        for job_id in leased:
            self._ready_at[job_id] = float(ready.get(job_id) or now + self.restart_delay_s)
        if hold:
            self._push(leased, now)
            self._released -= set(leased)

    def renew(self, jobs: Iterable[SlurmJob], now: float, skip: Iterable[int] = ()) -> list[int]:
        """Push the begin time of every due lease to now + lease in one update; returns the renewed job ids. A job
        this daemon released (a Start, a Release, a resize) stays released until it runs or is held again."""
        job_list = list(jobs)
        due = lease_renewals(job_list, now, self.lease_s, {*skip, *self._released})
        if due:
            wanted = set(due)
            for job in job_list:  # the user's begin, from the records renewed (a renewal may precede any read)
                if job.job_id in wanted:
                    floor = begin_floor_of(job.readable_group_tag(), job.submit_time)
                    if floor is not None:
                        self._not_before[job.job_id] = floor
            self._push(due, now)
            self.renewed += len(due)
        return due

    def _push(self, job_ids: Sequence[int], now: float) -> None:
        """Begin times at now + lease, or at the user's --begin where that is later: one update per distinct time
        (one for all in the usual case)."""
        by_begin: dict[str, list[int]] = {}
        for job_id in job_ids:
            wait = max(float(self.lease_s), self._not_before.get(job_id, now) - now)
            by_begin.setdefault(begin_after(wait), []).append(job_id)
        for begin, ids in by_begin.items():
            super().update(ids, JobUpdate(begin=begin))

    def _split(self, job_ids: Iterable[int]) -> tuple[list[int], list[int]]:
        ids: Sequence[int] = list(job_ids)
        return [j for j in ids if j in self._leased], [j for j in ids if j not in self._leased]
