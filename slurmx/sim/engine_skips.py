"""When the engine may skip a decision: the policy's plan at that scheduling point would be empty, by what the
policy declared it reads (`policies.base.Capabilities`: `waits_for_release`, `queue_window`); a mixin of `Engine`.

tests/sim/test_decision_skips.py asks the policy anyway at every skipped point, on a view rebuilt from scratch, and
fails unless that plan is empty.
"""

from __future__ import annotations

from slurmx.cycle import Quarantine
from slurmx.sim.engine_state import PENDING, EngineState
from slurmx.sim.engine_view import Queues

__all__ = ["SkipRules"]


class SkipRules(EngineState):
    """The three questions a skip asks: a group shown late, room given back, a reservation overdue."""

    quarantine: Quarantine
    _queues: Queues
    _late_visible: bool  # a group shown since the last decision may be older than the queue's end
    _releases: int  # resources given back so far
    _releases_seen: int  # ... as of the last decision
    _blocked: bool  # strict FIFO left groups waiting at the last decision
    _quiet: bool  # a windowed backfill changed nothing at the last decision
    _freed: list[int]  # nodes given room back since the last decision began

    def _nothing_to_decide(self, now: float) -> bool:
        """Whether the policy's plan at this scheduling point would be empty, by what it declared it reads: no group
        shown late (older than the queue's end), and either no room given back (a strict FIFO left groups waiting, or
        a windowed backfill changed nothing and no reservation moves with `now`), or room given back only on nodes
        where strict FIFO's oldest waiting group still fits nowhere (the room it fits in can only grow there)."""
        if self._late_visible:
            return False
        if self._releases == self._releases_seen:
            return self._blocked or (self._quiet and not self._overdue(now))
        freed, self._freed = self._freed, []
        return self._blocked and not self._head_may_fit(freed)

    def _head_may_fit(self, freed: list[int]) -> bool:
        """Whether strict FIFO's oldest waiting group might fit on one of the `freed` nodes (a request within its
        free room on a node of the variant's kind; placement rules only narrow that). True when the head is not
        the engine's to know: groups set aside, or held (the policy then waits on another)."""
        if self.quarantine:
            return True
        head = None
        if self.options.view == "naive":  # the reference view files no queue
            waiting = [j for j in self._visible.values() if j.status == PENDING]
            head = min(waiting, key=lambda j: (j.job.submit_time, j.group_id), default=None)
        else:
            jobs = self._by_id
            for _, gid in self._queues.keys[1]:  # filed at the last view: its front started in that plan
                j = jobs[gid]
                if j.status == PENDING:
                    head = j
                    break
        if head is None or head.held:
            return True
        cluster = self.cluster
        return any(cluster.any_fits(kind, head.facts[kind].vector, freed) for kind in head.kinds)

    def _overdue(self, now: float) -> bool:
        """Whether a running job is at or past its expected end (a reservation then moves with `now`); True until
        the engine keeps the by-end lists (from the first view on, for a policy with a window)."""
        queues = self._queues
        return not queues.ends_kept or any(ends and ends[0][0] <= now for ends in queues.ends.values())
