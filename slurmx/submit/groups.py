"""Groups as Slurm shows them: discovered from the variants' comment tags, never from local state.

Slurm is the shared state between users and the daemon. A comment is only a hint anyone can write, so a group's
jobs are those of the uid owning its spool folder (`core/ownership.py`, the rule slurmxd applies too): another
user's job carrying the tag is listed apart (`foreign`), never shown, cancelled or waited on as the group's, and a
group whose folder cannot be found has no owner to trust (`valid` False).

A task of a Slurm job array (`core/arrays.py`) is index i of its kind arrays tagged `g`: group `g[i]`, owned by the
owner of the array's folder `<spool>/<g>`, as slurmxd reads it. `find_groups(g)` names an array's every index
group, `find_group(g[i])` one of them; cancelling the whole array cancels the owner's kind arrays by their ids.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from slurmx.core.arrays import folder_group, index_group, index_of, is_task_key, job_text, split_key
from slurmx.core.model import GroupState, VariantState
from slurmx.core.ownership import FolderOwner, members
from slurmx.core.spool import spool_path
from slurmx.core.tag import begin_floor, leased, readable_fields
from slurmx.profile.sampling import sample_fields
from slurmx.slurm import SlurmAdapter
from slurmx.slurm.records import AccountingRecord, SlurmJob

__all__ = ["GroupStatus", "VariantStatus", "cancel_array", "cancel_group", "find_group", "find_groups",
           "list_groups"]

_LEASE = "SlurmxLease"  # not Slurm's: a managed variant waiting under its lease (daemon/lease.py)
_USER_BEGIN = "SlurmxBegin"  # not Slurm's: a managed variant whose user's --begin (`b=`) is still ahead
_WAIT_REASONS = {
    "JobHeldUser": "held: waiting for slurmxd to choose this variant",
    _LEASE: "held: waiting for slurmxd to choose this variant (if slurmxd is gone, Slurm runs one variant of the "
            "group once the lease runs out)",
    _USER_BEGIN: "held until its --begin; then slurmxd chooses one variant (if slurmxd is gone, Slurm runs one "
                 "once both its --begin and the lease have passed)",
    "JobHeldAdmin": "held by an administrator",
    "Priority": "queued behind higher-priority jobs",
    "Resources": "waiting for resources",
    "QOSMaxJobsPerUserLimit": "QOS job limit reached",
    "BeginTime": "requeued: waiting out Slurm's restart delay",
    "Dependency": "waiting on a dependency",
}


@dataclass(frozen=True, slots=True)
class VariantStatus:
    kind: str
    job_id: int
    state: VariantState
    reason: str
    nodes: str
    partition: str
    restart_count: int = 0
    exit_code: int | None = None  # how its batch script exited (a shell's code, 128 + N for signal N); None: not yet

    @property
    def why(self) -> str:
        """A person's reading of Slurm's reason code."""
        if self.state in (VariantState.PENDING, VariantState.HELD):
            return _WAIT_REASONS.get(self.reason, self.reason or "pending")
        return ""


@dataclass(frozen=True, slots=True)
class GroupStatus:
    group_id: str
    name: str
    user: str
    job_class: str
    variants: tuple[VariantStatus, ...]
    valid: bool = True  # its folder's owner is known and owns its variants
    foreign: tuple[int, ...] = ()  # jobs of other users carrying its tag: never counted as the group's
    owner_uid: int | None = None

    @property
    def note(self) -> str:
        """One line on what was set aside, for `slurmx status`."""
        if self.owner_uid is None:
            return "its group folder is missing (or not a folder): no owner to trust; nothing is counted as its own"
        if self.foreign:
            return (f"job(s) {', '.join(map(job_text, self.foreign))} of other users carry this group's tag: ignored "
                    "(the group is its folder owner's)")
        return ""

    @property
    def running(self) -> VariantStatus | None:
        return next((v for v in self.variants if v.state in (VariantState.RUNNING, VariantState.COMPLETING)), None)

    @property
    def state(self) -> GroupState:
        if self.running is not None:
            return GroupState.RUNNING
        states = {v.state for v in self.variants}
        if VariantState.COMPLETED in states:
            return GroupState.COMPLETED
        if any(s.is_active for s in states):
            return GroupState.PENDING
        for finished, group_state in ((VariantState.FAILED, GroupState.FAILED),
                                      (VariantState.TIMEOUT, GroupState.FAILED),
                                      (VariantState.OUT_OF_MEMORY, GroupState.FAILED),
                                      (VariantState.NODE_FAIL, GroupState.FAILED)):
            if finished in states:
                return group_state
        return GroupState.CANCELLED

    @property
    def finished(self) -> bool:
        return self.state in (GroupState.COMPLETED, GroupState.FAILED, GroupState.CANCELLED)


def _variant_name(name: str) -> str:
    return name.rsplit("@", 1)[0]


def _from_jobs(jobs: Iterable[SlurmJob | AccountingRecord], adapter: SlurmAdapter, spool_dir: str) \
        -> list[GroupStatus]:
    by_group: dict[str, list[SlurmJob | AccountingRecord]] = defaultdict(list)
    for job in jobs:
        tags = readable_fields(job.comment)
        if "g" in tags and "v" in tags:
            # An array task: its index group, named by Slurm's index, which no tag can write (`core/arrays.py`).
            by_group[tags["g"] if job.array_task_id is None else index_group(tags["g"], job.array_task_id)] \
                .append(job)
    paths: dict[str, str] = {}
    for gid in by_group:
        try:
            paths[gid] = spool_path(spool_dir, folder_group(gid))  # an index group's folder is its array's
        except ValueError:
            continue  # not a name a folder can have: no owner
    answer = adapter.folder_owners(sorted(set(paths.values()))) if paths else {}
    groups = []
    now = time.time()
    for gid, tagged in by_group.items():
        owner: FolderOwner | None = answer.get(paths[gid]) if gid in paths else None
        own, foreign = members(tagged, owner)
        foreign_ids = tuple(sorted(j.job_id for j in foreign if j.state.is_active))
        shown = own or ([] if owner is not None else tagged)  # no owner: shown for the record, marked invalid
        if not shown:
            continue  # only other users' jobs carry the tag: not a group of anyone's here
        shown.sort(key=lambda j: j.job_id)
        variants = tuple(VariantStatus(
            kind=readable_fields(j.comment)["v"], job_id=j.job_id,
            state=VariantState.HELD if _leased_waiting(j, now) else j.state,
            reason=_lease_reason(j, now) if _leased_waiting(j, now) else getattr(j, "reason", ""), nodes=j.nodes,
            partition=j.partition, restart_count=j.restart_count, exit_code=j.exit_code) for j in shown)
        tags = readable_fields(shown[0].comment)
        groups.append(GroupStatus(gid, _variant_name(shown[0].name), ",".join(sorted({j.user for j in shown})),
                                  tags.get("c", ""), variants, valid=owner is not None, foreign=foreign_ids,
                                  owner_uid=owner.uid if owner is not None else None))
    return sorted(groups, key=_order)


def _order(group: GroupStatus) -> tuple[int, int]:
    """Submission order; an array's index groups by array, then by index."""
    first = group.variants[0].job_id
    return split_key(first) if is_task_key(first) else (first, -1)


