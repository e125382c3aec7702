"""`decide`: one observe -> schedule -> apply round over a backend; the only call of `policy.schedule`.

It also carries the policy's memo: the plan's `Plan.memo` is kept in the backend's `Quarantine` (the cycle's state
a backend keeps across decisions) and shown to the next decision as `ClusterView.memo`, in both backends alike.

The call is isolated per group (`cycle.isolate`): when the policy raises, the groups it fails on are set aside and
reported through the backend, the others decided without them; a plan's actions on a group its view lacked are
refused, not applied. Nothing the policy raises ends the decision but the backend's `fatal` exceptions.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from slurmx.core.actions import Action, Plan
from slurmx.cycle.backend import Backend, Handler
from slurmx.cycle.handover import with_handover
from slurmx.cycle.isolate import Isolated, plan_isolated
from slurmx.cycle.log import REFUSED, DecisionLog, Outcome, view_digest
from slurmx.cycle.order import effect_order
from slurmx.policies.base import Policy

__all__ = ["Decision", "PlanError", "apply_plan", "decide"]


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
    carried = backend.quarantine
    if carried.memo is not None:  # what the policy's last plan left for it, the same way in both backends
        view = view.with_memo(carried.memo)
    if log is not None:
        log.decided(now, number, digest)
    began = time.perf_counter()
    # Groups the policy cannot place are decided after it, by EASY, within the same isolation (cycle/handover.py).
    got = plan_isolated(with_handover(policy), view, now, backend.quarantine, backend.fatal)
    policy_s = time.perf_counter() - began
    del view  # usually the last reference: a backend may then change what the view lent without copying it
    hidden: AbstractSet[str] = _NO_GROUPS
    if isinstance(got, Isolated):  # a group quarantined, or the policy raised
        plan, hidden = got.plan, got.hidden
        for aside in got.set_aside:
            backend.set_aside(aside.group_id, aside.reason, now)
        if got.fallback is not None:
            backend.fell_back(got.fallback, now)
    else:
        plan = got
    if not isinstance(plan, Plan):
        raise PlanError(f"t={now:g}: policy {policy.name} returned {type(plan).__name__}, not a Plan")
    # the memo for the next decision; a fallback's plan (FIFO's) carries none, so the policy starts again from empty
    carried.memo = plan.memo
    outcomes = apply_plan(backend, plan, now, hidden, log, number, digest, policy.name)
    return Decision(plan, tuple(outcomes), policy_s)


def apply_plan(backend: Backend, plan: Plan, now: float, hidden: AbstractSet[str] = frozenset(),
               log: DecisionLog | None = None, number: int = 0, digest: str = "", policy: str = "the policy") \
        -> list[Outcome]:
    """The second half of `decide`: the plan's notes, then its actions in effect order through the backend's
    handlers, one outcome each (actions on `hidden` groups refused); tests call it on a backend's own snapshot."""
    backend.take_notes(plan, now)
    outcomes: list[Outcome] = []
    for kind, batch in effect_order(plan):
        handler = backend.handlers.get(kind)
        if handler is None:
            raise PlanError(f"t={now:g}: policy {policy} returned {batch[0]!r}, which is not an action; "
                            "plans hold Start, Preempt, Resize, SetPriority, Hold, Release and Cancel only")
        done = _apply_shown(handler, batch, now, hidden) if hidden else list(handler(batch, now))
        if len(done) != len(batch):
            raise RuntimeError(f"backend {backend.name}: {kind.__name__} handler returned {len(done)} outcomes "
                               f"for {len(batch)} actions")
        if log is not None:
            log.add(now, number, digest, batch, done)
        outcomes += done
    return outcomes


_NO_GROUPS: frozenset[str] = frozenset()
_HIDDEN = Outcome(REFUSED, "set aside: the policy failed on this group's data; not shown to it until it changes")


def _apply_shown(handler: Handler, batch: Sequence[Action], now: float, hidden: AbstractSet[str]) -> list[Outcome]:
    """The batch's actions on groups the policy was shown, through `handler`; the others refused (a plan naming a
    quarantined group, e.g. a policy that kept an earlier view, must not reach it)."""
    refused = [a.group_id in hidden or getattr(a, "beneficiary", None) in hidden for a in batch]
    if not any(refused):
        return list(handler(batch, now))
    kept = [a for a, r in zip(batch, refused, strict=True) if not r]
    done = list(handler(kept, now)) if kept else []
    if len(done) != len(kept):
        return done  # the caller reports the handler's miscount
    applied = iter(done)
    return [_HIDDEN if r else next(applied) for r in refused]
