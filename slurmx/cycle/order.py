"""The one rule for the order in which a plan's actions take effect, on Slurm and in the simulator.

Every action other than `Start` takes effect first, in the plan's order, then every `Start`, in the plan's order:
preemptions, cancellations, resizes and holds change or free what the starts may use, and the daemon releases a
plan's starts together (one `scontrol release` for all of them). Consecutive actions of one type form one batch,
handed to the backend's handler together.
"""

from __future__ import annotations

from slurmx.core.actions import Action, Plan, Start

__all__ = ["effect_order"]


def effect_order(plan: Plan) -> list[tuple[type[Action], list[Action]]]:
    """The plan's actions as (type, batch) in the order they take effect."""
    if not plan.actions:
        return []  # most decisions of a long queue: the head still does not fit
    others = [a for a in plan.actions if not isinstance(a, Start)]
    starts = [a for a in plan.actions if isinstance(a, Start)]
    batches: list[tuple[type[Action], list[Action]]] = []
    for action in others:
        kind = type(action)
        if batches and batches[-1][0] is kind:
            batches[-1][1].append(action)
        else:
            batches.append((kind, [action]))
    if starts:
        batches.append((Start, list(starts)))
    return batches
