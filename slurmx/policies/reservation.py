"""EASY backfill's reservation for the head of the queue, as Slurm's backfill keeps one (pure).

When the oldest waiting group fits nowhere, it gets a reservation: the earliest time enough nodes of one of its
kinds (its node count) will have room for it, counting the running jobs' expected ends (start + estimate; a job
without an estimate never ends, as a job without a time limit in Slurm). Later groups may start now only where
they cannot delay that reservation: off the reserved nodes, or on one if they end before the reserved time (by
their own estimate) or fit beside the head in what the node will have then.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator
from dataclasses import dataclass, field

from slurmx.core.model import ClusterView, Group, KindName, Variant, expected_end
from slurmx.core.placement import ANYWHERE
from slurmx.core.resources import Resources

__all__ = ["Reservation", "Started", "reserve"]

# A job started by the plan being built: (node, request, expected end).
Started = tuple[str, Resources, float]


@dataclass
class Reservation:
    """The head's reserved nodes and time, and what each of them has to spare beside it then."""

    group_id: str
    at: float
    rooms: dict[str, Resources]  # reserved node -> its room at `at`, the head's request included
    request: Resources  # the head's, on each reserved node
    _spare: dict[str, Resources] = field(default_factory=dict, repr=False)  # worked out as nodes are asked

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(self.rooms)

    @property
    def spare(self) -> dict[str, Resources]:
        """Each reserved node's room at `at` once the head's request (and what backfill took) is set aside."""
        return {name: self._spare_of(name) for name in self.rooms}

    def _spare_of(self, node: str) -> Resources:
        spare = self._spare.get(node)
        if spare is None:
            spare = self._spare[node] = self.rooms[node] - self.request
        return spare

    def allows(self, node: str, request: Resources, end: float) -> bool:
        """Whether a job started now on `node`, ending at `end`, leaves the reservation intact."""
        if end <= self.at:
            return True
        room = self.rooms.get(node)
        if room is None:
            return True
        spare = self._spare.get(node)
        if spare is not None:
            return request.fits_in(spare)
        # A reserved node nothing was taken from yet: its spare is room - head, compared without building it (a
        # wide head reserves thousands of nodes, and a blocked queue asks of each of them at every decision).
        head = self.request
        if request.cpus + head.cpus > room.cpus or request.mem_mb + head.mem_mb > room.mem_mb:
            return False
        return all(count + head.gres.get(name, 0) <= room.gres.get(name, 0) for name, count in request.gres.items())

    def take(self, node: str, request: Resources, end: float) -> None:
        """A job `allows` admitted starts: what it holds past the reserved time comes out of the node's spare."""
        if end > self.at and node in self.rooms:
            self._spare[node] = self._spare_of(node) - request


def reserve(view: ClusterView, group: Group, taken: dict[str, Resources], started: list[Started],
            now: float) -> Reservation | None:
    """The earliest time, over `group`'s kinds in the site's order, at which as many nodes as its variant runs on
    will each have room for its request, and those nodes (the earliest first, by name on a tie); None when no
    kind has enough nodes that can ever hold it (or only nodes held by jobs that never end).
    `taken`: what the plan being built already handed out per node; `started`: those jobs, with their ends."""
    best: Reservation | None = None
    for kind in view.kinds:
        variant = group.variant(kind)
        if variant is None:
            continue
        request = variant.request
        chosen = _earliest_nodes(view, kind, variant, taken, started, now, math.inf if best is None else best.at)
        if chosen is not None and (best is None or chosen[-1][0] < best.at):
            if variant.placement.exclusive:  # it holds whole nodes: what the first of them has
                request = view.nodes[chosen[0][1]].capacity
            # Each node's room is taken at its own earliest time: no more than it has at `at` (safe for backfill).
            best = Reservation(group.group_id, chosen[-1][0], {name: room for _, name, room in chosen}, request)
    return best


