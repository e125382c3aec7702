"""MLF-H (MLFS, CoNEXT '20) as a daemon policy: the paper's priorities and host choice at Slurm-job granularity.

The paper schedules *tasks* (one model partition for one iteration) and shares GPUs by utilisation; a Slurm job
cannot be split into per-iteration tasks, so here each pending or running group is one MLFS job with a single
worker task whose demand is its variant's request, and the group is the unit of placement and preemption.

Every decision goes through `slurmx.policies.mlfs.rules`, the functions the reproduction's task-level replica
(`slurmx reproduce mlfs`) calls too:
- Priority: Eqs. 2-6 through `job_priorities` and `term_scale` on a `JobState` built from the group, and
  `job_rank` / `queue_key` for the order. Terms with no source on Slurm take neutral values (docs/policies/mlfs.md,
  "On Slurm"): urgency L = 1 (`te_urgency` for TE groups), no deadline (γ_d term 0), iteration I = 1 with no loss
  history (loss factor 1), S_k/S^J = 1, one DAG stage (no child terms). r_k is the estimate left of the variant,
  w_k the time the group has waited since its original submission (frozen while it runs).
- Placement (§2.2): `choose_server` (nearest to the ideal virtual host) over the nodes of the kind that fit the
  request, with *allocated* fractions as utilisation (Slurm reports allocations, not measured use) and no traffic
  or migration dimension; `placement="first_fit"` takes the first fitting node instead.
- Preemption (`preempt`, `take_back`, as the replica's gang mode): a pending group that fits nowhere takes back
  running BE groups of lower P (`victim_key` order), until it fits on one node; those it turns out not to need
  are put back. Each victim gets `Preempt(victim, grace, beneficiary)`; the daemon's grace protocol does the rest. TE
  groups and groups already in a grace period are never victims; a beneficiary of a preemption in flight does not
  preempt again.

Not enforced live: overload eviction / migration (§2.3) and MLF-C (§2.5); docs/policies/mlfs.md says why.
Pure and deterministic: ties break by submit time, then group id.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from slurmx.core.actions import Action, Note, Plan, Preempt, Start
from slurmx.core.model import ClusterView, Group, JobClass, Node, Variant
from slurmx.core.resources import Resources
from slurmx.policies.base import Capabilities, register
from slurmx.policies.mlfs.model import JobState, TaskState
from slurmx.policies.mlfs.rules import (
    RAW,
    MlfhWeights,
    MlfsArgs,
    choose_server,
    job_priorities,
    job_rank,
    queue_key,
    take_back,
    term_scale,
    victim_key,
)

__all__ = ["MlfsSlurm", "MlfsSlurmArgs", "Ranked", "group_job", "rank_groups"]

_NO_DEMAND = np.zeros(3)


class MlfsSlurmArgs(MlfhWeights):
    """MLF-H's priority weights (`MlfhWeights`, the very fields of the replica's `MlfsArgs`) and the Slurm-side
    choices (ours)."""

    # ours, Slurm only:
    placement: Literal["ideal_host", "first_fit"] = "ideal_host"
    te_urgency: int = Field(1, ge=1, description="L^J of TE groups (BE groups: 1); 1 = the class is not a term")
    unknown_estimate_s: float = Field(86400.0, gt=0, description="r_k of a group without an estimate")

    def mlfs_args(self) -> MlfsArgs:
        """The task-level arguments the shared priority functions read."""
        return MlfsArgs(**self.model_dump(include=set(MlfhWeights.model_fields)))


def _candidate(group: Group, view: ClusterView) -> Variant | None:
    """The running variant, else the first not-finished variant of a kind the site serves (variant order)."""
    running = group.running_variant()
    if running is not None:
        return running
    return next((v for v in group.variants if not v.state.is_finished and v.kind in view.kinds), None)


def group_job(group: Group, variant: Variant, now: float, args: MlfsSlurmArgs) -> JobState:
    """The one-worker MLFS job a group stands for (neutral values where Slurm has no source; module docstring)."""
    estimate = variant.estimate_s
    if estimate is None or not math.isfinite(estimate) or estimate < 0:
        estimate = args.unknown_estimate_s
    if variant.is_occupying and variant.start_time is not None:
        remaining = max(0.0, variant.start_time + estimate - now)
        waited = max(0.0, variant.start_time - group.submit_time)
    else:
        remaining, waited = estimate, max(0.0, now - group.submit_time)
    urgency = args.te_urgency if group.job_class is JobClass.TE else 1
    worker = TaskState(group.group_id, 1, 0, 1.0, _NO_DEMAND, 0.0, waited_s=waited)
    return JobState(group.group_id, group.submit_time, urgency, math.inf, (1,), remaining, 0.0, 1, 0.0, 0.0,
                    0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, [worker])


@dataclass(frozen=True, slots=True)
class Ranked:
    """A group with the variant MLF-H considers and its priority P."""

    group: Group
    variant: Variant
    priority: float


def rank_groups(groups: Sequence[Group], view: ClusterView, now: float, args: MlfsSlurmArgs) -> list[Ranked]:
    """P of every group that has a usable variant, highest first (ties: older submit, then group id).

    The term scales (`normalize="max"`) are taken over all the groups ranked together, as MLF-H does per call.
    """
    task_args = args.mlfs_args()
    pairs = [(g, v) for g in groups if (v := _candidate(g, view)) is not None]
    jobs = [group_job(g, v, now, args) for g, v in pairs]
    scale = term_scale(jobs, now, task_args) if args.normalize == "max" else RAW
    ranked = []
    for (g, v), j in zip(pairs, jobs, strict=True):
        priority = {t.key: float(p) for t, p in zip(j.tasks, job_priorities(j, now, task_args, scale), strict=True)}
        ranked.append(Ranked(g, v, job_rank(j, priority)))
    return sorted(ranked, key=lambda r: queue_key(r.priority, r.group.submit_time, r.group.group_id))


def _dims(capacity: Resources) -> list[str]:
    return ["cpus", "mem_mb", *sorted(capacity.gres)]


def _fraction(amount: Resources, capacity: Resources, dims: Sequence[str]) -> list[float]:
    a, c = amount.dims(), capacity.dims()
    return [a.get(d, 0) / c[d] if c.get(d, 0) > 0 else 0.0 for d in dims]


def _pick_node(nodes: Sequence[Node], free: dict[str, Resources], request: Resources, args: MlfsSlurmArgs,
               task_args: MlfsArgs) -> str | None:
    """The fitting node MLF-H's host choice picks on allocated fractions, or the first fit."""
    fitting = [n for n in nodes if request.fits_in(free[n.name])]
    if not fitting:
        return None
    if args.placement == "first_fit" or len(fitting) == 1:
        return fitting[0].name
    dims = sorted({d for n in fitting for d in _dims(n.capacity)})
    used = np.array([_fraction(n.capacity - free[n.name], n.capacity, dims) for n in fitting])
    gpu = np.zeros((len(fitting), 1))  # whole GPUs are allocated like cpus: one more dimension of `used`
    # the fit was decided exactly above, so the task's demand (which only choose_server's fit mask reads) is 0
    host_args = task_args.model_copy(update={"h_r": 1.0, "use_bandwidth": False})
    choice = choose_server(np.zeros(len(dims)), 0.0, np.zeros(len(fitting)), 0.0,
                           (used, used.copy(), gpu, gpu.copy()), host_args)
    return fitting[choice[0]].name if choice is not None else fitting[0].name