def _leased_waiting(job: SlurmJob | AccountingRecord, now: float) -> bool:
    """A managed variant whose lease still runs: it waits for slurmxd as a held one would."""
    begin = getattr(job, "begin_time", None)
    return job.state is VariantState.PENDING and begin is not None and begin > now and leased(job.comment)


def _lease_reason(job: SlurmJob | AccountingRecord, now: float) -> str:
    """Why a leased variant waits: its user's --begin still ahead (`b=`), else slurmxd's choice."""
    floor = begin_floor(job.comment, job.submit_time) if "b=" in job.comment else None
    return _USER_BEGIN if floor is not None and floor > now else _LEASE


def list_groups(adapter: SlurmAdapter, user: str | None = None, *, spool_dir: str) -> list[GroupStatus]:
    """Groups squeue still knows (pending, running, recently finished); `spool_dir`: the site's spool root."""
    return _from_jobs(adapter.jobs(user=user), adapter, spool_dir)


def find_group(adapter: SlurmAdapter, group_id: str, since: str = "now-7days", *, spool_dir: str) \
        -> GroupStatus | None:
    """One group from squeue, or from accounting once squeue has forgotten it."""
    for group in list_groups(adapter, spool_dir=spool_dir):
        if group.group_id == group_id:
            return group
    for group in _from_jobs(adapter.accounting(since=since), adapter, spool_dir):
        if group.group_id == group_id:
            return group
    return None


def find_groups(adapter: SlurmAdapter, group_id: str, since: str = "now-7days", *, spool_dir: str) \
        -> list[GroupStatus]:
    """The group `group_id` (a plain group or one index `g[i]`), or, when `group_id` names an array, each of its
    index groups by index; [] when none is known. squeue first, accounting for what squeue has forgotten (an
    array's finished indices while others still run)."""
    live = [g for g in list_groups(adapter, spool_dir=spool_dir)
            if g.group_id == group_id or _array_of(g.group_id) == group_id]
    exact = [g for g in live if g.group_id == group_id]
    if exact:
        return exact
    known = {g.group_id for g in live}
    past = [g for g in _from_jobs(adapter.accounting(since=since), adapter, spool_dir)
            if g.group_id not in known and (g.group_id == group_id or _array_of(g.group_id) == group_id)]
    exact = [g for g in past if g.group_id == group_id]
    return exact or sorted([*live, *past], key=_order)


def _array_of(group_id: str) -> str | None:
    found = index_of(group_id)
    return None if found is None else found[0]


def cancel_array(adapter: SlurmAdapter, groups: Iterable[GroupStatus]) -> list[int]:
    """Cancel an array group whole: each of its owner's kind arrays by its array job id (`scancel A`, every task,
    split off or not, in one word); returns those ids. Another user's tasks carrying the tag are not the groups'
    (`members`), so their arrays are never named. Refused (ValueError) when an index has no verified owner."""
    group_list = list(groups)
    for group in group_list:
        if not group.valid:
            raise ValueError(f"group {group.group_id}: {group.note}; cancel its jobs by id with scancel")
    arrays = sorted({split_key(v.job_id)[0] for g in group_list for v in g.variants
                     if is_task_key(v.job_id) and v.state.is_active})
    if arrays:
        adapter.cancel(arrays)
    return arrays


def cancel_group(adapter: SlurmAdapter, group: GroupStatus) -> list[int]:
    """Cancel every variant that is still active, and the profiling samples queued with them; returns their ids.

    Only the group's own jobs: variants are its owner's by `find_group`, samples must be the same user's. A group
    without a verified owner is refused (ValueError): cancelling by tag alone would cancel whoever forged it.
    """
    if not group.valid:
        raise ValueError(f"group {group.group_id}: {group.note}; cancel its jobs by id with scancel")
    active = [v.job_id for v in group.variants if v.state.is_active]
    samples = [j.job_id for j in adapter.jobs(user=group.user) if j.state.is_active and j.user == group.user
               and getattr(j, "user_id", group.owner_uid) == group.owner_uid
               and (sample_fields(j.comment) or {}).get("g") == group.group_id]
    adapter.cancel([*active, *samples])
    return [*active, *samples]
