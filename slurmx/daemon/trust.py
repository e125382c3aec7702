"""Which Slurm jobs the daemon may act on (ARCHITECTURE.md, "Trust"); functions over squeue records.

A comment is only a hint anyone can write. Privileges come from fields Slurm enforces: the UserId, the QOS
(the TE/BE class), the partition. So a job is a variant only when it carries the group tag, and a group belongs to
the uid that owns its spool folder (`core/ownership.py`: `slurmx submit` creates it as the submitting user before
the first sbatch), never to whoever holds its lowest job id. A job of another uid carrying the tag is a forgery:
it is set aside and reported, never acted on, and the rightful group goes on without it; a group whose folder is
missing or not a plain folder has no owner anyone can verify and is left alone, reported. The owner's own jobs
must then share one class-bearing QOS, be site kinds in their kinds' partitions, with at most one active job per
kind; otherwise the group is left alone and reported once, never acted on. A tag this daemon cannot read (a newer
version, a malformed field) sets its job aside the same way, named.

A Slurm job array is one group per index (`core/arrays.py`): the tasks of index i of the kind arrays carrying
tag `g` form group `g[i]` (the index is Slurm's `array_task_id`, which no user can change), owned by the owner of
`g`'s folder and checked as any group is; each task is keyed by its `task_key`.

Every number of a tag is the user's: a group's grace period (the `gr=` of its earliest job, what its `--signal`
was rendered from) is clamped to the site's `preemption.max_grace`, and an estimate (`e=`) to the job's own time
limit (Slurm ends the job there whatever it claims) and to `MAX_ESTIMATE_S`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from slurmx.core import tag
from slurmx.core.arrays import folder_group, index_group, job_text
from slurmx.core.config import SiteConfig
from slurmx.core.model import JobClass
from slurmx.core.ownership import FolderOwner, OwnerLookup
from slurmx.core.ownership import members as owned_members
from slurmx.core.spool import group_spool
from slurmx.profile.estimator import MAX_ESTIMATE_S
from slurmx.slurm.records import SlurmJob

__all__ = ["MAX_ESTIMATE_S", "Rejected", "TrustedGroup", "job_grace", "sort_jobs"]



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
    first_job_id: int = 0  # the owner's earliest job of the group: with the group and the owner, what the store's
    # facts are keyed by (a group id reused after the group closed starts afresh)
    throttle: int = 0  # an index group's: the smallest `%N` of its kind arrays, to hold across kinds; 0: none


@dataclass(frozen=True, slots=True)
class Rejected:
    """A group (or a lone job) the daemon will not touch, and why, for the log and `slurmx explain`."""

    group_id: str
    job_ids: tuple[int, ...]
    reason: str


# One member of a group as `sort_jobs` reads it: (kind, job, estimate, grace), the last two from the job's tag.
_Member = tuple[str, SlurmJob, float | None, int | None]


def _class_of(site: SiteConfig) -> dict[str, JobClass]:
    return {site.qos_for(JobClass.TE): JobClass.TE, site.qos_for(JobClass.BE): JobClass.BE}


def sort_jobs(site: SiteConfig, jobs: Iterable[SlurmJob], owner_of: OwnerLookup) \
        -> tuple[list[TrustedGroup], list[Rejected]]:
    """Split squeue records into trusted groups and rejected ones; jobs without the tag are not ours (skipped).

    `owner_of` answers who owns a group's folder. A job of another uid than the folder's owner is set aside
    (reported while active), never the group; a group without a verifiable owner is reported while active.
    """
    # group id -> its members as (kind, job, estimate, grace): everything read from the tag kept beside its job
    by_group: dict[str, list[tuple[str, SlurmJob, float | None, int | None]]] = {}
    rejected: list[Rejected] = []
    max_grace = site.preemption.max_grace_s
    for job in jobs:
        if not job.comment.startswith("slurmx:"):
            continue
        try:  # everything read from the comment, before the job joins a group: one bad comment costs its job only
            tags = job.group_tag()  # read once per record: the lease layer read it first
            if tags is None:
                continue
            estimate = _estimate(tags.estimate, job)
            grace = _grace(tags.grace, max_grace)
        except Exception as exc:  # TagError, or any bug a crafted comment finds: that job is set aside, named
            rejected.append(Rejected(f"job{job_text(job.job_id)}", (job.job_id,), f"unreadable group tag: {exc}"))
            continue
        group_id = tags.group  # the grammar requires g and v, each a plain name (core/tag.py)
        if job.array_task_id is not None:
            group_id = index_group(group_id, job.array_task_id)  # Slurm's index: a name no tag can write
        members = by_group.get(group_id)
        if members is not None:
            members.append((tags.kind, job, estimate, grace))
        else:
            by_group[group_id] = [(tags.kind, job, estimate, grace)]
    classes = _class_of(site)
    partitions = {name: kind.partition for name, kind in site.resources.items()}
    trusted: list[TrustedGroup] = []
    for group_id, members in by_group.items():
        if len(members) == 2:  # the usual group: a cpu and a gpu variant
            if members[0][1].job_id > members[1][1].job_id:
                members.reverse()
        elif len(members) > 2:
            members.sort(key=_job_id_of)
        owner = owner_of(folder_group(group_id))  # an index group's owner is its array's folder's
        if owner is None or not _all_owned(members, owner.uid):
            members, set_aside = _split_foreign(site, group_id, members, owner)
            if set_aside is not None:
                rejected.append(set_aside)
            if not members:
                continue
        first = members[0][1]
        reason = _problem(members, classes, partitions)
        if reason:
            rejected.append(Rejected(group_id, tuple(m[1].job_id for m in members), reason))
            continue
        if len(members) == 2 and members[0][0] != members[1][0]:  # the usual group: two kinds, one job each
            (kind_a, job_a, estimate_a, _), (kind_b, job_b, estimate_b, _) = members
            by_kind = {kind_a: job_a, kind_b: job_b}
            estimates = {kind_a: estimate_a, kind_b: estimate_b}
            first_job_id = job_a.job_id  # sorted above
        else:
            by_kind, estimates = {}, {}
            for kind, job, estimate, _ in members:  # newest wins: a resubmitted variant replaces a finished one
                by_kind[kind], estimates[kind] = job, estimate
            first_job_id = min(job.job_id for job in by_kind.values())
        trusted.append(TrustedGroup(group_id, first.user, first.user_id, classes[first.qos], by_kind, estimates,
                                    members[0][3], first_job_id,
                                    _throttle(by_kind.values()) if first.array_job_id else 0))
    return trusted, rejected


def _all_owned(members: list[_Member], uid: int) -> bool:
    return all(member[1].user_id == uid for member in members)


def _split_foreign(site: SiteConfig, group_id: str, members: list[_Member],
                   owner: FolderOwner | None) -> tuple[list[_Member], Rejected | None]:
    """The folder owner's own jobs of the group, and the active foreign ones to report.

    A finished foreign job is dropped silently: it can no longer run, so it must not stall the rightful group for
    the minutes `MinJobAge` keeps it in squeue.
    """
    pairs = {id(member[1]): member for member in members}
    own_jobs, foreign_jobs = owned_members([member[1] for member in members], owner)
    own = [pairs[id(job)] for job in own_jobs]
    foreign = [j for j in foreign_jobs if j.state.is_active]
    if not foreign:
        return own, None
    ids = tuple(j.job_id for j in foreign)
    if owner is None:
        folder = group_spool(site, folder_group(group_id))
        return own, Rejected(group_id, ids, f"no group folder {folder} (or not a plain folder): the group's owner "
                             "cannot be verified, so none of its jobs is acted on; submit with `slurmx submit`, "
                             "which creates it")
    forgers = ", ".join(sorted({f"{j.user or '?'}({j.user_id})" for j in foreign}))
    return own, Rejected(group_id, ids, f"job(s) {', '.join(map(job_text, ids))} of {forgers} carry the tag of group "
                         f"{group_id}, whose folder belongs to uid {owner.uid}: set aside and never acted on; the "
                         "group goes on without them")


def _throttle(jobs: Iterable[SlurmJob]) -> int:
    """The smallest `%N` among an index group's kind arrays (0: none): the bound slurmxd holds across kinds."""
    return min((job.array_throttle for job in jobs if job.array_throttle > 0), default=0)