def _earliest_nodes(view: ClusterView, kind: KindName, variant: Variant, taken: dict[str, Resources],
                    started: list[Started], now: float, before: float) -> list[tuple[float, str, Resources]] | None:
    """The `variant.node_count` nodes of `kind` its placement admits with room for its request soonest, as (time,
    name, room then), earliest first and by name on a tie; None unless they all have it before `before`.

    The nodes with room now first; then the running jobs of the kind in the order they are expected to end (and
    the plan's own starts), each adding its request back to its nodes, until `count` nodes have room and no
    other job ends at that same time. Only the jobs up to that time are read, not every running job. An exclusive
    variant needs a node's whole capacity."""
    request, count, placement = variant.request, variant.node_count, variant.placement
    anywhere = placement is ANYWHERE
    names = view.node_names_of_kind(kind)
    if not anywhere:  # only the nodes it may take (features, -w, -x), whatever runs on them now
        node_map = view.nodes
        names = frozenset(n for n in names if placement.admits(n, node_map[n].features))
    found: list[tuple[float, str, Resources]] = []
    settled: set[str] = set()  # nodes found, or that can never hold the request
    for name in view.fitting_node_names(kind, request):
        free = _room_now(view, name, taken)
        if not anywhere and (name not in names or not _need(view, name, variant).fits_in(free)):
            continue
        if name in taken and not request.fits_in(free):
            continue
        found.append((now, name, free))
        settled.add(name)
    if anywhere and not request.gres:
        return _walk_counts(view, kind, names, variant, taken, started, now, before, found, settled)
    rooms: dict[str, Resources] = {}
    last = now
    for end, nodes, freed in _returns(view, kind, names, started, now):
        at = max(end, now)  # a job past its estimate is expected back any moment, not in the past
        if at != last and len(found) >= count:
            break  # every job ending at the time the last node was found has been counted
        if at >= before or math.isinf(at):
            return None
        last = at
        for name in nodes:
            if name in settled or name not in names:
                continue
            room = rooms.get(name)
            if room is None:
                node = view.nodes[name]
                if not node.is_usable or not request.fits_in(node.capacity):
                    settled.add(name)
                    continue
                room = _room_now(view, name, taken)
            room = room + freed
            if (request if anywhere else _need(view, name, variant)).fits_in(room):
                found.append((at, name, room))
                settled.add(name)
            else:
                rooms[name] = room
    if len(found) < count:
        return None
    found.sort()  # by time, then name (names are unique: rooms are never compared)
    return found[:count]


def _walk_counts(view: ClusterView, kind: KindName, names: frozenset[str], variant: Variant,
                 taken: dict[str, Resources], started: list[Started], now: float, before: float,
                 found: list[tuple[float, str, Resources]], settled: set[str],
                 ) -> list[tuple[float, str, Resources]] | None:
    """`_earliest_nodes`' walk for a request of CPUs and memory alone that may run anywhere (the common case):
    the same steps on two integers per node instead of a `Resources` built per node and job (a wide head
    walks thousands of nodes at every pass). Each node keeps what came back to it, so the room of a node found
    is summed once, GRES included, exactly as the general walk adds it up."""
    request, count = variant.request, variant.node_count
    cpus, mem = request.cpus, request.mem_mb
    node_map = view.nodes
    rooms: dict[str, list[Resources]] = {}  # a node not yet found: its room now, then each request freed on it
    sums: dict[str, tuple[int, int]] = {}  # and the CPUs and memory those add up to
    late: list[tuple[float, str]] = []  # nodes found by the walk, at the time they have room
    last = now
    for end, nodes, freed in _returns(view, kind, names, started, now):
        at = max(end, now)
        if at != last and len(found) + len(late) >= count:
            break
        if at >= before or math.isinf(at):
            return None
        last = at
        freed_cpus, freed_mem = freed.cpus, freed.mem_mb
        for name in nodes:
            if name in settled or name not in names:
                continue
            held = sums.get(name)
            if held is None:
                node = node_map[name]
                if not node.is_usable or not request.fits_in(node.capacity):
                    settled.add(name)
                    continue
                room = _room_now(view, name, taken)
                rooms[name] = [room]
                held = (room.cpus, room.mem_mb)
            room_cpus, room_mem = held[0] + freed_cpus, held[1] + freed_mem
            rooms[name].append(freed)
            if cpus <= room_cpus and mem <= room_mem:
                late.append((at, name))
                settled.add(name)
            else:
                sums[name] = (room_cpus, room_mem)
    if len(found) + len(late) < count:
        return None
    now_rooms = {name: room for _, name, room in found}
    late.extend((at, name) for at, name, _ in found)
    late.sort()  # by time, then name, as the general walk sorts
    chosen: list[tuple[float, str, Resources]] = []
    for at, name in late[:count]:
        then = now_rooms.get(name)
        if then is None:
            parts = rooms[name]
            then = parts[0]
            for part in parts[1:]:
                then = then + part
        chosen.append((at, name, then))
    return chosen


def _need(view: ClusterView, name: str, variant: Variant) -> Resources:
    """What the variant needs free on node `name`: its request, or the whole node when exclusive."""
    return view.nodes[name].capacity if variant.placement.exclusive else variant.request


def _room_now(view: ClusterView, name: str, taken: dict[str, Resources]) -> Resources:
    """A node's free room less what the plan being built has already started on it."""
    held = taken.get(name)
    free = view.nodes[name].free
    return free if held is None else free - held


def _returns(view: ClusterView, kind: KindName, names: frozenset[str], started: list[Started],
             now: float) -> Iterator[tuple[float, tuple[str, ...], Resources]]:
    """(end, nodes, request) of the running jobs on `kind`'s nodes by expected end, merged with the plan's own
    starts there (after the running jobs ending at the same time): when each job's room is expected back."""
    running = ((expected_end(v.start_time, v.estimate_s, now), v.nodes, v.request)
               for v in (g.running_variant() for g in view.running_by_expected_end(kind)) if v is not None)
    own = sorted(((end, (node,), request) for node, request, end in started if node in names), key=lambda e: e[0])
    if not own:
        return running
    return heapq.merge(running, own, key=lambda e: e[0])
