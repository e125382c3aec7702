"""Reconcile one Slurm snapshot with the daemon's store into the `ClusterView` a policy reads (pure).

Two things Slurm cannot tell the policy are added from the store: a variant the daemon released that Slurm has
not started yet is shown *running on the nodes it was steered to* (so the next decision does not hand the same
room out twice), and a victim in its grace period carries its deadline, its beneficiary and the nodes it frees;
the earmark (beneficiary and nodes) is void once the beneficiary runs or is gone, as in the simulator.
Only active variants enter the view: a cancelled sibling must never look startable, and a group that waits on
its `--dependency` enters once Slurm finds the dependency satisfied, and one whose user asked for a later
`--begin` (`b=` in its tag: the begin time Slurm shows is the lease's) enters at that time; their leases are
renewed meanwhile, never to a time before the user's (`lease.py`).

Each variant carries where it may run (`core/placement.py`): its `--constraint`, `--exclusive` and the `-w`/`-x`
lists *its user* gave. Those lists come from the store (`Store.user_nodes`: first seen, before slurmxd steered the
job) when it has them, else from squeue: slurmxd records a job's lists before it first steers it, so a job the
store does not know shows its user's own. A multi-node variant (`-N`) asks Slurm's totals spread evenly: `request`
is per node. An index group of a job array (`core/arrays.py`) is a group like any other, but its array's `%N`
holds across kinds: while N index groups of the array run (or were released), no other enters the view, and
otherwise only the lowest-indexed ones that fit under N do, so no plan can start more than N at once. A group
whose constraint (or node list) slurmx cannot read is left out of the view, so no policy
places it wrongly: one reason line (`rejected`), and it is *left to Slurm* (`unplaced`: its leases are no longer
renewed, so Slurm starts a variant where its own grammar allows, and the siblings are cancelled once one runs).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from slurmx.core.arrays import folder_group
from slurmx.core.config import SiteConfig
from slurmx.core.model import ClusterView, Group, GroupState, Node, Partition, Variant, VariantState
from slurmx.core.ownership import OwnerLookup
from slurmx.core.placement import ANYWHERE, ConstraintError, Placement
from slurmx.core.resources import Resources
from slurmx.core.tag import begin_floor_of
from slurmx.daemon.store import GroupFact
from slurmx.daemon.trust import Rejected, TrustedGroup, sort_jobs
from slurmx.slurm.errors import SlurmParseError
from slurmx.slurm.gcpause import collector_paused
from slurmx.slurm.parse import expand_hostlist
from slurmx.slurm.records import SlurmJob

__all__ = ["GraceMark", "Observation", "StartMark", "build_view", "fact_of"]


@dataclass(frozen=True, slots=True)
class StartMark:
    """A Start the daemon enforced and Slurm has not started yet."""

    kind: str
    job_id: int
    nodes: tuple[str, ...]
    released_at: float


@dataclass(frozen=True, slots=True)
class GraceMark:
    """An open preemption of a group: its deadline while it still runs, the beneficiary, the nodes it frees."""

    deadline: float | None
    beneficiary: str | None
    nodes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Observation:
    view: ClusterView
    groups: Mapping[str, TrustedGroup]  # every trusted group squeue shows, finished ones too
    rejected: tuple[Rejected, ...]
    jobs: Mapping[int, SlurmJob]  # every job squeue shows, by id
    # Trusted groups left out of the view for Slurm to place (a placement slurmx cannot read): their leases are
    # not renewed; each is also in `rejected`, with its reason.
    unplaced: frozenset[str] = field(default=frozenset())


_WAITING = (VariantState.PENDING, VariantState.REQUEUED)
_NOT_STARTED = (VariantState.PENDING, VariantState.HELD)


def _variant(group_id: str, kind: str, job: SlurmJob, estimate: float | None,
             user_nodes: Mapping[int, tuple[str, str]]) -> Variant:
    """Raises ConstraintError or SlurmParseError when the job's placement cannot be read (`_placement`)."""
    state, started = job.state, job.start_time
    count = job.node_count
    asked = user_nodes.get(job.job_id)
    required, excluded = asked if asked is not None else (job.required_nodes, job.excluded_nodes)
    placement = ANYWHERE if not (job.features or required or excluded or job.exclusive) else \
        _placement(job.features, required, excluded, job.exclusive, count)
    return Variant(group_id=group_id, kind=kind, job_id=job.job_id, state=state,
                   request=job.request if count == 1 else _per_node(job.request, count),
                   partition=job.partition, nodes=tuple(expand_hostlist(job.nodes)) if job.nodes else (),
                   estimate_s=estimate, priority=job.priority,
                   submit_time=float(job.submit_time) if job.submit_time else None,
                   start_time=float(started) if started and state.is_active and state not in _NOT_STARTED else None,
                   node_count=count, placement=placement)