def _job_id_of(member: _Member) -> int:
    return member[1].job_id


def job_grace(site: SiteConfig, job: SlurmJob) -> int:
    """The grace period slurmxd grants `job`: its group tag's own (`gr=`, clamped), else the site's default."""
    try:
        tags = job.group_tag()
        own = None if tags is None else _grace(tags.grace, site.preemption.max_grace_s)
    except tag.TagError:
        own = None
    return site.preemption.grace_s if own is None else own


def _grace(text: str | None, limit: int) -> int | None:
    """The `gr=` tag in seconds, at most `limit`; None when absent or not a whole number."""
    value = tag.whole_number(text)
    return None if value is None else min(value, limit)


def _estimate(text: str | None, job: SlurmJob) -> float | None:
    """Seconds this variant is expected to run: the `e=` tag (the spec's estimate), else its time limit; at most
    its time limit (Slurm ends it there) and `MAX_ESTIMATE_S`."""
    limit = min(float(job.time_limit_s), MAX_ESTIMATE_S) if job.time_limit_s and job.time_limit_s > 0 \
        else MAX_ESTIMATE_S
    if text:
        try:
            value = float(text)
        except (ValueError, OverflowError):
            value = -1.0
        if value > 0 and value != float("inf"):  # NaN fails `> 0`
            return min(value, limit)
    return limit if job.time_limit_s and job.time_limit_s > 0 else None


def _problem(members: list[_Member], classes: Mapping[str, JobClass], partitions: Mapping[str, str]) -> str:
    first = members[0][1]
    same_qos = True
    for member in members:  # a plain loop: the usual group is two jobs, and this runs for every group every cycle
        same_qos = same_qos and member[1].qos == first.qos
    if not same_qos:
        qos = sorted({member[1].qos for member in members})
        return f"variants run under different QOS ({', '.join(qos)}); the class must be one"
    if first.qos not in classes:
        return f"QOS {first.qos!r} is neither the TE nor the BE QOS of this site ({', '.join(sorted(classes))})"
    active: dict[str, int] = {}
    for kind, job, _, _ in members:
        partition = partitions.get(kind)
        if partition is None:
            return f"job {job_text(job.job_id)}: variant {kind!r} is not a resource kind of this site"
        if job.partition and job.partition != partition:
            return f"job {job_text(job.job_id)}: variant {kind} is in partition {job.partition}, not {partition}"
        if job.state.is_active:
            if kind in active:
                return (f"two active jobs ({job_text(active[kind])}, {job_text(job.job_id)}) claim variant "
                        f"{kind}")
            active[kind] = job.job_id
    return ""
