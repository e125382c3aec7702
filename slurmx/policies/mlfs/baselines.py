"""MLFS's baselines (digest §3) as registered policies on a `ClusterView`: `mlfs-fairshare`, `slaq`, `tiresias`
and `gandiva`, so a site can run in slurmxd and `slurmx sim run` what the reproduction compares MLF-H with.

Each decides through `slurmx.policies.mlfs.baseline_rules`, the functions the reproduction's task-level replica
calls. On Slurm a group is one job with a fixed request that runs whole or not at all, so a group's demand is its
variant's count of `resource` (GPUs by default) and it is its own granule:
- `mlfs-fairshare` (TensorFlow on Borg): max-min fair shares of the cluster's `resource` over the active groups
  (`fair_shares`, whole groups: the smallest demands first, ties by submit);
- `slaq`: groups in SLAQ's gain order (`slaq_gain`), each taking whole what is left (`greedy_fill`). The view has
  no loss reports, so every group has SLAQ's "no finished iteration" gain and the order is submit order;
- `tiresias`: groups by 2D-LAS queue (`tiresias_level` of the attained `resource`-seconds), then submit; all or
  nothing in that order (`gang_fill`). Slurm restarts a requeued job's clock, so attained service is the current
  run's, and each preemption the group had counts as one queue of demotion;
- `gandiva`: FIFO, a group starts whole where it fits (later ones may pass one that does not), on a node already
  running a group of the same size first (`affinity`). Slurm allocates exclusively, so no GPU time-sharing, and
  it reports no utilisation, so no utilisation migration.
Fair share, SLAQ and Tiresias take back a running BE group that lost its share (`Preempt`, the daemon's grace
protocol) only while a group that won a share waits for room; Tiresias only for a group of a higher queue. Groups
with no demand of `resource` always have their share. Nodes: the emptiest fitting node (most free `resource`,
then the site's order), as the replica's "emptiest server". Pure and deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from pydantic import Field

from slurmx.core.actions import Action, Note, Plan, Preempt, Start
from slurmx.core.model import ClusterView, Group, JobClass, Node, Variant
from slurmx.core.resources import Resources
from slurmx.policies.base import Capabilities, PolicyArgs, register
from slurmx.policies.mlfs.baseline_rules import (
    affinity,
    fair_shares,
    gang_fill,
    greedy_fill,
    slaq_gain,
    tiresias_level,
)

__all__ = ["FairShare", "Gandiva", "MlfsBaselineArgs", "Slaq", "Tiresias", "TiresiasArgs"]


class MlfsBaselineArgs(PolicyArgs):
    """`resource`: what shares and attained service are counted in, a GRES name (`gpu`) or `cpus`."""

    resource: str = Field("gpu", min_length=1)


class TiresiasArgs(MlfsBaselineArgs):
    """Tiresias' queue limits in attained `resource`-seconds (ours, as the replica's: 1 and 10 GPU-hours)."""

    queue_limits_s: tuple[float, ...] = (3600.0, 36000.0)


@dataclass(frozen=True, slots=True)
class _Unit:
    group: Group
    variant: Variant  # the running one, else the first not-finished one of a kind the site serves
    demand: int


def _amount(res: Resources, resource: str) -> int:
    return res.cpus if resource == "cpus" else int(res.gres.get(resource, 0))


def _units(view: ClusterView, resource: str) -> list[_Unit]:
    """Active groups in submit order; a group in its grace period is already leaving and is not one."""
    out = []
    for group in sorted([*view.pending_groups(), *view.running_groups()], key=lambda g: (g.submit_time, g.group_id)):
        if group.grace_deadline is not None:
            continue
        variant = group.running_variant() or next(
            (v for v in group.variants if not v.state.is_finished and v.kind in view.kinds), None)
        if variant is not None:
            out.append(_Unit(group, variant, _amount(variant.request, resource)))
    return out


def _capacity(view: ClusterView, resource: str) -> int:
    return sum(_amount(n.capacity, resource) for n in view.nodes.values() if n.is_usable)


def _pick(view: ClusterView, unit: _Unit, free: dict[str, Resources], resource: str,
          prefer: dict[str, float]) -> tuple[Variant, Node] | None:
    """The first not-finished variant (variant order) with a fitting node: preferred, emptiest, site order."""
    for variant in unit.group.variants:
        if variant.state.is_finished or variant.kind not in view.kinds:
            continue
        nodes = [n for n in view.nodes_of_kind(variant.kind) if n.name in free
                 and variant.request.fits_in(free[n.name])]
        if nodes:
            best = min(enumerate(nodes), key=lambda p: (prefer.get(p[1].name, 0.0),
                                                        -_amount(free[p[1].name], resource), p[0]))
            return variant, best[1]
    return None


def _enact(view: ClusterView, units: Sequence[_Unit], shares: Sequence[int], resource: str, name: str,
           victim_ok: Callable[[_Unit, _Unit], bool] | None = None) -> Plan:
    """Start pending groups that won their share where they fit; take back running BE groups that lost theirs
    while a winner waits (`victim_ok(victim, first waiting winner)` may spare some)."""
    free = {name_: node.free for name_, node in view.nodes.items() if node.is_usable}
    actions: list[Action] = []
    notes: list[Note] = []
    waiting: list[_Unit] = []
    in_flight = {g.preempted_for for g in view.groups.values() if g.preempted_for is not None}
    for unit, share in zip(units, shares, strict=True):
        wins = unit.demand == 0 or share >= unit.demand
        if not wins or unit.variant.is_occupying:
            continue
        picked = _pick(view, unit, free, resource, {})
        if picked is None:
            notes.append(Note("has its share, no node fits it now", unit.group.group_id))
            if unit.group.group_id not in in_flight:
                waiting.append(unit)
            continue
        variant, node = picked
        free[node.name] = free[node.name] - variant.request
        actions.append(Start(unit.group.group_id, variant.kind, (node.name,), reason=f"{name}: share {share}"))
    if waiting:
        for unit, share in zip(units, shares, strict=True):
            group = unit.group
            if (unit.variant.is_occupying and unit.demand > 0 and share < unit.demand
                    and group.job_class is JobClass.BE and group.preempted_for is None
                    and (victim_ok is None or victim_ok(unit, waiting[0]))):
                actions.append(Preempt(group.group_id, group.grace_s, waiting[0].group.group_id,
                                       reason=f"{name}: share {share} < demand {unit.demand}"))
    return Plan(tuple(actions), tuple(notes))


@register("mlfs-fairshare", MlfsBaselineArgs)
class FairShare:
    """TensorFlow on Borg, MLFS's fair-share baseline: max-min fair shares of `resource`, whole groups."""

    name: ClassVar[str] = "mlfs-fairshare"
    capabilities: ClassVar[Capabilities] = Capabilities()  # one node each, no placement rules, profiled

    def __init__(self, args: MlfsBaselineArgs | None = None) -> None:
        self.args = args or MlfsBaselineArgs()

    def schedule(self, view: ClusterView, now: float) -> Plan:
        units = _units(view, self.args.resource)
        demands = [u.demand for u in units]
        shares = fair_shares(demands, _capacity(view, self.args.resource), [max(1, d) for d in demands])
        return _enact(view, units, shares, self.args.resource, self.name)


