"""The closed set of actions a policy may return, and the `Plan` that carries them.

A policy never talks to Slurm: it returns a plan, and the enforcer turns each action into Slurm calls.
Keeping the set closed lets the enforcer be exhaustive and lets tests compare plans as plain values.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from typing import TypeVar

from slurmx.core.resources import Resources

__all__ = ["Action", "Cancel", "Hold", "Note", "Plan", "Preempt", "Release", "Resize", "SetPriority", "Start"]


def _canonical(value: object) -> object:
    """JSON-safe, order-independent form of an action field."""
    if isinstance(value, Resources):
        return value.dims()
    if isinstance(value, tuple):
        return [_canonical(v) for v in value]
    return value


class _ActionId:
    """Mixin: `action_id`, a short hash of the action's type and fields.

    `reason` is left out on purpose: the same decision explained in other words is the same action,
    which is what lets the enforcer skip actions it has already applied.
    """

    __slots__ = ()

    @property
    def action_id(self) -> str:
        names = [f.name for f in fields(self) if f.name != "reason"]  # type: ignore[arg-type]
        payload = {name: _canonical(getattr(self, name)) for name in names}
        text = json.dumps([type(self).__name__, payload], sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass(frozen=True, slots=True)
class Start(_ActionId):
    """Let the `kind` variant of a group run (optionally pinned to nodes); its siblings get cancelled."""

    group_id: str
    kind: str
    nodes: tuple[str, ...] = ()
    alloc: Resources | None = None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Preempt(_ActionId):
    """Signal the running variant and requeue it after `grace_s`, freeing room for `beneficiary`."""

    group_id: str
    grace_s: int
    beneficiary: str | None = None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Resize(_ActionId):
    """Change the request of a pending group's variants (e.g. right-sizing after profiling)."""

    group_id: str
    cpus: int
    mem_mb: int
    reason: str = ""


@dataclass(frozen=True, slots=True)
class SetPriority(_ActionId):
    """Set the Slurm priority of a group's pending variants (ordering without starting them)."""

    group_id: str
    priority: int
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Hold(_ActionId):
    """Keep a group's variants from being started by Slurm itself."""

    group_id: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Release(_ActionId):
    """Undo `Hold`: hand the group back to Slurm's own scheduling."""

    group_id: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Cancel(_ActionId):
    """Cancel every variant of a group."""

    group_id: str
    reason: str = ""


Action = Start | Preempt | Resize | SetPriority | Hold | Release | Cancel

A = TypeVar("A", Start, Preempt, Resize, SetPriority, Hold, Release, Cancel)


@dataclass(frozen=True, slots=True)
class Note:
    """Why a policy did not do something, as a value: the group it is about ("" for the plan as a whole), what it
    says, and an optional `kind` for notes that are counted (e.g. FitGpp's random fallback). The daemon audits a
    note against its group and the simulator counts notes by their text, so neither parses the other's wording.

    Written `kind: group: text` (the parts present), the form the audit log and `count_notes` prefixes read."""

    text: str
    group_id: str = ""
    kind: str = ""

    def __str__(self) -> str:
        return ": ".join(part for part in (self.kind, self.group_id, self.text) if part)


@dataclass(frozen=True, slots=True)
class Plan:
    """What a policy wants done this round, in order, plus notes explaining what it could not do.

    `memo` is opaque state the policy keeps for its next decision (picklable; None keeps nothing): the cycle hands
    it back as that decision's `ClusterView.memo`, in the simulator and through the daemon alike. The daemon holds
    it in memory only, so a restart loses it: a policy must decide correctly from an empty memo.
    """

    actions: tuple[Action, ...] = ()
    notes: tuple[Note, ...] = ()
    memo: object = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "actions", tuple(self.actions))
        # A plain string (a policy written before notes were typed) is a note about the plan as a whole: it is
        # never parsed for a group.
        object.__setattr__(self, "notes", tuple(n if n.__class__ is Note else Note(str(n)) for n in self.notes))

    def __iter__(self) -> Iterator[Action]:
        return iter(self.actions)

    def __len__(self) -> int:
        return len(self.actions)

    def of_type(self, cls: type[A]) -> tuple[A, ...]:
        return tuple(a for a in self.actions if isinstance(a, cls))
