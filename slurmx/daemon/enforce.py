"""Turn a policy's plan into Slurm commands, crash-safely (mechanism apart from policy).

Every multi-step action is an *intent* in the store, written before its first Slurm call and advanced after each
one. Whether an action applies at all is decided first, by `cycle.admissible`, as the simulator decides it.
This module composes the two halves and owns the plan: `enforce_start.StartSteps` (steer, size, release, cancel
siblings) and `enforce_grace.GraceSteps` (preempt and resize through the grace protocol); each module's docstring
gives its intents' steps.

One failed action never aborts the cycle; slurmctld unreachable does (the rest of the plan would act on a stale
view), and the next cycle starts from a fresh snapshot.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from slurmx.core.actions import Action, Cancel, Hold, Plan, Preempt, Release, Resize, SetPriority, Start
from slurmx.cycle import Outcome
from slurmx.cycle.admissible import Verdict, admissible
from slurmx.cycle.log import APPLIED, FAILED, REPEATED
from slurmx.daemon import preemption
from slurmx.daemon.enforce_base import AuditRow, active_ids, one_line, show_ids
from slurmx.daemon.enforce_grace import GraceSteps
from slurmx.daemon.enforce_start import StartSteps
from slurmx.daemon.errors import CycleTimeout
from slurmx.daemon.observe import GraceMark, Observation, StartMark
from slurmx.daemon.store import Store
from slurmx.slurm import SlurmError
from slurmx.slurm.adapter import JobUpdate
from slurmx.slurm.errors import SlurmUnavailable

__all__ = ["AuditRow", "Enforcer", "grace_marks", "start_marks"]

log = logging.getLogger("slurmxd")
# How one action other than Start is enforced against a snapshot.
Step = Callable[[Any, Observation, float], Outcome]


def start_marks(store: Store) -> dict[str, StartMark]:
    """Open Start intents as the view needs them (group -> released variant and its nodes)."""
    return {i.group_id: StartMark(str(i.data["kind"]), int(i.data["job_id"]), tuple(i.data.get("nodes", ())),
                                  float(i.data.get("released_at", i.created)))
            for i in store.intents("start")}


def grace_marks(store: Store) -> dict[str, GraceMark]:
    """Open preemptions as the view needs them (group -> deadline while in grace, beneficiary, nodes)."""
    marks: dict[str, GraceMark] = {}
    for i in store.intents("preempt"):
        deadline = None if i.step == "requeued" else float(i.data.get("deadline", i.created))
        beneficiary = i.data.get("beneficiary")  # a victim preempted for no one earmarks nothing
        marks[i.group_id] = GraceMark(deadline, beneficiary, tuple(i.data.get("nodes", ())) if beneficiary else ())
    return marks



@dataclass
class Enforcer(StartSteps, GraceSteps):
    """Applies plans and advances open intents (a dry run: the same, on a recording adapter and a scratch store)."""

    # ------------------------------------------------------------------------------------------ the plan

    def note(self, plan: Plan, obs: Observation) -> None:
        """Audit the plan's notes (the first step of every plan); policies repeat a note every cycle while it
        holds: record it when it changes."""
        self.new_plan()
        for note in plan.notes:
            group = note.group_id
            if group and group in obs.view.groups and self._last_note.get(group) != note.text:
                self._last_note[group] = note.text
                self._audit(group, "note", note.text)

    def apply_batch(self, kind: type[Action], batch: list[Action], obs: Observation, now: float) -> list[Outcome]:
        """One batch of `effect_order`: the starts together, anything else action by action."""
        if kind is Start:
            return self.starts([a for a in batch if isinstance(a, Start)], obs, now)
        step = self.steps()[kind]
        return [self.one(step, action, obs, now) for action in batch]

    def steps(self) -> dict[type[Action], Step]:
        """How each action but `Start` is enforced (the backend checks this table complete when it is built)."""
        return {Preempt: self._preempt, Resize: self._resize, SetPriority: self._set_priority, Hold: self._hold,
                Release: self._release_held, Cancel: self._cancel}

    def starts(self, starts: list[Start], obs: Observation, now: float) -> list[Outcome]:
        """A plan's starts, together (one release for all); one outcome each. A failure other than slurmctld
        unreachable fails these starts, never the cycle; their intents are replayed or timed out as after a crash."""
        with self._unreachable():
            try:
                return self._starts(starts, obs, now)
            except (SlurmUnavailable, CycleTimeout):
                raise
            except Exception as exc:
                log.exception("the starts of cycle %d failed", self.cycle)
                self.on_action("start", "error")
                for action in starts:
                    self._audit(action.group_id, "error", f"start failed ({type(exc).__name__}): {one_line(exc)}")
                return [Outcome(FAILED, f"{type(exc).__name__}: {one_line(exc)}") for _ in starts]

    def one(self, step: Step, action: Action, obs: Observation, now: float) -> Outcome:
        """One action by its step, if `cycle.admissible` admits it; a failure costs this group only, slurmctld
        unreachable ends the cycle."""
        verdict = admissible(action, self.standing(obs))
        if verdict is not Verdict.ADMITTED:
            return self._not_admitted(action, verdict)
        with self._unreachable():
            outcome = self._one(step, action, obs, now)
        if isinstance(action, Cancel) and outcome.status is APPLIED:
            self._cancelled_now.add(action.group_id)
        return outcome

    @contextlib.contextmanager
    def _unreachable(self) -> Iterator[None]:
        try:
            yield
        except SlurmUnavailable as exc:
            self._audit("", "error", f"slurmctld unreachable while enforcing; rest of the plan dropped: {exc}")
            self.on_action("cycle", "unavailable")
            raise

    def _one(self, step: Step, action: Action, obs: Observation, now: float) -> Outcome:
        kind = type(action).__name__.lower()
        try:
            return step(action, obs, now)
        except (SlurmUnavailable, CycleTimeout):  # the cycle's own ends: not this action's failure
            raise
        except (SlurmError, preemption.PreemptionError) as exc:
            self.on_action(kind, "error")
            self._audit(action.group_id, "error", f"{kind} failed: {one_line(exc)}")
            return Outcome(FAILED, one_line(exc))
        except Exception as exc:  # a bug or a hostile input tied to this group: it must not cost the others
            log.exception("%s of group %s failed", kind, action.group_id)
            self.on_action(kind, "error")
            self._audit(action.group_id, "error", f"{kind} failed ({type(exc).__name__}): {one_line(exc)}; "
                        "the group is left as it was")
            return Outcome(FAILED, f"{type(exc).__name__}: {one_line(exc)}")

    def _set_priority(self, action: SetPriority, obs: Observation, now: float) -> Outcome:
        return self._on_waiting(action.group_id, obs, "setpriority", f"priority {action.priority}",
                                lambda ids: self.adapter.update(ids, JobUpdate(priority=action.priority)),
                                action.reason)

    def _hold(self, action: Hold, obs: Observation, now: float) -> Outcome:
        return self._on_waiting(action.group_id, obs, "hold", "hold", self.adapter.hold, action.reason, held=False)

    def _release_held(self, action: Release, obs: Observation, now: float) -> Outcome:
        return self._on_waiting(action.group_id, obs, "release", "release", self.adapter.release, action.reason,
                                held=True)

    def _cancel(self, action: Cancel, obs: Observation, now: float) -> Outcome:
        ids = active_ids(obs, action.group_id)
        return self._run(action.group_id, "cancel", f"cancel jobs {show_ids(ids)}", lambda: self.adapter.cancel(ids),
                         action.reason)

    def _on_waiting(self, group_id: str, obs: Observation, kind: str, what: str,
                    call: Callable[[list[int]], None], reason: str, held: bool | None = None) -> Outcome:
        ids = [v.job_id for v in self._waiting(obs, group_id) if held is None or self._held(group_id, v) == held]
        if not ids:
            return Outcome(REPEATED)  # every waiting variant is already held (or released)
        return self._run(group_id, kind, f"{what} jobs {show_ids(ids)}", lambda: call(ids), reason)

    # ------------------------------------------------------------------------------------------ follow-up

    def follow_up(self, obs: Observation, now: float) -> None:
        """Advance every open intent on this cycle's snapshot, then cancel siblings of running variants."""
        try:
            self._settled.clear()
            for intent in self.store.intents("preempt"):
                self._advance_preempt(intent, obs, now)
            for intent in self.store.intents("resize"):
                self._advance_resize(intent, obs, now)
            for intent in self.store.intents("start"):
                self._advance_start(intent, obs, now)
            self._cancel_siblings(obs)
        except SlurmUnavailable:
            raise
        except SlurmError as exc:
            self.on_action("follow_up", "error")
            self._audit("", "error", f"follow-up failed: {one_line(exc)}")
