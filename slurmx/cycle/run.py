"""`decide`: one observe -> schedule -> apply round over a backend; the only call of `policy.schedule`."""

from __future__ import annotations

import time
from dataclasses import dataclass

from slurmx.core.actions import Plan
from slurmx.cycle.backend import Backend
from slurmx.cycle.log import DecisionLog, Outcome, view_digest
from slurmx.cycle.order import effect_order
from slurmx.policies.base import Policy

__all__ = ["Decision", "PlanError", "decide"]


class PlanError(TypeError):
    """A policy returned something that is not a `Plan`."""


@dataclass(frozen=True, slots=True)
class Decision:
    plan: Plan
    outcomes: tuple[Outcome, ...]  # in effect order
    policy_s: float  # wall time inside `policy.schedule`


def decide(policy: Policy, backend: Backend, now: float, log: DecisionLog | None = None,
           number: int = 0) -> Decision:
    """Observe, let the policy plan, apply the plan in effect order; `number` is this decision's count."""
    view = backend.observe(now)
    digest = view_digest(view, log.views if log.keep_views else None) if log is not None and log.digest_views else ""
    if log is not None:
        log.decided(now, number, digest)
    began = time.perf_counter()
    plan = policy.schedule(view, now)
    policy_s = time.perf_counter() - began
    del view  # usually the last reference: a backend may then change what the view lent without copying it
    if not isinstance(plan, Plan):
        raise PlanError(f"t={now:g}: policy {policy.name} returned {type(plan).__name__}, not a Plan")
    backend.take_notes(plan, now)
    outcomes: list[Outcome] = []
    for kind, batch in effect_order(plan):
        handler = backend.handlers.get(kind)
        if handler is None:
            raise PlanError(f"t={now:g}: policy {policy.name} returned {batch[0]!r}, which is not an action; "
                            "plans hold Start, Preempt, Resize, SetPriority, Hold, Release and Cancel only")
        done = list(handler(batch, now))
        if len(done) != len(batch):
            raise RuntimeError(f"backend {backend.name}: {kind.__name__} handler returned {len(done)} outcomes "
                               f"for {len(batch)} actions")
        if log is not None:
            log.add(now, number, digest, batch, done)
        outcomes += done
    return Decision(plan, tuple(outcomes), policy_s)
