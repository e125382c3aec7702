"""EASY backfill's reservation for the head of the queue, as Slurm's backfill keeps one (pure).

When the oldest waiting group fits nowhere, it gets a reservation: the earliest time a node of one of its kinds
will have room for it, counting the running jobs' expected ends (start + estimate; a job without an estimate
never ends, as a job without a time limit in Slurm). Later groups may start now only where they cannot delay
that reservation: on another node, or on the reserved node if they end before the reserved time (by their own
estimate) or fit beside the head in what the node will have then.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from slurmx.core.model import ClusterView, Group
from slurmx.core.resources import Resources

__all__ = ["Reservation", "Started", "reserve"]

# A job started by the plan being built: (node, request, expected end).
Started = tuple[str, Resources, float]


@dataclass
class Reservation:
    """The head's reserved node and time, and what the node has to spare beside it then."""

    group_id: str
    node: str
    at: float
    spare: Resources  # the node's room at `at` once the head's request is set aside

    def allows(self, node: str, request: Resources, end: float) -> bool:
        """Whether a job started now on `node`, ending at `end`, leaves the reservation intact; takes its room."""
        if node != self.node or end <= self.at:
            return True
        if not request.fits_in(self.spare):
            return False
        self.spare = self.spare - request
        return True


def expected_end(start: float | None, estimate: float | None, now: float) -> float:
    """When a job is expected to end: its start plus its estimate; never when either is unknown."""
    if estimate is None or not math.isfinite(estimate):
        return math.inf
    return (now if start is None else start) + estimate


def reserve(view: ClusterView, group: Group, taken: dict[str, Resources], started: list[Started],
            now: float) -> Reservation | None:
    """The earliest (time, node) where `group` will fit, over its kinds in the site's order (first node on a
    tie); None when no node of its kinds can ever hold it or every one is held by jobs that never end.
    `taken`: what the plan being built already handed out per node; `started`: those jobs, with their ends."""
    ends: dict[str, list[tuple[float, Resources]]] | None = None
    best: Reservation | None = None
    for kind in view.kinds:
        variant = group.variant(kind)
        if variant is None:
            continue
        request = variant.request
        for node in view.nodes_of_kind(kind):
            if not node.is_usable or not request.fits_in(node.capacity):
                continue
            if ends is None:
                ends = _ends_by_node(view, started, now)
            held = taken.get(node.name)
            free = node.free if held is None else node.free - held
            found = _earliest(free, ends.get(node.name, []), request, now)
            if found is not None and (best is None or found[0] < best.at):
                best = Reservation(group.group_id, node.name, found[0], found[1] - request)
    return best


def _earliest(free: Resources, ends: list[tuple[float, Resources]], request: Resources,
              now: float) -> tuple[float, Resources] | None:
    """(time, room then) of the first moment the node's room holds `request`, as its jobs end in order."""
    room = free
    if request.fits_in(room):
        return now, room
    for end, freed in sorted(ends, key=lambda e: e[0]):
        if math.isinf(end):
            return None
        room = room + freed
        if request.fits_in(room):
            return end, room
    return None


def _ends_by_node(view: ClusterView, started: list[Started], now: float) -> dict[str, list[tuple[float, Resources]]]:
    """Each node's running jobs (and the plan's own starts, whose room `Node.free` does not show) as (end, room).
    A job on several nodes frees its request on each."""
    ends: dict[str, list[tuple[float, Resources]]] = {}
    for group in view.running_groups():
        variant = group.running_variant()
        if variant is None:
            continue
        end = expected_end(variant.start_time, variant.estimate_s, now)
        for name in variant.nodes:
            ends.setdefault(name, []).append((end, variant.request))
    for name, request, end in started:
        ends.setdefault(name, []).append((end, request))
    return ends
