"""EASY backfill's reservation for the head of the queue, as Slurm's backfill keeps one (pure).

When the oldest waiting group fits nowhere, it gets a reservation: the earliest time enough nodes of one of its
kinds (its node count) will have room for it, counting the running jobs' expected ends (start + estimate; a job
without an estimate never ends, as a job without a time limit in Slurm). Later groups may start now only where
they cannot delay that reservation: off the reserved nodes, or on one if they end before the reserved time (by
their own estimate) or fit beside the head in what the node will have then.
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
    """The head's reserved nodes and time, and what each of them has to spare beside it then."""

    group_id: str
    at: float
    spare: dict[str, Resources]  # reserved node -> its room at `at` once the head's request is set aside

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(self.spare)

    def allows(self, node: str, request: Resources, end: float) -> bool:
        """Whether a job started now on `node`, ending at `end`, leaves the reservation intact."""
        spare = self.spare.get(node)
        return spare is None or end <= self.at or request.fits_in(spare)

    def take(self, node: str, request: Resources, end: float) -> None:
        """A job `allows` admitted starts: what it holds past the reserved time comes out of the node's spare."""
        spare = self.spare.get(node)
        if spare is not None and end > self.at:
            self.spare[node] = spare - request


def expected_end(start: float | None, estimate: float | None, now: float) -> float:
    """When a job is expected to end: its start plus its estimate; never when either is unknown."""
    if estimate is None or not math.isfinite(estimate):
        return math.inf
    return (now if start is None else start) + estimate


def reserve(view: ClusterView, group: Group, taken: dict[str, Resources], started: list[Started],
            now: float) -> Reservation | None:
    """The earliest time, over `group`'s kinds in the site's order, at which as many nodes as its variant runs on
    will each have room for its request, and those nodes (the earliest first, by name on a tie); None when no
    kind has enough nodes that can ever hold it (or only nodes held by jobs that never end).
    `taken`: what the plan being built already handed out per node; `started`: those jobs, with their ends."""
    ends: dict[str, list[tuple[float, Resources]]] | None = None
    best: Reservation | None = None
    for kind in view.kinds:
        variant = group.variant(kind)
        if variant is None:
            continue
        request = variant.request
        found: list[tuple[float, int, str, Resources]] = []  # (time, order, node, room then)
        for order, node in enumerate(view.nodes_of_kind(kind)):
            if not node.is_usable or not request.fits_in(node.capacity):
                continue
            if ends is None:
                ends = _ends_by_node(view, started, now)
            held = taken.get(node.name)
            free = node.free if held is None else node.free - held
            earliest = _earliest(free, ends.get(node.name, []), request, now)
            if earliest is not None:
                found.append((earliest[0], order, node.name, earliest[1]))
        count = variant.node_count
        if len(found) < count:
            continue
        chosen = sorted(found)[:count]
        at = chosen[-1][0]
        if best is None or at < best.at:
            # Each node's room is taken at its own earliest time: no more than it has at `at` (safe for backfill).
            best = Reservation(group.group_id, at, {name: room - request for _, _, name, room in chosen})
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
