"""Baseline policies from the papers. FIFO here; the rest arrive with their papers' issues."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from slurmx.core.actions import Plan, Start
from slurmx.core.model import ClusterView, Group
from slurmx.core.resources import Resources
from slurmx.policies.base import PolicyArgs, register

__all__ = ["Fifo", "FifoArgs"]


class FifoArgs(PolicyArgs):
    """`backfill`: let later jobs start while the head of the queue waits (strict FIFO when false)."""

    backfill: bool = False


@dataclass(frozen=True)
class Fifo:
    """First come, first served: the oldest pending group starts on the first of its kinds (in the site's
    order) with a node that fits it; without backfill, nothing behind it starts until it does."""

    args: FifoArgs
    name: ClassVar[str] = "fifo"

    def schedule(self, view: ClusterView, now: float) -> Plan:
        taken: dict[str, Resources] = {}  # what this plan has already handed out, by node
        actions: list[Start] = []
        notes: list[str] = []
        for group in view.pending_groups():
            placed = self._place(view, group, taken)
            if placed is None:
                notes.append(f"{group.group_id}: no node fits any variant")
                if not self.args.backfill:
                    break
                continue
            kind, node, request = placed
            held = taken.get(node)
            taken[node] = request if held is None else held + request
            actions.append(Start(group.group_id, kind, (node,), request, reason="fifo: oldest pending group"))
        return Plan(tuple(actions), tuple(notes))

    @staticmethod
    def _place(view: ClusterView, group: Group, taken: dict[str, Resources]) -> tuple[str, str, Resources] | None:
        for kind in view.kinds:
            variant = group.variant(kind)
            if variant is None:
                continue
            request = variant.request
            # Names fit the snapshot; a node this plan already started a job on is checked against what is left.
            # Only then is its `Node` read: most plans start one job, and a driver builds a node when it is read.
            for name in view.fitting_node_names(kind, request):
                held = taken.get(name)
                if held is None or (held + request).fits_in(view.nodes[name].free):
                    return kind, name, request
        return None


register("fifo", FifoArgs)(Fifo)
