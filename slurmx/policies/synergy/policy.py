"""The registered `synergy` policy: Synergy's decisions (`decisions.py`) on the daemon's and the engine's view.

It turns a `ClusterView` into the decision functions' inputs (a profile and a queue state per group) and
their round allocation into actions (lease extended, or preempted and restarted with new CPUs and memory).
Profiles are a model name (`SynergyPolicy.with_profiles`: the simulator's workloads) or the CPU sensitivity slurmxd
measured (`Variant.cpu_rates`, from the search sample); a group with neither is treated as insensitive: it runs
at its proportional share, which Synergy guarantees anyway.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import ClassVar, Literal

from slurmx.core.actions import Action, Note, Plan, Preempt, Start
from slurmx.core.model import ClusterView, Group, VariantState
from slurmx.core.resources import Resources
from slurmx.policies.base import Capabilities, PolicyArgs, can_place, register
from slurmx.policies.synergy.decisions import (
    ClusterShape,
    JobProfile,
    Mechanism,
    Order,
    QueueState,
    allocate_round,
    insensitive_profile,
    job_profile,
    measured_profile,
    queue_key,
)
from slurmx.policies.synergy.mechanisms import EPS, Placement, Servers

__all__ = ["SynergyArgs", "SynergyPolicy"]


class SynergyArgs(PolicyArgs):
    """`mechanism`: prop | greedy | tune | opt; `order`: fifo | srtf | las | ftf | drf | tetris;
    `placement`: first_fit (the released code's default) or consolidate (the paper's best fit / fewest
    servers); `ftf`: themis (largest ratio first) or released (the released code's ascending sort);
    `tune_order`: policy (released) or demand (the paper's GPU, CPU, memory descending)."""

    mechanism: Mechanism = "tune"
    order: Order = "fifo"
    placement: Placement = "first_fit"
    ftf: Literal["themis", "released"] = "themis"
    tune_order: Literal["policy", "demand"] = "policy"
    kind: str = "gpu"


@dataclass(frozen=True)
class SynergyPolicy:
    """The registered `synergy` policy on a `ClusterView`: each round it re-allocates every running and
    pending group of `kind` from scratch (as Synergy's leases do), keeps a running group whose node and
    allocation are unchanged (lease extended), and preempts with no grace then restarts the others (lease
    terminated). Jobs run on one node here (the view's Start is single-node); split multi-GPU placement is
    modelled by the round replica (`slurmx.reproduce.synergy.round_replica`). `profiles` maps a group id to
    its model name (the profiler's output)."""

    args: SynergyArgs
    profiles: Mapping[str, str] = field(default_factory=dict)
    name: ClassVar[str] = "synergy"

    @cached_property
    def capabilities(self) -> Capabilities:
        """Its `kind`'s variants get the CPU/memory sensitivity search (a group's best CPUs and memory)."""
        return Capabilities(sensitivity_kind=self.args.kind)

    def with_profiles(self, profiles: Mapping[str, str]) -> SynergyPolicy:
        return SynergyPolicy(self.args, dict(profiles))

    def schedule(self, view: ClusterView, now: float) -> Plan:
        kind = self.args.kind
        nodes = view.nodes_of_kind(kind)
        if not nodes:
            return Plan((), (Note(f"no node serves kind {kind!r}", kind="synergy"),))
        cap = nodes[0].capacity
        shape = ClusterShape(len(nodes), cap.gres_count("gpu"), float(cap.cpus), cap.mem_mb / 1024)
        names = [node.name for node in nodes]
        servers = shape.servers_state()
        groups = [g for g in (*view.running_groups(), *view.pending_groups()) if g.variant(kind) is not None]
        if any(not can_place(self, g.variants) for g in groups):
            groups = _pinned_aside(groups, self, servers, names, view)
        keyed: list[tuple[tuple[float, ...], Group, JobProfile]] = []
        aware = self.args.mechanism != "prop"
        for n, group in enumerate(groups):
            variant = group.variant(kind)
            assert variant is not None
            gpus = max(1, variant.request.gres_count("gpu"))
            model = self.profiles.get(group.group_id)
            profile = job_profile(model, gpus, shape) if model else \
                measured_profile(variant.cpu_rates, gpus, shape) if variant.cpu_rates else \
                insensitive_profile(gpus, shape)
            remaining = variant.estimate_s or 0.0
            done = 1.0 - (group.work if group.work is not None else 1.0)
            total = remaining / max(1.0 - done, EPS)
            state = QueueState(group.submit_time, remaining, total, done * total * gpus, profile, n)
            keyed.append((queue_key(self.args.order, state, now, shape, aware, self.args.ftf), group, profile))
        keyed.sort(key=lambda item: item[0])
        allocs = allocate_round([p for *_, p in keyed], servers, self.args.mechanism, "consolidate",
                                self.args.tune_order)
        preempts: list[Action] = []
        starts: list[Action] = []
        notes: list[Note] = []
        for (_, group, profile), result in zip(keyed, allocs, strict=True):
            variant = group.variant(kind)
            assert variant is not None
            running = variant.state == VariantState.RUNNING
            if result is None or len(result[0].shares) > 1:
                if result is not None:
                    notes.append(Note(f"split over {len(result[0].shares)} nodes; not modelled here", group.group_id))
                if running:
                    preempts.append(Preempt(group.group_id, 0, reason="synergy: lease not renewed"))
                continue
            alloc, _ = result
            want = Resources(round(alloc.cpus), round(alloc.mem * 1024), {"gpu": profile.demand.gpus})
            node = names[alloc.shares[0][0]]
            if running and variant.nodes == (node,) and variant.request == want:
                continue  # lease extended: same node, same CPUs and memory
            if running:
                preempts.append(Preempt(group.group_id, 0, reason="synergy: allocation changed"))
            starts.append(Start(group.group_id, kind, (node,), want, reason=f"synergy-{self.args.mechanism}"))
        return Plan(tuple(preempts + starts), tuple(notes))


def _pinned_aside(groups: list[Group], policy: SynergyPolicy, servers: Servers, names: list[str],
                  view: ClusterView) -> list[Group]:
    """The groups a round may re-allocate; a running one it cannot place (several nodes, a placement rule: started
    by the cycle's handover) keeps its nodes, and what it holds there is taken out of the round's servers first.
    Pending ones it cannot place are never shown to it (cycle/handover.py); they are left out here all the same."""
    index = {name: i for i, name in enumerate(names)}
    kept: list[Group] = []
    for group in groups:
        if can_place(policy, group.variants):
            kept.append(group)
            continue
        variant = group.running_variant()
        if variant is None:
            continue
        for name in variant.nodes:
            i = index.get(name)
            node = view.nodes.get(name)
            if i is None or node is None:
                continue
            held = variant.taken_on(node)
            servers.fg[i] = max(servers.fg[i] - held.gres_count("gpu"), 0.0)
            servers.fc[i] = max(servers.fc[i] - held.cpus, 0.0)
            servers.fm[i] = max(servers.fm[i] - held.mem_mb / 1024, 0.0)
    return kept


def _make(args: SynergyArgs) -> SynergyPolicy:
    return SynergyPolicy(args)


register("synergy", SynergyArgs)(_make)
