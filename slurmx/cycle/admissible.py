"""Whether an action applies to the world as it is: one rule for both backends.

A policy may name a group that has left, preempt one that does not run, start a variant that is not waiting. Slurm
refuses such a command, so slurmxd must refuse it too, and the simulator must refuse it exactly there (never raise:
an exception in a backend means a bug in the backend, not in the plan). Each backend describes a group by the few
facts both of them know (`Standing`) and asks `admissible` before it applies an action; only an `ADMITTED` action
is carried out, anything else ends in the verdict's outcome. What happens to an admitted action (the Slurm calls,
the model's state changes) stays the backend's.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from slurmx.core.actions import Action, Cancel, Hold, Preempt, Release, Resize, SetPriority, Start
from slurmx.cycle.log import REFUSED, REPEATED, Outcome, Status

__all__ = ["Lookup", "Standing", "Verdict", "admissible", "verdict_outcome"]


@dataclass(frozen=True, slots=True)
class Standing:
    """What both backends know of a group in the view, as the actions applied so far this decision left it.

    `waiting`: the kinds of its variants that wait to run. `running`: a variant holds nodes. `in_grace`: the
    running variant was signalled (preempted or resized) and waits for its requeue. `starting`: a start of it is
    under way (released on Slurm, not seen running yet; the simulator starts at once and never has one).
    `size`: the running variant's (cpus, mem_mb).
    """

    waiting: frozenset[str] = frozenset()
    running: bool = False
    in_grace: bool = False
    starting: bool = False
    size: tuple[int, int] | None = None


# group id -> its standing, or None for a group not in the view.
Lookup = Callable[[str], "Standing | None"]


class Verdict(enum.Enum):
    """`ADMITTED`, or why not: each other verdict is a refusal (the action cannot apply) or a repeat (what it asks
    is under way already, from an earlier decision or earlier in this plan)."""

    ADMITTED = "admitted"
    NOT_IN_VIEW = "not a group in the view"
    NO_WAITING_VARIANT = "no waiting variant"
    NO_WAITING_KIND = "no waiting variant of that kind"
    NOT_RUNNING = "the group is not running"
    NEGATIVE_GRACE = "a negative grace period"
    BENEFICIARY_NOT_WAITING = "its beneficiary is not a waiting group in the view"
    ALREADY_STARTING = "already being started"
    ALREADY_IN_GRACE = "already being preempted or resized"
    ALREADY_OF_SIZE = "already of that size"

    @property
    def status(self) -> Status:
        """The outcome's status: refused or repeated (`ADMITTED` has none until the backend applies it)."""
        if self is Verdict.ADMITTED:
            raise ValueError("an admitted action's outcome is the backend's")
        return REPEATED if self in _REPEATS else REFUSED


_REPEATS = frozenset({Verdict.ALREADY_STARTING, Verdict.ALREADY_IN_GRACE, Verdict.ALREADY_OF_SIZE})


def verdict_outcome(verdict: Verdict, action: Action) -> Outcome:
    """The outcome of an action `admissible` did not admit (the detail names the kind a start asked for)."""
    if verdict is Verdict.NO_WAITING_KIND and isinstance(action, Start):
        return Outcome(verdict.status, f"no waiting {action.kind} variant")
    if verdict is Verdict.ALREADY_IN_GRACE or verdict is Verdict.ALREADY_STARTING:
        return Outcome(verdict.status)  # the plain repeat both backends always reported
    return Outcome(verdict.status, verdict.value)


def admissible(action: Action, lookup: Lookup) -> Verdict:
    """Whether `action` applies to its group as `lookup` describes it (pure: it reads, never changes)."""
    group = lookup(action.group_id)
    if group is None:
        return Verdict.NOT_IN_VIEW
    if isinstance(action, Start):
        if action.kind not in group.waiting:
            return Verdict.NO_WAITING_KIND
        return Verdict.ALREADY_STARTING if group.starting else Verdict.ADMITTED
    if isinstance(action, Preempt):
        if action.grace_s < 0:
            return Verdict.NEGATIVE_GRACE
        if group.in_grace:
            return Verdict.ALREADY_IN_GRACE
        if not group.running:
            return Verdict.NOT_RUNNING
        if action.beneficiary is not None:  # room is freed for a group that waits for it, or for none
            beneficiary = lookup(action.beneficiary)
            if beneficiary is None or not beneficiary.waiting:
                return Verdict.BENEFICIARY_NOT_WAITING
        return Verdict.ADMITTED
    if isinstance(action, Resize):
        if group.in_grace:
            return Verdict.ALREADY_IN_GRACE
        if group.running:
            return Verdict.ALREADY_OF_SIZE if group.size == (action.cpus, action.mem_mb) else Verdict.ADMITTED
        return Verdict.ADMITTED if group.waiting else Verdict.NO_WAITING_VARIANT
    if isinstance(action, SetPriority | Hold | Release):
        return Verdict.ADMITTED if group.waiting else Verdict.NO_WAITING_VARIANT
    if isinstance(action, Cancel):
        return Verdict.ADMITTED
    raise TypeError(f"admissible: {action!r} is not an action")