@register("mlfs", MlfsSlurmArgs)
class MlfsSlurm:
    """MLF-H on a `ClusterView`: start groups in P order on MLF-H's host, preempt lower-P BE groups for the rest."""

    name: ClassVar[str] = "mlfs"
    capabilities: ClassVar[Capabilities] = Capabilities()  # one node each, no placement rules, profiled

    def __init__(self, args: MlfsSlurmArgs | None = None) -> None:
        self.args = args or MlfsSlurmArgs()

    def schedule(self, view: ClusterView, now: float) -> Plan:
        args = self.args
        task_args = args.mlfs_args()
        pending, running = list(view.pending_groups()), list(view.running_groups())
        ranked = rank_groups(pending + running, view, now, args)
        free = {name: node.free for name, node in view.nodes.items() if node.is_usable}
        actions: list[Action] = []
        notes: list[Note] = []
        waiting: list[Ranked] = []
        full: set[tuple[str, Resources]] = set()  # (kind, request) that fit nowhere: free only shrinks in this loop
        for r in ranked:
            if r.variant.is_occupying:
                continue
            placed = self._place(r.group, view, free, task_args, full)
            if placed is None:
                waiting.append(r)
                continue
            kind, node_name, request = placed
            free[node_name] = free[node_name] - request
            actions.append(Start(r.group.group_id, kind, (node_name,),
                                 reason=f"mlf-h P={r.priority:.4f} host {node_name}"))
        if args.preempt and waiting:
            actions += self._preempt(view, ranked, waiting, free, notes)
        return Plan(tuple(actions), tuple(notes))

    def _place(self, group: Group, view: ClusterView, free: dict[str, Resources], task_args: MlfsArgs,
               full: set[tuple[str, Resources]]) -> tuple[str, str, Resources] | None:
        """(kind, node, request) of the group's first not-finished variant that fits somewhere, in variant order."""
        for variant in group.variants:
            key = (variant.kind, variant.request)
            if variant.state.is_finished or variant.kind not in view.kinds or key in full:
                continue
            nodes = [n for n in view.nodes_of_kind(variant.kind) if n.name in free]
            node = _pick_node(nodes, free, variant.request, self.args, task_args)
            if node is not None:
                return variant.kind, node, variant.request
            full.add(key)
        return None

    def _preempt(self, view: ClusterView, ranked: Sequence[Ranked], waiting: Sequence[Ranked],
                 free: dict[str, Resources], notes: list[Note]) -> list[Action]:
        """MLF-H's gang preemption at group level (module docstring); one node must end up holding the group."""
        in_flight = {g.preempted_for for g in view.groups.values() if g.preempted_for is not None}
        victims = [r for r in ranked if r.variant.is_occupying and r.group.job_class is JobClass.BE
                   and r.group.grace_deadline is None and r.group.preempted_for is None
                   and len(r.variant.nodes) == 1 and r.variant.nodes[0] in free]
        victims.sort(key=lambda r: victim_key(r.priority, r.group.submit_time, r.group.group_id))
        taken: set[str] = set()
        out: list[Action] = []
        for unit in waiting:
            gid = unit.group.group_id
            if gid in in_flight:
                continue
            pool = [v for v in victims if v.priority < unit.priority and v.group.group_id not in taken]
            chosen = self._victims_for(unit, pool, view, free)
            if chosen is None:
                continue
            for v in chosen:
                taken.add(v.group.group_id)
                out.append(Preempt(v.group.group_id, v.group.grace_s, gid,
                                   reason=f"mlf-h P={v.priority:.4f} < P={unit.priority:.4f} of {gid}"))
            notes.append(Note(f"waits for {', '.join(v.group.group_id for v in chosen)} to leave", gid))
        return out

    @staticmethod
    def _victims_for(unit: Ranked, pool: Sequence[Ranked], view: ClusterView,
                     free: dict[str, Resources]) -> list[Ranked] | None:
        """`take_back` on Slurm groups: victims until one node of a kind of `unit` holds it; unneeded ones back."""
        kinds = {v.kind: v.request for v in unit.group.variants if not v.state.is_finished and v.kind in view.kinds}
        released: dict[str, Resources] = {}
        target: list[tuple[str, Resources]] = []  # (node, request) the unit fits on, once found

        def remove_and_fit(victim: Ranked) -> bool:
            node = victim.variant.nodes[0]
            released[node] = released.get(node, Resources()) + victim.variant.request
            room = free[node] + released[node]
            fits = [k for k, req in kinds.items() if req.fits_in(room)
                    and any(n.name == node for n in view.nodes_of_kind(k))]
            if fits:
                target.append((node, kinds[fits[0]]))
            return bool(fits)

        def put_back(victim: Ranked) -> bool:
            node, request = target[0]
            if victim.variant.nodes[0] != node:
                return True  # its room is on another node: the unit does not need it
            room = free[node] + released[node] - victim.variant.request
            if not request.fits_in(room):
                return False
            released[node] = released[node] - victim.variant.request
            return True

        return take_back(unit.priority, [(v.priority, v) for v in pool], remove_and_fit, put_back)
