"""DRFA with each user's queue in the order the authors' simulator leaves it (`drfa` with `samples_first` and
`samples_order: accelerator`, the reproduction's `sample_order` option; off by default: an artifact of their code).

Their DRF-Ext keeps each user's waiting items (her jobs and her profiling samples) in one list and sorts it in place
with a stable sort: by accelerator time every time the user is picked (the least dominant share), and again by
base-kind time when no accelerator is free for her head job. The samples' round robin reads that list, so which of
two samples of equal length goes first depends on every sort since they arrived. The order is kept in the policy's
memo (`QueueOrder`): items the memo lacks are appended in arrival order (then id), as their lists grow, so an
empty memo (the first decision, a daemon restart) gives arrival order, which is what a fresh list holds.

The loop is theirs: users in name order, the least share picked (ties: the earlier name with `ties: by_name`, else
the user waiting longest); a user with only samples waiting is still picked, sorted, and passed over; the picked
user's first job in the sorted list starts on a free accelerator, else (list sorted by base-kind time) on a free
base-kind machine; when neither is free, nothing behind it starts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from slurmx.core.actions import Note, Plan, Start
from slurmx.core.model import ClusterView, Group, JobClass
from slurmx.policies.allox_model import Cluster, Job, read_cluster, start_samples

__all__ = ["QueueOrder", "es_in_queue_order", "schedule_in_queue_order"]

Share = Callable[[dict[str, float]], float]
Units = Callable[[Cluster, str, Group], float]


@dataclass(frozen=True, slots=True)
class QueueOrder:
    """The memo: each user's waiting items (group ids), in the order their scheduler's sorts left them."""

    queues: Mapping[str, tuple[str, ...]]


def _queues(memo: object, jobs: Sequence[Job]) -> dict[str, list[Job]]:
    """Each user's waiting items: in the memo's order, then the ones it lacks in arrival order (then id)."""
    known = memo.queues if isinstance(memo, QueueOrder) else {}
    mine: dict[str, dict[str, Job]] = {}
    for job in sorted(jobs, key=lambda j: (j.group.submit_time, j.group.group_id)):
        mine.setdefault(job.user, {})[job.group.group_id] = job
    out: dict[str, list[Job]] = {}
    for user, items in mine.items():
        kept = [items[g] for g in known.get(user, ()) if g in items]
        seen = {j.group.group_id for j in kept}
        out[user] = kept + [j for g, j in items.items() if g not in seen]
    return out


def _sample(job: Job) -> bool:
    return job.group.job_class is JobClass.TE


def schedule_in_queue_order(view: ClusterView, now: float, share_of: Callable[[ClusterView, Cluster], Share],
                            usage_of: Callable[[ClusterView, Cluster], dict[str, dict[str, float]]],
                            units: Units, by_name: bool) -> Plan:
    """One decision: the samples' turn in queue order, then their DRF-Ext loop (module docstring), with the
    policy's share and usage (read after the samples' turn, which they count in); the plan carries the queues as
    the sorts left them."""
    cluster = read_cluster(view, now)
    queues = _queues(view.memo, cluster.jobs)
    rank = {j.group.group_id: i for queue in queues.values() for i, j in enumerate(queue)}
    actions: list[Start] = start_samples(cluster, False, now, "arrival", rank=rank)
    started = {a.group_id for a in actions}
    for user in queues:
        queues[user] = [j for j in queues[user] if j.group.group_id not in started]
    if cluster.scheduler_runs:
        actions += _loop(cluster, queues, share_of(view, cluster), usage_of(view, cluster), units, by_name)
    memo = QueueOrder({u: tuple(j.group.group_id for j in q) for u, q in queues.items() if q})
    return Plan(tuple(actions), tuple(cluster.notes), memo)


def _loop(cluster: Cluster, queues: dict[str, list[Job]], share: Share, usage: dict[str, dict[str, float]],
          units: Units, by_name: bool) -> list[Start]:
    users = sorted(u for u, q in queues.items() if q)
    first = {u: min(j.group.submit_time for j in queues[u]) for u in users}
    done: set[str] = set()
    actions: list[Start] = []
    while len(done) < len(users):
        user = min((u for u in users if u not in done),
                   key=lambda u: (share(usage.get(u, {})), 0.0 if by_name else first[u], u))
        queue = queues[user]
        start: Start | None = None
        tried = False
        for kind in cluster.kinds:  # accelerators first: sort by the kind's time, try its first job there
            queue.sort(key=lambda j, k=kind: j.estimates.get(k, float("inf")))  # type: ignore[misc]
            head = next((j for j in queue if not _sample(j)), None)
            if head is None:
                break
            tried = True
            if kind not in head.estimates:
                continue
            for i in cluster.idle(kind):
                start = cluster.start(i, head, kind, f"drfa: {user} has the least dominant share")
                if start is not None:
                    break
            if start is not None:
                queue.remove(head)
                mine = usage.setdefault(user, {})
                mine[kind] = mine.get(kind, 0.0) + units(cluster, kind, head.group)
                mine["mem"] = mine.get("mem", 0.0) + head.variant(kind).request.mem_mb
                actions.append(start)
                break
        if not tried:
            done.add(user)  # only samples wait: passed over
        elif start is None:
            cluster.notes.append(Note(f"{user}'s next job cannot start; nothing behind it does", kind="drfa"))
            break
    return actions


Passes = Callable[[ClusterView, Cluster, Mapping[str, Mapping[str, int]]], list[Start]]


def es_in_queue_order(view: ClusterView, now: float, samples_in_passes: bool, passes: Passes) -> Plan:
    """ES (`es` with their GPU pass and `samples_order: base_kind`) on the lists their ES leaves: the samples'
    turn in list order; then, when their scheduler runs, every user's list sorted by accelerator time for her
    accelerator pass and then by base-kind time for her base-kind pass (stable sorts, each user in turn, whether
    or not the pass starts anything), which is the order the next decision reads."""
    cluster = read_cluster(view, now)
    queues = _queues(view.memo, cluster.jobs)
    rank = {j.group.group_id: i for queue in queues.values() for i, j in enumerate(queue)}
    actions: list[Start] = start_samples(cluster, samples_in_passes, now, "arrival", rank=rank)
    started = {a.group_id for a in actions}
    base = [k for k in cluster.kinds if cluster.unit_gres.get(k) is None]
    order = [*(k for k in cluster.kinds if k not in base), *base]
    for user in queues:
        queues[user] = [j for j in queues[user] if j.group.group_id not in started]
    if cluster.scheduler_runs:
        ranks: dict[str, dict[str, int]] = {}
        for kind in order:
            for queue in queues.values():
                queue.sort(key=lambda j, k=kind: j.estimates.get(k, float("inf")))  # type: ignore[misc]
                ranks.setdefault(kind, {}).update((j.group.group_id, i) for i, j in enumerate(queue))
        passed = passes(view, cluster, ranks)
        actions += passed
        gone = {a.group_id for a in passed}
        for user in queues:
            queues[user] = [j for j in queues[user] if j.group.group_id not in gone]
    memo = QueueOrder({u: tuple(j.group.group_id for j in q) for u, q in queues.items() if q})
    return Plan(tuple(actions), tuple(cluster.notes), memo)
