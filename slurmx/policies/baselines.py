"""Baseline policies from the papers. FIFO here; the rest arrive with their papers' issues."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from slurmx.core.actions import Note, Plan, Start
from slurmx.core.backfill_defaults import BF_INTERVAL_S, BF_MAX_JOB_TEST, BF_RESOLUTION_S, BF_WINDOW_S
from slurmx.core.model import ClusterView, Group, KindName, Variant, expected_end
from slurmx.core.placement import ANYWHERE, Placement
from slurmx.core.resources import Resources
from slurmx.policies.base import BackfillPasses, Capabilities, PolicyArgs, register
from slurmx.policies.reservation import Reservation, Started, reserve

__all__ = ["Fifo", "FifoArgs"]

_Shape = tuple[str, Resources, Placement]  # (kind, request per node, where it may run): whatever the node count


class FifoArgs(PolicyArgs):
    """`backfill`: whether later groups may start while the oldest waits. `false`: strict FIFO; `true` or `easy`:
    EASY backfill as Slurm's, around a reservation for the oldest (policies/reservation.py); `greedy`: any later
    group that fits starts, however long it delays the oldest. `backfill_depth`: how many groups behind a blocked
    oldest one each decision looks at (Slurm's `bf_max_job_test`)."""

    backfill: Literal["none", "easy", "greedy"] = "none"
    backfill_depth: int = Field(BF_MAX_JOB_TEST, ge=1)
    # Slurm's cadence (`cadence: slurm`): backfill passes every `backfill_interval_s` (bf_interval), strict FIFO
    # (Slurm's main scheduler) at the events between them; reservations only within `backfill_window_s`
    # (bf_window) of now, their times rounded up to `backfill_resolution_s` (bf_resolution). Unset: Slurm's
    # defaults (30 s, 1 day, 60 s). `every_decision`: a backfill pass at every decision (the model until now).
    cadence: Literal["every_decision", "slurm"] = "every_decision"
    backfill_interval_s: float | None = Field(None, ge=1, allow_inf_nan=False)  # Slurm's least: a tick a second
    backfill_window_s: float | None = Field(None, gt=0, allow_inf_nan=False)
    backfill_resolution_s: float | None = Field(None, ge=0, allow_inf_nan=False)

    @field_validator("backfill", mode="before")
    @classmethod
    def _booleans(cls, value: object) -> object:
        return {False: "none", True: "easy"}.get(value, value) if isinstance(value, bool) else value

    @model_validator(mode="after")
    def _cadence_knobs(self) -> FifoArgs:
        knobs = [k for k in ("backfill_interval_s", "backfill_window_s", "backfill_resolution_s")
                 if getattr(self, k) is not None]
        if knobs and self.cadence != "slurm":
            raise ValueError(f"{', '.join(knobs)} set a backfill cadence: add `cadence: slurm` (or drop them)")
        return self

    @property
    def interval_s(self) -> float:
        return BF_INTERVAL_S if self.backfill_interval_s is None else self.backfill_interval_s

    @property
    def window_s(self) -> float:
        return BF_WINDOW_S if self.backfill_window_s is None else self.backfill_window_s

    @property
    def resolution_s(self) -> float:
        return BF_RESOLUTION_S if self.backfill_resolution_s is None else self.backfill_resolution_s



@dataclass(frozen=True)
class Fifo:
    """First come, first served: the oldest pending group starts on the first of its kinds (in the site's
    order) with enough nodes that fit it (its node count, all at once); without backfill, nothing behind it
    starts until it does."""

    args: FifoArgs
    name: ClassVar[str] = "fifo"

    @cached_property
    def capabilities(self) -> Capabilities:
        """A job starts on as many nodes as its variant runs on, only where its placement admits (features, -w,
        -x, whole nodes); no profiled estimates. Strict FIFO waits for release: with groups left waiting, the
        oldest of them fits nowhere, and only room given back (or an older group appearing) can change that.
        Backfill reads the head and at most `backfill_depth` groups behind it: when none of them started, none
        can until room is given back or time moves a reservation (a job past its expected end makes it `now`;
        otherwise it stays where it was, and a later start only ends later)."""
        strict = self.args.backfill == "none"
        return Capabilities(profiled=False, max_nodes=None, places_constraints=True, waits_for_release=strict,
                            queue_window=None if strict else self.args.backfill_depth + 1,
                            backfill_passes=self._passes())

    def _passes(self) -> BackfillPasses | None:
        """Under Slurm's cadence, a backfill pass (this policy) every `bf_interval`, and between passes Slurm's
        main scheduler: the same FIFO without backfill, which starts groups in order until one fits nowhere."""
        args = self.args
        if args.cadence != "slurm" or args.backfill == "none":
            return None
        return BackfillPasses(args.interval_s, Fifo(args.model_copy(update={
            "backfill": "none", "cadence": "every_decision", "backfill_interval_s": None, "backfill_window_s": None,
            "backfill_resolution_s": None})))

    def schedule(self, view: ClusterView, now: float) -> Plan:
        taken: dict[str, Resources] = {}  # what this plan has already handed out, by node
        started: list[Started] = []  # and to whom, with the expected ends (for a reservation)
        actions: list[Start] = []
        notes: list[Note] = []
        mode = self.args.backfill
        allowed: Reservation | None = None  # EASY: the head's reservation, which later starts must leave intact
        at = math.inf  # the reservation's time: a group ending by then cannot delay it
        blocked = False
        looked = 0
        # Shapes (kind, request per node, placement) that found too few nodes in this plan, unconstrained or past
        # the reservation, with how many they found: room only shrinks as the plan starts jobs, so a later group
        # of the same shape needing more nodes than that fails alike, whatever its own node count (Curie's wide
        # jobs all ask whole nodes and differ only in how many: one scan per plan answers them all).
        misses: tuple[dict[int, int], dict[int, int]] = ({}, {})
        missed, missed_late = misses
        kinds = view.kinds
        depth = self.args.backfill_depth
        for group in view.pending_groups():
            if blocked:
                looked += 1
                if looked > depth:
                    break
                known = _KNOWN.get(id(group))  # inlined: this loop is the busiest of a long-queue simulation
                if known is None or known[0] is not group or known[1] is not kinds:
                    known = _know(group, kinds)
                shapes = known[2]
                for _, variant, shape, estimate in shapes:
                    count = variant.node_count
                    if count <= missed.get(shape, count) and (count <= missed_late.get(shape, count)
                                                              or now + estimate <= at):
                        break  # a shape not yet refused for this many nodes: placed below
                else:
                    notes.append(known[3])  # as _place would find, without reading a node
                    continue
            else:
                shapes = _shapes_of(group, kinds)  # the head (and what starts before it): read once, not kept
            placed = self._place(view, shapes, taken, allowed, now, misses)
            if placed is None:
                notes.append(_no_room(group))
                if mode == "none":
                    break
                if mode == "easy" and not blocked:
                    reservation = reserve(view, group, taken, started, now)
                    if reservation is not None and self.args.cadence == "slurm":
                        reservation = _as_slurm_keeps(reservation, now, self.args)
                    if reservation is not None:
                        reserved = reservation.nodes
                        more = f" and {len(reserved) - 4:,} more" if len(reserved) > 4 else ""
                        notes.append(Note(f"reserved {','.join(reserved[:4])}{more} at t={reservation.at:g}",
                                          group.group_id))
                        allowed = reservation
                        at = reservation.at
                blocked = True
                continue
            kind, nodes, request, variant = placed
            end = expected_end(None, variant.estimate_s, now)
            whole = variant.placement.exclusive
            for node in nodes:
                held = taken.get(node)
                took = view.nodes[node].capacity if whole else request  # an exclusive job holds the whole node
                taken[node] = took if held is None else held + took
                started.append((node, took, end))
                if allowed is not None:
                    allowed.take(node, took, end)
            reason = "fifo: oldest pending group" if not blocked else f"fifo: {mode} backfill"
            actions.append(Start(group.group_id, kind, nodes, request, reason=reason))
        return Plan(tuple(actions), tuple(notes))

    @staticmethod
    def _place(view: ClusterView, shapes: Shapes, taken: dict[str, Resources], allowed: Reservation | None,
               now: float, misses: tuple[dict[int, int], dict[int, int]],
               ) -> tuple[str, tuple[str, ...], Resources, Variant] | None:
        """The first kind (site order) whose first fitting nodes (by name) are enough for the variant's node
        count, all at once (a multi-node job starts on all its nodes or waits)."""
        for kind, variant, shape, estimate in shapes:
            request = variant.request
            count = variant.node_count
            end = now + estimate
            free = allowed is None or end <= allowed.at  # the reservation cannot refuse it anywhere
            if count > misses[0].get(shape, count) or (not free and count > misses[1].get(shape, count)):
                continue  # as many nodes or more than this shape found when it last failed: fails again
            chosen: list[str] = []
            placement = variant.placement
            anywhere = placement is ANYWHERE
            # Names fit the snapshot; a node this plan already started a job on is checked against what is left.
            # Only then is its `Node` read: most plans start one job, and a driver builds a node when it is read.
            for name in view.fitting_node_names(kind, request):
                held = taken.get(name)
                if not anywhere:
                    node = view.nodes[name]
                    if not variant.admits(node) or (placement.exclusive and held is not None):
                        continue
                    need = node.capacity if placement.exclusive else request
                else:
                    need = request
                if (held is None or held.fits_with(need, view.nodes[name].free)) and \
                        (allowed is None or allowed.allows(name, need, end)):
                    chosen.append(name)
                    if len(chosen) == count:
                        return kind, tuple(chosen), request, variant
            missed = misses[0 if free else 1]
            found = len(chosen)  # every node this shape may take, which only the plan's later starts can shrink
            if found < missed.get(shape, count):
                missed[shape] = found
        return None


def _as_slurm_keeps(reservation: Reservation, now: float, args: FifoArgs) -> Reservation | None:
    """Slurm's backfill plans `bf_window` ahead on a `bf_resolution` grid: a head whose start is further than the
    window has no reservation (later groups start as if it were not there); the reserved time is rounded up."""
    if reservation.at - now > args.window_s:
        return None
    step = args.resolution_s
    if step > 0:
        reservation.at = math.ceil(reservation.at / step) * step
    return reservation


# Per group (the same object while the driver has not changed it) and the site's kinds: its variants in the
# site's kind order, each with a number for its shape (never reused, so a decision's misses stay right across a
# clear) and its estimate (inf when unknown, as `expected_end` reads it), and its note when nothing fits.
# Behind a blocked head every decision reads up to `backfill_depth` groups; most fail on a shape already missed,
# decided from this alone. Entries hold their group and kinds, so an id is not reused while its entry lives;
# each memo is cleared when full.
Shapes = tuple[tuple[KindName, Variant, int, float], ...]
_KNOWN: dict[int, tuple[Group, Mapping[KindName, str], Shapes, Note]] = {}
_SHAPE_NUMBERS: dict[_Shape, int] = {}
_NEXT_NUMBER = itertools.count()
_MEMO_MAX = 4096  # groups held alive at most: the window `backfill_depth` reads, and what left it since


def _know(group: Group, kinds: Mapping[KindName, str]) -> tuple[Group, Mapping[KindName, str], Shapes, Note]:
    if len(_KNOWN) >= _MEMO_MAX:
        _KNOWN.clear()
    known = _KNOWN[id(group)] = (group, kinds, _shapes_of(group, kinds), _no_room(group))
    return known


def _no_room(group: Group) -> Note:
    return Note("no node fits any variant", group.group_id)


def _shapes_of(group: Group, kinds: Mapping[KindName, str]) -> Shapes:
    shapes: list[tuple[KindName, Variant, int, float]] = []
    for kind in kinds:
        variant = group.variant(kind)
        if variant is not None:
            shape = (kind, variant.request, variant.placement)
            number = _SHAPE_NUMBERS.get(shape)
            if number is None:
                if len(_SHAPE_NUMBERS) >= _MEMO_MAX:
                    _SHAPE_NUMBERS.clear()
                number = _SHAPE_NUMBERS[shape] = next(_NEXT_NUMBER)
            estimate = variant.estimate_s
            shapes.append((kind, variant, number,
                           estimate if estimate is not None and math.isfinite(estimate) else math.inf))
    return tuple(shapes)


register("fifo", FifoArgs)(Fifo)
