"""The simulator's side of the cycle's per-group isolation (`slurmx.cycle.isolate`); a mixin of `Engine`.

A group the policy fails on is set aside by the shared cycle and, as its data never changes in a run, never shown
to the policy again. The engine records each one and counts the decisions that fell back to FIFO, both in the
run's notes; when nothing else is left, the groups set aside end cancelled instead of stalling the run.
"""

from __future__ import annotations

from typing import ClassVar

from slurmx.core.actions import Cancel
from slurmx.cycle import Quarantine
from slurmx.sim.cluster import SimulationError
from slurmx.sim.engine_actions import ActionSteps
from slurmx.sim.engine_state import PENDING

__all__ = ["IsolationSteps"]


class IsolationSteps(ActionSteps):
    """The cycle's isolation hooks (`fatal`, `set_aside`, `fell_back`), the end of a run they leave groups
    waiting in, and what a run reports of them."""

    # The model's own loud errors end the run; anything else the policy raises is blamed on a group.
    fatal: ClassVar[tuple[type[BaseException], ...]] = (SimulationError,)
    quarantine: Quarantine  # one per run
    set_aside_groups: list[tuple[float, str, str]]  # (time, group, reason), each group once
    fallbacks: int  # decisions the policy failed with no group to blame
    first_fallback: str  # the first of them, with its time

    def _init_isolation(self) -> None:
        self.quarantine = Quarantine()
        self.set_aside_groups = []
        self.fallbacks = 0
        self.first_fallback = ""

    def set_aside(self, group_id: str, reason: str, now: float) -> None:
        self.set_aside_groups.append((now, group_id, reason))

    def fell_back(self, reason: str, now: float) -> None:
        if not self.fallbacks:
            self.first_fallback = f"t={now:g}: {reason}"
        self.fallbacks += 1

    def _stalled(self, t: float) -> None:
        """Nothing runs and no event is left. If every job left waits set aside (no event can change its data),
        they end cancelled; otherwise the run is stalled, a loud error."""
        waiting = [j.group_id for j in self._visible.values() if j.status == PENDING]
        aside = [gid for gid in waiting if gid in self.quarantine]
        if aside and len(aside) == len(waiting) == self._open:
            for gid in aside:
                self._cancel(Cancel(gid, reason="set aside: the policy failed on it"), t)
            return
        because = f"; {len(aside)} of them set aside (the policy raised on them)" if aside else ""
        raise SimulationError(f"t={t:g}: stalled with {self._open} unfinished jobs, nothing running and no event "
                              f"left; the policy starts none of the pending groups (first: {', '.join(waiting[:3])})"
                              + because)

    def _notes_counted(self, notes: dict[str, int]) -> dict[str, int]:
        """The plan notes counted and, only when there were any, the groups set aside and the decisions that fell
        back to FIFO: a run the policy failed in says so in its report."""
        notes = dict(notes)
        if self.set_aside_groups:
            notes["cycle: groups set aside"] = len(self.set_aside_groups)
        if self.fallbacks:
            notes["cycle: decisions fallen back to FIFO"] = self.fallbacks
        return notes
