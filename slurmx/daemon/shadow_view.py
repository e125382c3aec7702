"""The queue as a shadow daemon must see it: its own would-be starts in force, Slurm's own starts undone (pure).

A shadow daemon watches groups that Slurm schedules by itself (race mode, or managed groups another daemon
enforces), and must decide over them *as if it managed them*. Two corrections to Slurm's snapshot do that:

* a group it would have started shows running where it would have put it (a `StartMark`, the same mark the
  enforcing daemon uses for a variant it released), so it never decides that group twice nor hands the room out
  again;
* a group it has not decided yet, submitted while it runs, that Slurm already started (or even finished) shows
  waiting with every variant, its allocation taken off its node: under enforcement it would still wait for the
  daemon. Groups that ran before the shadow daemon started are left as Slurm shows them.

What stays Slurm's: everything else on the nodes, so the would-be plan is formed on the real load, not on a
simulated one (a would-be start and the job Slurm really put there can both count on one node: conservative).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from slurmx.core import tag
from slurmx.core.model import Node, VariantState
from slurmx.core.resources import Resources
from slurmx.daemon.observe import StartMark
from slurmx.daemon.shadow_store import ShadowDecision
from slurmx.slurm.parse import expand_hostlist
from slurmx.slurm.records import SlurmJob

__all__ = ["as_if_managed", "ran"]

_WAITING = (VariantState.PENDING, VariantState.HELD, VariantState.REQUEUED)
_OCCUPYING = (VariantState.RUNNING, VariantState.COMPLETING)


def ran(job: SlurmJob) -> bool:
    """Slurm started this job at some point. A job cancelled while pending carries a start time equal to its
    end time (the cancel), so a cancelled job counts only if it ran for a while (a race loser does)."""
    state = job.state
    if state in _WAITING:
        return False
    if state in _OCCUPYING:
        return True
    if not job.start_time:
        return False
    if state is VariantState.CANCELLED:
        return bool(job.end_time) and (job.end_time or 0) > job.start_time
    return True


def as_if_managed(jobs: Iterable[SlurmJob], nodes: Iterable[Node], started: Mapping[str, ShadowDecision],
                  since: float) -> tuple[list[SlurmJob], list[Node], dict[str, StartMark]]:
    """(jobs, nodes, start marks) for `build_view`. `started`: group -> its first would-be Start;
    `since`: when the shadow daemon started (groups submitted earlier are left as Slurm shows them)."""
    job_list = list(jobs)
    by_group: dict[str, list[SlurmJob]] = {}
    for job in job_list:
        group_id = tag.readable_fields(job.comment).get("g") if job.comment.startswith(tag.PREFIX) else None
        if group_id:
            by_group.setdefault(group_id, []).append(job)
    undo: set[int] = set()
    for group_id, members in by_group.items():
        if group_id in started or not any(ran(j) for j in members):
            continue
        if min((j.submit_time or 0) for j in members) < int(since):  # Slurm's times are whole seconds
            continue
        undo.update(j.job_id for j in members)
    freed: dict[str, Resources] = {}
    out: list[SlurmJob] = []
    for job in job_list:
        if job.job_id not in undo:
            out.append(job)
            continue
        hosts = expand_hostlist(job.nodes) if job.nodes else []
        if job.state in _OCCUPYING and len(hosts) == 1:  # a multi-node job's share per node is not known here
            taken = job.allocated if job.allocated != Resources() else job.request
            freed[hosts[0]] = freed.get(hosts[0], Resources()) + taken
        out.append(replace(job, state=VariantState.PENDING, state_text="PENDING", held=False, nodes="",
                           reason="shadow: waits for slurmxd", start_time=None, end_time=None))
    node_list = [_minus(n, freed[n.name]) if n.name in freed else n for n in nodes]
    marks = {g: StartMark(d.kind, d.job_id, d.nodes, d.t) for g, d in started.items() if d.job_id is not None}
    return out, node_list, marks


def _minus(node: Node, amount: Resources) -> Node:
    left = node.allocated - amount
    clipped = Resources(max(left.cpus, 0), max(left.mem_mb, 0), {k: v for k, v in left.gres.items() if v > 0})
    return Node(node.name, node.partitions, node.capacity, clipped, node.state, node.features)
