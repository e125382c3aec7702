"""Which Slurm jobs the daemon may act on (ARCHITECTURE.md, "Trust"); pure functions over squeue records.

A comment is only a hint anyone can write. Privileges come from fields Slurm enforces: the UserId, the QOS
(the TE/BE class), the partition. So a job is a variant only when it carries the group tag; a group is acted on
only when every job tagged with it has one UserId, one class-bearing QOS, a site kind, the partition of that
kind, and at most one job per kind. Anything else is left alone and reported once, never acted on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from slurmx.core.config import SiteConfig
from slurmx.core.model import JobClass
from slurmx.slurm.records import SlurmJob

__all__ = ["Rejected", "TrustedGroup", "sort_jobs"]

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

    Pure. Finished jobs count too: a forged job that already ended still shows the group was tampered with.
    """
    by_group: dict[str, list[tuple[str, SlurmJob]]] = {}
    rejected: list[Rejected] = []
    estimates: dict[int, float | None] = {}
    safe = _SAFE_GROUP.match
    for job in jobs:
        comment = job.comment
        if not comment.startswith("slurmx:"):
            continue
        tags = _tags(comment)
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
        estimates[job.job_id] = _estimate(tags.get("e"), job)
    classes = _class_of(site)
    partitions = {name: kind.partition for name, kind in site.resources.items()}
    trusted: list[TrustedGroup] = []
    for group_id, members in by_group.items():
        if len(members) == 2:  # the usual group: a cpu and a gpu variant
            if members[0][1].job_id > members[1][1].job_id:
                members.reverse()
        elif len(members) > 2:
            members.sort(key=_job_id_of)
        reason = _problem(members, classes, partitions)
        if reason:
            rejected.append(Rejected(group_id, tuple(j.job_id for _, j in members), reason))
            continue
        first = members[0][1]
        by_kind = dict(members)  # newest wins: a resubmitted variant replaces a finished one
        trusted.append(TrustedGroup(group_id, first.user, first.user_id, classes[first.qos], by_kind,
                                    {kind: estimates[job.job_id] for kind, job in by_kind.items()}))
    return trusted, rejected


def _job_id_of(member: tuple[str, SlurmJob]) -> int:
    return member[1].job_id


def _tags(comment: str) -> dict[str, str]:
    """The tags of a `slurmx:k=v,...` comment (the lean form of parse_comment_tags: the daemon reads every
    job's comment every cycle)."""
    tags = {}
    for item in comment[7:].split(","):
        key, sep, value = item.partition("=")
        if sep:
            tags[key] = value
    return tags


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
    same_user = same_qos = True
    for _, j in members:  # a plain loop: the usual group is two jobs, and this runs for every group every cycle
        same_user = same_user and j.user_id == first.user_id and j.user == first.user
        same_qos = same_qos and j.qos == first.qos
    if not same_user:
        users = sorted({(j.user_id, j.user) for _, j in members})
        names = ", ".join(f"{name or '?'}({uid})" for uid, name in users)
        return f"variants belong to different users ({names}): a comment was forged or edited"
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