@register("slaq", MlfsBaselineArgs)
class Slaq:
    """SLAQ: the largest predicted loss reduction per unit time first; with no loss reports, submit order."""

    name: ClassVar[str] = "slaq"
    capabilities: ClassVar[Capabilities] = Capabilities()  # one node each, no placement rules, profiled

    def __init__(self, args: MlfsBaselineArgs | None = None) -> None:
        self.args = args or MlfsBaselineArgs()

    def schedule(self, view: ClusterView, now: float) -> Plan:
        # Slurm reports no loss: every group is at SLAQ's "first iteration" (I = 1), its gain +inf
        units = sorted(_units(view, self.args.resource),
                       key=lambda u: (-slaq_gain(1, 0.0, 1.0, max(1, u.demand), 1.0), u.group.submit_time,
                                      u.group.group_id))
        demands = [u.demand for u in units]
        shares = greedy_fill(demands, _capacity(view, self.args.resource), [max(1, d) for d in demands])
        return _enact(view, units, shares, self.args.resource, self.name)


@register("tiresias", TiresiasArgs)
class Tiresias:
    """Tiresias (discretised 2D-LAS): least attained service first, all or nothing, preempting lower queues."""

    name: ClassVar[str] = "tiresias"
    capabilities: ClassVar[Capabilities] = Capabilities()  # one node each, no placement rules, profiled

    def __init__(self, args: TiresiasArgs | None = None) -> None:
        self.args = args or TiresiasArgs()

    def level(self, unit: _Unit, now: float) -> int:
        """The queue of a group: its current run's attained service, and at least one queue per preemption."""
        v = unit.variant
        attained = unit.demand * max(0.0, now - v.start_time) if v.is_occupying and v.start_time is not None else 0.0
        limits = self.args.queue_limits_s
        return max(tiresias_level(attained, limits), min(unit.group.preemptions, len(limits)))

    def schedule(self, view: ClusterView, now: float) -> Plan:
        units = _units(view, self.args.resource)
        levels = {u.group.group_id: self.level(u, now) for u in units}
        units = sorted(units,
                       key=lambda u: (levels[u.group.group_id], u.group.submit_time, u.group.group_id))
        shares = gang_fill([u.demand for u in units], _capacity(view, self.args.resource))

        def lower_queue(victim: _Unit, waiting: _Unit) -> bool:
            return levels[victim.group.group_id] > levels[waiting.group.group_id]

        return _enact(view, units, shares, self.args.resource, self.name, lower_queue)


@register("gandiva", MlfsBaselineArgs)
class Gandiva:
    """Gandiva on Slurm: FIFO, whole groups, a node already running a group of the same size first."""

    name: ClassVar[str] = "gandiva"
    capabilities: ClassVar[Capabilities] = Capabilities()  # one node each, no placement rules, profiled

    def __init__(self, args: MlfsBaselineArgs | None = None) -> None:
        self.args = args or MlfsBaselineArgs()

    def schedule(self, view: ClusterView, now: float) -> Plan:
        resource = self.args.resource
        names = sorted(view.nodes)
        index = {n: i for i, n in enumerate(names)}
        sizes: dict[int, set[int]] = {}
        for group in view.running_groups():
            variant = group.running_variant()
            if variant is not None:
                for held in variant.nodes:
                    if held in index:
                        sizes.setdefault(index[held], set()).add(_amount(variant.request, resource))
        free = {n: node.free for n, node in view.nodes.items() if node.is_usable}
        actions: list[Action] = []
        notes: list[Note] = []
        for unit in _units(view, resource):
            if unit.variant.is_occupying:
                continue
            rank = affinity(sizes, unit.demand)
            picked = _pick(view, unit, free, resource, {n: rank(i) for n, i in index.items()})
            if picked is None:
                notes.append(Note("no node fits it now", unit.group.group_id))
                continue
            variant, node = picked
            free[node.name] = free[node.name] - variant.request
            sizes.setdefault(index[node.name], set()).add(unit.demand)
            actions.append(Start(unit.group.group_id, variant.kind, (node.name,), reason="gandiva: fifo, affinity"))
        return Plan(tuple(actions), tuple(notes))
