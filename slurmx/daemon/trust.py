"""Which Slurm jobs the daemon may act on (ARCHITECTURE.md, "Trust"); pure functions over squeue records.

A comment is only a hint anyone can write. Privileges come from fields Slurm enforces: the UserId, the QOS
(the TE/BE class), the partition. So a job is a variant only when it carries the group tag, and a group belongs to
the user of its earliest job (the lowest job id: `slurmx submit` submits every variant before anyone can read the
new group id from squeue). A job of another user carrying the tag is a forgery: it is set aside and reported,
never acted on, and the rightful group goes on without it. The submitter's own jobs must then share one
class-bearing QOS, be site kinds in their kinds' partitions, with at most one active job per kind; otherwise the
group is left alone and reported once, never acted on. A tag this daemon cannot read (a newer version, a
malformed field) sets its job aside the same way, named.

A group's grace period is its own (the `gr=` tag of its earliest job, what its `--signal` was rendered from),
clamped to the site's `preemption.max_grace`: a comment is the user's to write, and a huge grace would let a job
hold its node long after the policy preempted it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from slurmx.core import tag
from slurmx.core.config import SiteConfig
from slurmx.core.model import JobClass
from slurmx.slurm.records import SlurmJob

__all__ = ["Rejected", "TrustedGroup", "job_grace", "sort_jobs"]

_SAFE_GROUP = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,80}$")


@dataclass(frozen=True, slots=True)
class TrustedGroup:
    """Every squeue record of one group (active or recently finished), keyed by kind, and its class."""

    group_id: str
    user: str
    user_id: int
    job_class: JobClass
    jobs: Mapping[str, SlurmJob]  # kind -> the newest job of that kind
    estimates: Mapping[str, float | None]  # kind -> seconds from the `e=` tag, else the job's time limit
    grace_s: int | None = None  # the group's own grace period (`gr=`), clamped; None: the site's default


@dataclass(frozen=True, slots=True)
class Rejected:
    """A group (or a lone job) the daemon will not touch, and why, for the log and `slurmx explain`."""

    group_id: str
    job_ids: tuple[int, ...]
    reason: str


def _class_of(site: SiteConfig) -> dict[str, JobClass]:
    return {site.qos_for(JobClass.TE): JobClass.TE, site.qos_for(JobClass.BE): JobClass.BE}


def sort_jobs(site: SiteConfig, jobs: Iterable[SlurmJob]) -> tuple[list[TrustedGroup], list[Rejected]]:
    """Split squeue records into trusted groups and rejected ones; jobs without the tag are not ours (skipped).

    Pure. A job of another user than the group's submitter is set aside (reported while active), never the group.
    """
    by_group: dict[str, list[tuple[str, SlurmJob]]] = {}
    rejected: list[Rejected] = []
    estimates: dict[int, float | None] = {}
    graces: dict[int, int | None] = {}
    max_grace = site.preemption.max_grace_s
    safe = _SAFE_GROUP.match
    for job in jobs:
        comment = job.comment
        if not comment.startswith("slurmx:"):
            continue
        try:  # everything read from the comment, before the job joins a group: one bad comment costs its job only
            tags = tag.fields(comment)
            estimate, grace = _estimate(tags.get("e"), job), _grace(tags.get("gr"), max_grace)
        except Exception as exc:  # TagError, or any bug a crafted comment finds: that job is set aside, named
            rejected.append(Rejected(f"job{job.job_id}", (job.job_id,), f"unreadable group tag: {exc}"))
            continue
        group_id, kind = tags.get("g"), tags.get("v")
        if not group_id or not kind:
            continue
        members = by_group.get(group_id)
        if members is not None:
            members.append((kind, job))
        elif safe(group_id):  # a name is checked once, when first seen
            by_group[group_id] = [(kind, job)]
        else:
            rejected.append(Rejected(group_id[:40], (job.job_id,), "group tag is not a plain name"))
            continue
        estimates[job.job_id] = estimate
        graces[job.job_id] = grace
    classes = _class_of(site)
    partitions = {name: kind.partition for name, kind in site.resources.items()}
    trusted: list[TrustedGroup] = []
    for group_id, members in by_group.items():
        if len(members) == 2:  # the usual group: a cpu and a gpu variant
            if members[0][1].job_id > members[1][1].job_id:
                members.reverse()
        elif len(members) > 2:
            members.sort(key=_job_id_of)
        first = members[0][1]
        if any(j.user_id != first.user_id for _, j in members):
            members, forged = _split_forged(group_id, members)
            if forged is not None:
                rejected.append(forged)
        reason = _problem(members, classes, partitions)
        if reason:
            rejected.append(Rejected(group_id, tuple(j.job_id for _, j in members), reason))
            continue
        by_kind = dict(members)  # newest wins: a resubmitted variant replaces a finished one
        trusted.append(TrustedGroup(group_id, first.user, first.user_id, classes[first.qos], by_kind,
                                    {kind: estimates[job.job_id] for kind, job in by_kind.items()},
                                    graces[first.job_id]))
    return trusted, rejected


def _split_forged(group_id: str, members: list[tuple[str, SlurmJob]]) \
        -> tuple[list[tuple[str, SlurmJob]], Rejected | None]:
    """The submitter's own jobs (those of the earliest job's UserId), and the active forgeries to report.

    A finished forgery is dropped silently: it can no longer run, so it must not stall the rightful group for
    the minutes `MinJobAge` keeps it in squeue.
    """
    owner = members[0][1]
    own = [m for m in members if m[1].user_id == owner.user_id]
    foreign = [j for _, j in members if j.user_id != owner.user_id and j.state.is_active]
    if not foreign:
        return own, None
    forgers = ", ".join(sorted({f"{j.user or '?'}({j.user_id})" for j in foreign}))
    ids = tuple(j.job_id for j in foreign)
    return own, Rejected(group_id, ids, f"job(s) {', '.join(map(str, ids))} of {forgers} carry the tag of group "
                         f"{group_id}, which belongs to {owner.user or '?'}({owner.user_id}): set aside and never "
                         "acted on; the group goes on without them")


def _job_id_of(member: tuple[str, SlurmJob]) -> int:
    return member[1].job_id


def job_grace(site: SiteConfig, job: SlurmJob) -> int:
    """The grace period slurmxd grants `job`: its group tag's own (`gr=`, clamped), else the site's default."""
    try:
        own = _grace(tag.fields(job.comment).get("gr"), site.preemption.max_grace_s)
    except tag.TagError:
        own = None
    return site.preemption.grace_s if own is None else own


def _grace(text: str | None, limit: int) -> int | None:
    """The `gr=` tag in seconds, at most `limit`; None when absent or not a whole number."""
    value = tag.whole_number(text)
    return None if value is None else min(value, limit)


def _estimate(text: str | None, job: SlurmJob) -> float | None:
    """Seconds this variant is expected to run: the `e=` tag (the spec's estimate), else its time limit."""
    if text:
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if value > 0 and value != float("inf"):
            return value
    return float(job.time_limit_s) if job.time_limit_s else None


def _problem(members: list[tuple[str, SlurmJob]], classes: Mapping[str, JobClass],
             partitions: Mapping[str, str]) -> str:
    first = members[0][1]
    same_qos = True
    for _, j in members:  # a plain loop: the usual group is two jobs, and this runs for every group every cycle
        same_qos = same_qos and j.qos == first.qos
    if not same_qos:
        qos = sorted({j.qos for _, j in members})
        return f"variants run under different QOS ({', '.join(qos)}); the class must be one"
    if first.qos not in classes:
        return f"QOS {first.qos!r} is neither the TE nor the BE QOS of this site ({', '.join(sorted(classes))})"
    active: dict[str, int] = {}
    for kind, job in members:
        partition = partitions.get(kind)
        if partition is None:
            return f"job {job.job_id}: variant {kind!r} is not a resource kind of this site"
        if job.partition and job.partition != partition:
            return f"job {job.job_id}: variant {kind} is in partition {job.partition}, not {partition}"
        if job.state.is_active:
            if kind in active:
                return f"two active jobs ({active[kind]}, {job.job_id}) claim variant {kind}"
            active[kind] = job.job_id
    return ""
