"""Groups the policy cannot place are handed over to one that can, on the room the policy's own plan leaves.

Why: most papers define one-node jobs with no placement rule (AlloX, FitGpp, Synergy, Zhao's batches, MLFS). An
HPC site also runs MPI jobs over several nodes and jobs pinned to features or nodes (`-C`, `-w`, `-x`,
`--exclusive`). Shown to such a policy, those groups would be placed where they cannot run, and the start would
wait in Slurm while the plan says it runs. So a policy declares what it can place (`max_nodes`,
`places_constraints` on its class, read through `policies/base.py`), and each decision shows it only the groups
it can place; the others are decided by the handover policy (EASY backfill, which places any node count and
every placement rule) on the nodes as the policy's plan leaves them, behind the policy's own starts. The
simulator and the daemon both decide through here (`cycle/run.py`), so a handed-over group is placed alike in
both.

The normal path costs one check: a policy that places everything (FIFO, EASY) hands nothing over and is shown
the view as is; the others cost one pass over the pending groups' variants.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import cast

from slurmx.core.actions import Note, Plan, Start
from slurmx.core.model import ClusterView, Group, Node
from slurmx.core.resources import Resources
from slurmx.core.snapshot import LentSnapshot
from slurmx.cycle.isolate import without
from slurmx.policies.base import Policy, can_place, make_policy, max_nodes, places_constraints

__all__ = ["HANDOVER_POLICY", "WithHandover", "handed_over", "helper_plan", "merged", "residual", "with_handover"]

HANDOVER_POLICY = "fifo"  # with EASY backfill: any node count, every placement rule, Slurm's own default
_HELPERS: list[Policy] = []


def handed_over(policy: Policy, view: ClusterView) -> list[str]:
    """The pending groups `policy` cannot place (a variant wider than it places, or with a placement rule it does
    not honour), in queue order; [] for a policy that places everything (no group read)."""
    if max_nodes(policy) is None and places_constraints(policy):
        return []
    return [g.group_id for g in view.pending_groups() if not can_place(policy, g.variants)]


def _helper() -> Policy:
    if not _HELPERS:
        _HELPERS.append(make_policy(HANDOVER_POLICY, {"backfill": "easy"}))
    return _HELPERS[0]


def helper_plan(view: ClusterView, plan: Plan, handed: Collection[str], now: float) -> Plan:
    """The handover policy's plan for the `handed` groups on what `plan` leaves of `view`'s nodes. What it raises
    propagates: the cycle's isolation then finds the group to blame, as for the policy's own (`WithHandover`)."""
    got = _helper().schedule(residual(view, plan, handed), now)
    notes = (Note(f"{len(handed)} group(s) the policy cannot place decided by EASY backfill", kind="handover"),)
    return Plan(got.actions, notes + got.notes)


class WithHandover:
    """The policy, shown only the groups it can place, then EASY for the others on what its plan leaves: one
    decision, so the cycle's isolation (cycle/isolate.py) bisects and quarantines a group either of them fails on,
    and the quarantine is always kept against the whole view."""

    __slots__ = ("policy",)

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    @property
    def name(self) -> str:
        return self.policy.name

    def schedule(self, view: ClusterView, now: float) -> Plan:
        handed = handed_over(self.policy, view)
        if not handed:
            return self.policy.schedule(view, now)
        own = self.policy.schedule(without(view, frozenset(handed)), now)
        if not isinstance(own, Plan):
            return own  # the cycle says what the policy returned
        return merged(own, helper_plan(view, own, handed, now))


def with_handover(policy: Policy) -> Policy:
    """`policy` itself when it places every group (FIFO, EASY: nothing to hand over), else `WithHandover(policy)`."""
    if max_nodes(policy) is None and places_constraints(policy):
        return policy
    return cast("Policy", WithHandover(policy))


def merged(first: Plan, second: Plan) -> Plan:
    """One plan: the policy's actions first (they were decided on the whole cluster), then the handover's; the
    policy's memo (the handover keeps none)."""
    return Plan(first.actions + second.actions, first.notes + second.notes, first.memo)


def residual(view: ClusterView, plan: Plan, keep: Collection[str]) -> ClusterView:
    """`view` with only the `keep` groups pending (running ones all kept) and each node less what `plan` starts on
    it (a start that names no node is Slurm's to place: not counted); a node a preemption freed for a beneficiary
    still waiting (not one of `keep`) is left out whole, as the policy earmarked it."""
    nodes = view.nodes
    taken: dict[str, Resources] = {}
    for action in plan.actions:
        if not isinstance(action, Start) or not action.nodes:
            continue
        group = view.groups.get(action.group_id)
        variant = group.variant(action.kind) if group is not None else None
        for name in action.nodes:
            node = nodes.get(name)
            if node is None:
                continue
            if variant is not None and variant.placement.exclusive:
                held = node.capacity
            elif action.alloc is not None:
                held = action.alloc
            else:
                held = variant.request if variant is not None else Resources()
            taken[name] = taken[name] + held if name in taken else held
    keep_set = set(keep)
    pending = {g.group_id for g in view.pending_groups()}
    for group in view.groups.values():  # room a preemption freed for a waiting beneficiary is not the handover's
        if group.preempted_for in pending and group.preempted_for not in keep_set:
            for name in group.preempted_nodes:
                node = nodes.get(name)
                if node is not None:
                    taken[name] = node.capacity
    if taken:
        changed = dict(nodes)
        for name, held in taken.items():
            node = changed[name]
            changed[name] = Node(node.name, node.partitions, node.capacity, node.allocated + held, node.state,
                                 node.features)
        nodes = changed
    groups = view.groups
    ids = [gid for gid in groups if gid in keep_set or gid not in pending]
    lent: Mapping[str, Group] = LentSnapshot(cast("dict[str, Group]", dict.fromkeys(ids)), set(ids),
                                             groups.__getitem__)
    return ClusterView(view.now, nodes, view.partitions, lent, view.kinds)
