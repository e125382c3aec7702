"""What a driver of the cycle provides: a view of its world, and one handler per action type.

The handler table is checked complete when a backend is built (the model is Slurm's plugin operation tables): a
new action type cannot be handled by one driver and forgotten by the other. Each handler first asks
`cycle.admissible` whether an action applies to its group as the backend knows it, and ends the ones that do not
with that verdict's outcome: the same rule, and the same outcome, in every cycle of both backends.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, get_args

from slurmx.core.actions import Action, Plan
from slurmx.core.model import ClusterView
from slurmx.cycle.isolate import Quarantine
from slurmx.cycle.log import Outcome

__all__ = ["ACTION_TYPES", "Backend", "Handler", "HandlerTable", "checked_handlers"]

ACTION_TYPES: tuple[type[Action], ...] = get_args(Action)

# A handler applies a batch of actions of its type at `now`, returning one outcome per action, in order.
Handler = Callable[[Sequence[Any], float], Sequence[Outcome]]
HandlerTable = Mapping[type[Action], Handler]


class Backend(Protocol):
    """One world the cycle decides for: Slurm through slurmxd, or the simulator's model cluster."""

    @property
    def name(self) -> str: ...

    @property
    def handlers(self) -> HandlerTable:
        """One handler per action type, built with `checked_handlers`."""
        ...

    def observe(self, now: float) -> ClusterView:
        """The policy's snapshot of the world at `now`, never older than the last action applied."""
        ...

    def take_notes(self, plan: Plan, now: float) -> None:
        """What the policy said it could not do this round (audited by the daemon, counted by the simulator)."""
        ...

    @property
    def quarantine(self) -> Quarantine:
        """The groups set aside (`cycle.isolate`), kept by the backend from one decision to the next."""
        ...

    @property
    def fatal(self) -> tuple[type[BaseException], ...]:
        """The exceptions that end a decision rather than blame a group (slurmctld gone, the watchdog's alarm):
        declared by the backend, since `cycle` imports neither the daemon nor the simulator."""
        ...

    def set_aside(self, group_id: str, reason: str, now: float) -> None:
        """The policy failed on this group's data (`reason`: the exception, one line): reported once, the group
        is not shown to the policy again until its entry in the view changes."""
        ...

    def fell_back(self, reason: str, now: float) -> None:
        """The policy failed with no group to blame (or past the search's cap): this decision's plan is strict
        FIFO's, or empty."""
        ...


def checked_handlers(backend: str, table: Mapping[type[Action], Handler]) -> dict[type[Action], Handler]:
    """`table` as a dict, after checking it handles every action type and nothing else (a `TypeError` otherwise:
    a programming error, raised when the backend is built, not at the first plan that uses the action)."""
    missing = [t.__name__ for t in ACTION_TYPES if t not in table]
    unknown = [getattr(t, "__name__", repr(t)) for t in table if t not in ACTION_TYPES]
    if missing or unknown:
        parts = ([f"no handler for {', '.join(missing)}"] if missing else []) + \
            ([f"handlers for unknown actions {', '.join(unknown)}"] if unknown else [])
        raise TypeError(f"backend {backend}: {'; '.join(parts)}")
    return dict(table)