@functools.lru_cache(maxsize=4096)
def _placement(constraint: str, required: str, excluded: str, exclusive: bool, count: int) -> Placement:
    """One value per distinct placement (a queue holds few): the host lists expanded, the constraint parsed.

    A `-w` shorter than the node count (`-w c1 -N 2`: c1 and any other) is not given to the policy: `Placement`
    reads `required` as the only nodes allowed, so no plan could ever start the job. Without it the policy places
    the job on any N nodes; steering then keeps the user's c1 (`enforce_start._narrows`), or, when the plan left
    it out, releases the job unsteered for Slurm to place where its user asked."""
    nodes = tuple(expand_hostlist(required)) if required else ()
    placement = Placement(constraint, nodes if len(nodes) >= count else (),
                          tuple(expand_hostlist(excluded)) if excluded else (), exclusive)
    return ANYWHERE if placement == ANYWHERE else placement  # the policies' fast path tests `is ANYWHERE`


def _per_node(total: Resources, count: int) -> Resources:
    """Slurm's totals of an `-N count` job (squeue's tres_req_str) as what it takes on each node, rounded up."""
    return Resources(-(-total.cpus // count), -(-total.mem_mb // count),
                     {name: -(-n // count) for name, n in total.gres.items()})


def _note_index(throttled: dict[str, tuple[int, list[tuple[int, str]]]], tg: TrustedGroup, job: SlurmJob) -> None:
    array = folder_group(tg.group_id)
    limit, members = throttled.get(array, (tg.throttle, []))
    members.append((job.array_task_id or 0, tg.group_id))
    throttled[array] = (min(limit, tg.throttle), members)


def _hold_to_throttle(groups: dict[str, Group], throttled: Mapping[str, tuple[int, list[tuple[int, str]]]]) -> None:
    """Leave out of the view the index groups past their array's `%N`: Slurm counts it per kind array, slurmxd for
    the array group across kinds. Running (or released) ones take room first, then the waiting ones by index."""
    running = GroupState.RUNNING
    for limit, members in throttled.values():
        room = limit - sum(1 for _, group_id in members if groups[group_id].state is running)
        members.sort()
        for _, group_id in members:
            if groups[group_id].state is not running:
                if room > 0:
                    room -= 1
                else:
                    del groups[group_id]


def fact_of(facts: Mapping[str, list[GroupFact]], tg: TrustedGroup) -> GroupFact | None:
    """The store's facts of this very group: its id, its owner, and a job seen before (store.GroupFact)."""
    for fact in facts.get(tg.group_id, ()):
        if fact.matches(tg.user_id, (job.job_id for job in tg.jobs.values())):
            return fact
    return None


def build_view(site: SiteConfig, jobs: Iterable[SlurmJob], nodes: Iterable[Node], partitions: Iterable[Partition],
               now: float, *, owner_of: OwnerLookup, facts: Mapping[str, list[GroupFact]] | None = None,
               starts: Mapping[str, StartMark] | None = None,
               grace: Mapping[str, GraceMark] | None = None,
               user_nodes: Mapping[int, tuple[str, str]] | None = None) -> Observation:
    """The policy's snapshot. `owner_of`: who owns a group's folder (`core/ownership.py`); `facts`: the store's
    facts of open groups (original submit time, preemptions, last requeue); `user_nodes`: job id -> the `-w`, `-x`
    its user gave, first seen (`Store.user_nodes`), for the jobs slurmxd may have steered."""
    with collector_paused():  # tens of thousands of acyclic records (see collector_paused)
        return _build_view(site, list(jobs), nodes, partitions, now, owner_of, facts or {}, starts or {},
                           grace or {}, user_nodes or {})


def _build_view(site: SiteConfig, job_list: list[SlurmJob], nodes: Iterable[Node], partitions: Iterable[Partition],
                now: float, owner_of: OwnerLookup, facts: Mapping[str, list[GroupFact]],
                starts: Mapping[str, StartMark], grace: Mapping[str, GraceMark],
                user_nodes: Mapping[int, tuple[str, str]]) -> Observation:
    trusted, rejected = sort_jobs(site, job_list, owner_of)
    unplaced: set[str] = set()
    node_map = {n.name: n for n in nodes}
    order = {kind: i for i, kind in enumerate(site.kind_names())}
    reserved: dict[str, Resources] = {}
    groups: dict[str, Group] = {}
    site_grace = site.preemption.grace_s
    cancelled = VariantState.CANCELLED
    throttled: dict[str, tuple[int, list[tuple[int, str]]]] = {}  # array group -> (its %N, [(index, group id)])
    for tg in trusted:
        group_id = tg.group_id
        variants = []
        mark = starts.get(group_id)
        done = False
        held_back: Variant | None = None  # a released variant Slurm has not started yet
        unreadable = ""
        for kind, job in tg.jobs.items():
            state = job.state
            if not state.is_active:
                if state is not cancelled:
                    done = True  # one variant already ran to its end: nothing of this group may start again
                    break
                continue
            if state in _NOT_STARTED and job.waits_on_dependency:
                done = True  # `--dependency`: Slurm would not start it yet; as if not yet submitted
                break
            if state in _NOT_STARTED and "b=" in job.comment and \
                    (begin_floor_of(job.readable_group_tag(), job.submit_time) or 0) > now:
                done = True  # the user's `--begin` is still ahead: as if not yet submitted
                break
            try:
                variant = _variant(group_id, kind, job, tg.estimates.get(kind), user_nodes)
            except (ConstraintError, SlurmParseError) as exc:
                unreadable = f"{kind} job {job.job_id}: {exc}"
                break
            if mark is not None and mark.job_id == job.job_id and state in _WAITING:
                # Released but not started: it will take these nodes; show it there so nothing else is put there.
                variant = replace(variant, state=VariantState.RUNNING, nodes=mark.nodes, start_time=mark.released_at)
                held_back = variant
            variants.append(variant)
        if unreadable:
            unplaced.add(group_id)
            rejected.append(Rejected(group_id, tuple(j.job_id for j in tg.jobs.values()),
                                     f"placement slurmx cannot read ({unreadable}): left to Slurm, which starts a "
                                     "variant once its lease runs out; the others are cancelled when one runs"))
            continue
        if done or not variants:
            continue
        if held_back is not None and mark is not None:
            for name in mark.nodes:  # its request there, or the whole node when it is exclusive
                node = node_map.get(name)
                held = held_back.taken_on(node) if node is not None else held_back.request
                reserved[name] = reserved.get(name, Resources()) + held
        fact = fact_of(facts, tg) if group_id in facts else None
        if fact is not None:
            submit, preemptions, requeued = fact.submit_time, fact.preemptions, fact.last_requeue
        else:
            times = [v.submit_time for v in variants if v.submit_time is not None]
            # Not after `now`: the cycle reads its clock before squeue, and a group submitted in between shows
            # Slurm's whole second, which can be a fraction past `now`; a view never holds a future submission.
            submit, preemptions, requeued = min(min(times, default=now), now), 0, None
        if len(variants) == 2:  # the usual group: a cpu and a gpu variant
            if order[variants[0].kind] > order[variants[1].kind]:
                variants.reverse()
        elif len(variants) > 2:
            variants.sort(key=lambda v: order[v.kind])
        first = next(iter(tg.jobs.values()))
        mark_g = grace.get(group_id)
        groups[group_id] = Group(
            group_id=group_id, name=first.name.rsplit("@", 1)[0], user=tg.user, job_class=tg.job_class,
            variants=tuple(variants), grace_s=site_grace if tg.grace_s is None else tg.grace_s,
            preemptions=preemptions, submit_time=submit,
            grace_deadline=mark_g.deadline if mark_g else None,
            preempted_for=mark_g.beneficiary if mark_g else None,
            preempted_nodes=mark_g.nodes if mark_g else (), requeue_time=requeued)
        if tg.throttle:
            _note_index(throttled, tg, first)
    if throttled:
        _hold_to_throttle(groups, throttled)
    for group_id in [g for g, m in grace.items() if m.beneficiary and g in groups]:
        beneficiary = groups.get(grace[group_id].beneficiary or "")
        if beneficiary is None or beneficiary.state is GroupState.RUNNING:
            # The beneficiary started or left: the victim's earmark is void (its deadline, if any, stays).
            groups[group_id] = replace(groups[group_id], preempted_for=None, preempted_nodes=())
    for name, extra in reserved.items():
        node = node_map.get(name)
        if node is not None:
            node_map[name] = Node(node.name, node.partitions, node.capacity, node.allocated + extra, node.state,
                                  node.features)
    kinds = {name: kind.partition for name, kind in site.resources.items()}
    view = ClusterView(now=now, nodes=node_map, partitions={p.name: p for p in partitions}, groups=groups,
                       kinds=kinds)
    return Observation(view, {g.group_id: g for g in trusted}, tuple(rejected), {j.job_id: j for j in job_list},
                       frozenset(unplaced))
