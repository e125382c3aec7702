"""Zhao et al. (ICC '18): make-span of a batch of jobs on accelerator responders, and the SCT / MMI baselines.

The algorithm (`zhao_schedule`): Lenstra-Shmoys-Tardos assignment on the non-overlapped times
p_ij = s_i / r_j + t_ij (`accel_lst`), then on each responder the paper's MTTF order (`order="mttf"`) or
Johnson's rule (`"johnson"`, the corrected option: the paper's Theorem 3 is false). Make-span <= 4 OPT
whatever the order (digest `accel_batch.md` §2.6); `overlap_lower_bound` is what every run is checked against.

The policies (`accel_batch`, `sct`, `mmi`) read a `ClusterView`: every usable node of the configured kinds is
one responder (one computation at a time; a CPU node is a responder too when a job has a CPU variant, an
extension the paper does not test), t_ij is the job's estimate on the node's kind times the node's speed
factor, s_i and r_j come from the arguments (the view has no input-size field; without them transfers are
free). Each call plans the whole pending batch and starts the first job of every idle responder, pinned to
it; the rest is re-planned at the next call (a rolling horizon). Deterministic: no state between calls.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from pydantic import Field

from slurmx.core.actions import Plan, Start
from slurmx.core.model import ClusterView, Group, Node, VariantState
from slurmx.policies.accel_baselines import MmiIncrease, MmiReorder, mmi_schedule, sct_schedule
from slurmx.policies.accel_lst import LstResult, Search, lst_assign
from slurmx.policies.accel_model import BatchInstance, OrderRule, Schedule, schedule_from_assignment
from slurmx.policies.base import PolicyArgs, register

__all__ = [
    "AccelBatch",
    "AccelBatchArgs",
    "Mmi",
    "MmiArgs",
    "Sct",
    "SctArgs",
    "overlap_lower_bound",
    "zhao_schedule",
]

_STARTABLE = frozenset({VariantState.PENDING, VariantState.HELD, VariantState.REQUEUED})


def zhao_schedule(instance: BatchInstance, order: OrderRule = "mttf", search: Search = "descent") -> \
        tuple[Schedule, LstResult]:
    """The 4-approximation: LST assignment on p_ij, then `order` on every responder."""
    lst = lst_assign(instance.nonoverlap_s, search=search)
    return schedule_from_assignment(instance, lst.assignment, order), lst


def overlap_lower_bound(instance: BatchInstance, t_lp: float) -> float:
    """A lower bound on the overlapped optimum (digest check C11): a job's own transfer and computation
    cannot overlap; every accelerator's and every NIC's work averaged over responders; T_LP / 2 (Theorem 4)."""
    a, b = instance.transmit_s, instance.compute_s
    n_resp = instance.n_responders
    return float(max((a + b).min(axis=1).max(), b.min(axis=1).sum() / n_resp, a.min(axis=1).sum() / n_resp,
                     t_lp / 2))


class _ViewArgs(PolicyArgs):
    """How a cluster view becomes a batch instance (shared by the three policies)."""

    kinds: tuple[str, ...] = ("accel", "gpu", "cpu")  # node kinds that act as responders, when jobs have them
    input_mb: dict[str, float] = Field(default_factory=dict)  # group id -> input size; missing = 0
    ingress_mbps: dict[str, float] = Field(default_factory=dict)  # node -> ingress rate; missing = default
    default_ingress_mbps: float = Field(1000.0, gt=0)  # the paper's 1 Gbps
    node_speed: dict[str, float] = Field(default_factory=dict)  # node -> t_ij divisor (heterogeneous devices)


class AccelBatchArgs(_ViewArgs):
    order: OrderRule = "mttf"  # the paper's; "johnson" is optimal per responder
    search: Search = "descent"


class SctArgs(_ViewArgs):
    seed: int = 0  # exact ties between responders go to a seeded random one


class MmiArgs(_ViewArgs):
    increase: MmiIncrease = "overlap"
    reorder: MmiReorder = "selection"


@dataclass(frozen=True, slots=True)
class _Batch:
    instance: BatchInstance
    groups: tuple[Group, ...]
    responders: tuple[tuple[Node, str], ...]  # node and the kind it serves
    idle: tuple[bool, ...]


def _read_batch(view: ClusterView, args: _ViewArgs, notes: list[str]) -> _Batch | None:
    responders: list[tuple[Node, str]] = []
    seen: set[str] = set()
    for kind in args.kinds:
        for node in view.nodes_of_kind(kind):
            if node.is_usable and node.name not in seen:
                seen.add(node.name)
                responders.append((node, kind))
    busy = {name for g in view.running_groups() for v in g.variants if v.is_occupying for name in v.nodes}
    groups: list[Group] = []
    rows: list[list[float]] = []
    for group in view.pending_groups():
        times = []
        for node, kind in responders:
            variant = group.variant(kind)
            ok = variant is not None and variant.state in _STARTABLE and variant.estimate_s is not None
            if ok and variant is not None and variant.estimate_s is not None and variant.request.fits_in(node.capacity):
                times.append(variant.estimate_s / args.node_speed.get(node.name, 1.0))
            else:
                times.append(np.inf)
        if not responders or not np.isfinite(min(times)):
            notes.append(f"{group.group_id}: no responder of kinds {', '.join(args.kinds)} with an estimate")
            continue
        groups.append(group)
        rows.append(times)
    if not groups:
        return None
    compute = np.array(rows)
    sizes = np.array([args.input_mb.get(g.group_id, 0.0) for g in groups])
    rates = np.array([args.ingress_mbps.get(n.name, args.default_ingress_mbps) for n, _ in responders])
    instance = BatchInstance(sizes, rates, compute)
    idle = tuple(n.name not in busy for n, _ in responders)
    return _Batch(instance, tuple(groups), tuple(responders), idle)


def _plan(view: ClusterView, args: _ViewArgs, solve: Callable[[BatchInstance], Schedule], label: str) -> Plan:
    notes: list[str] = []
    batch = _read_batch(view, args, notes)
    if batch is None:
        return Plan((), tuple(notes))
    schedule = solve(batch.instance)
    actions = []
    for j, order in enumerate(schedule.orders):
        if not order or not batch.idle[j]:
            continue
        group = batch.groups[order[0]]
        node, kind = batch.responders[j]
        variant = group.variant(kind)
        assert variant is not None
        actions.append(Start(group.group_id, kind, (node.name,), variant.request,
                             reason=f"{label}: first of {len(order)} planned on {node.name}"))
    return Plan(tuple(actions), tuple(notes))


@register("accel_batch", AccelBatchArgs)
@dataclass(frozen=True)
class AccelBatch:
    """LST assignment + MTTF (or Johnson) order; starts each idle responder's first job."""

    args: AccelBatchArgs
    name: ClassVar[str] = "accel_batch"

    def schedule(self, view: ClusterView, now: float) -> Plan:
        return _plan(view, self.args, lambda inst: zhao_schedule(inst, self.args.order, self.args.search)[0],
                     f"LST+{self.args.order}")


@register("sct", SctArgs)
@dataclass(frozen=True)
class Sct:
    """Smallest Completion Time: each job to its fastest responder, MTTF order."""

    args: SctArgs
    name: ClassVar[str] = "sct"

    def schedule(self, view: ClusterView, now: float) -> Plan:
        return _plan(view, self.args, lambda inst: sct_schedule(inst, self.args.seed), "SCT")


@register("mmi", MmiArgs)
@dataclass(frozen=True)
class Mmi:
    """Minimum Make-span Increase greedy."""

    args: MmiArgs
    name: ClassVar[str] = "mmi"

    def schedule(self, view: ClusterView, now: float) -> Plan:
        return _plan(view, self.args,
                     lambda inst: mmi_schedule(inst, self.args.increase, self.args.reorder), "MMI")

