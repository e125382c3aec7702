"""The registered policies `accel_batch` (Zhao et al., ICC '18), `sct` and `mmi` on a `ClusterView`.

Each reads the pending groups as one batch and calls its decision function: `zhao_schedule` (`schedule.py`:
LST assignment, then MTTF or Johnson per responder), `sct_schedule` or `mmi_schedule` (`baselines.py`).

Every usable node of the configured kinds is one responder (one computation at a time; a CPU node is a responder
too when a job has a CPU variant, an extension the paper does not test), t_ij is the job's estimate on the
node's kind times the node's speed factor, s_i and r_j come from the arguments (the view has no input-size
field; without them transfers are free). Each call plans the whole pending batch and starts the first job of
every idle responder, pinned to it; the rest is re-planned at the next call (a rolling horizon). Deterministic:
no state between calls.

Estimates are the users' numbers: any finite positive one is a valid view (a time limit of UNLIMITED, `e=1e15`).
The batch is read in units scaled by one power of two (exact) so its largest time is at most 2^20, which keeps
every sum the solvers form finite; and if a solver still fails on the batch (HiGHS reporting an error, a rounding
that strands a job), that call falls back to list scheduling (each job, longest first, to the responder where it
ends earliest: the LST search's own starting point, `greedy_assignment`) with the policy's order, says so in the
plan's notes, and never raises.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt
from pydantic import Field

from slurmx.core.actions import Note, Plan, Start
from slurmx.core.model import ClusterView, Group, Node, VariantState
from slurmx.policies.accel_batch.baselines import MmiIncrease, MmiReorder, mmi_schedule, sct_schedule
from slurmx.policies.accel_batch.lst import LstError, Search, greedy_assignment
from slurmx.policies.accel_batch.model import BatchInstance, OrderRule, Schedule, schedule_from_assignment
from slurmx.policies.accel_batch.schedule import zhao_schedule
from slurmx.policies.base import Capabilities, PolicyArgs, register

__all__ = ["AccelBatch", "AccelBatchArgs", "Mmi", "MmiArgs", "Sct", "SctArgs"]

_STARTABLE = frozenset({VariantState.PENDING, VariantState.HELD, VariantState.REQUEUED})


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


def _read_batch(view: ClusterView, args: _ViewArgs, notes: list[Note]) -> _Batch | None:
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
            notes.append(Note(f"no responder of kinds {', '.join(args.kinds)} with an estimate", group.group_id))
            continue
        groups.append(group)
        rows.append(times)
    if not groups:
        return None
    compute = np.array(rows)
    sizes = np.array([args.input_mb.get(g.group_id, 0.0) for g in groups])
    rates = np.array([args.ingress_mbps.get(n.name, args.default_ingress_mbps) for n, _ in responders])
    scale = _scale(np.concatenate([compute.ravel(), (sizes[:, None] / rates[None, :]).ravel()]))
    instance = BatchInstance(sizes / scale, rates, compute / scale)
    idle = tuple(n.name not in busy for n, _ in responders)
    return _Batch(instance, tuple(groups), tuple(responders), idle)


_MAX_TIME = 2.0**20


def _scale(times: npt.NDArray[np.float64]) -> float:
    """The power of two the batch's times are divided by: 1 unless the largest finite one exceeds 2^20."""
    finite = times[np.isfinite(times)]
    top = float(finite.max()) if finite.size else 0.0
    return 1.0 if top <= _MAX_TIME else float(2.0 ** np.ceil(np.log2(top / _MAX_TIME)))


def _solved(solve: Callable[[BatchInstance], Schedule], instance: BatchInstance, rule: OrderRule,
            notes: list[Note]) -> Schedule:
    """The solver's schedule; where it fails on this batch, list scheduling for this call (module docstring)."""
    try:
        return solve(instance)
    except (LstError, ValueError, ArithmeticError) as exc:
        notes.append(Note(f"solver failed on this batch ({' '.join(str(exc).split())}): list scheduling this cycle"))
        return schedule_from_assignment(instance, greedy_assignment(instance.nonoverlap_s), rule)


def _plan(view: ClusterView, args: _ViewArgs, solve: Callable[[BatchInstance], Schedule], label: str,
          rule: OrderRule = "mttf") -> Plan:
    notes: list[Note] = []
    batch = _read_batch(view, args, notes)
    if batch is None:
        return Plan((), tuple(notes))
    schedule = _solved(solve, batch.instance, rule, notes)
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
    capabilities: ClassVar[Capabilities] = Capabilities()  # one node each, no placement rules, profiled

    def schedule(self, view: ClusterView, now: float) -> Plan:
        return _plan(view, self.args, lambda inst: zhao_schedule(inst, self.args.order, self.args.search)[0],
                     f"LST+{self.args.order}", self.args.order)


@register("sct", SctArgs)
@dataclass(frozen=True)
class Sct:
    """Smallest Completion Time: each job to its fastest responder, MTTF order."""

    args: SctArgs
    name: ClassVar[str] = "sct"
    capabilities: ClassVar[Capabilities] = Capabilities()  # one node each, no placement rules, profiled

    def schedule(self, view: ClusterView, now: float) -> Plan:
        return _plan(view, self.args, lambda inst: sct_schedule(inst, self.args.seed), "SCT")


@register("mmi", MmiArgs)
@dataclass(frozen=True)
class Mmi:
    """Minimum Make-span Increase greedy."""

    args: MmiArgs
    name: ClassVar[str] = "mmi"
    capabilities: ClassVar[Capabilities] = Capabilities()  # one node each, no placement rules, profiled

    def schedule(self, view: ClusterView, now: float) -> Plan:
        return _plan(view, self.args,
                     lambda inst: mmi_schedule(inst, self.args.increase, self.args.reorder), "MMI")

