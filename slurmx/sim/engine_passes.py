"""Ticks: the periodic decisions of `tick` and `round` mode, and the backfill passes of a policy with Slurm's
cadence (`policies.base.backfill_passes`); a mixin of `Engine`.

Under a cadence, in event mode, the full policy is asked on a tick every period while groups wait (none while the
queue is empty: a year of 30 s ticks is a million events), and a pass is skipped when nothing started, ended, was
cancelled or arrived since the last one, as Slurm's backfill skips it; the policy's `between` decides at the
scheduling points in between, and the kernel's skips are judged by it.
"""

from __future__ import annotations

import math

from slurmx.policies.base import Policy, backfill_passes
from slurmx.sim.engine_isolation import IsolationSteps
from slurmx.sim.engine_state import TICK

__all__ = ["PassSteps"]


class PassSteps(IsolationSteps):
    """The tick event, the cadence's state, and the policy each kind of decision asks."""

    policy: Policy
    _exhausted: bool
    _arrived: int
    _read: int
    _last_submit: float
    _between: Policy  # asked at scheduling points: the policy itself, or its cadence's `between`
    _pass_period: float | None  # a cadence's period; None without one
    _pass_seen: tuple[int, int, int] | None  # (moves, releases, groups shown) at the last pass
    _pass_armed: bool  # a pass tick is in the heap
    _shown: int  # groups shown to the policy so far

    def _init_passes(self, policy: Policy) -> None:
        passes = backfill_passes(policy) if self.options.mode == "event" else None
        self._between = policy if passes is None else passes.between
        self._pass_period = None if passes is None else passes.period_s
        self._pass_seen = None
        self._pass_armed = False
        self._shown = 0

    @property
    def _tick_period(self) -> float | None:
        """Seconds between ticks: the mode's period, a cadence's, or None (no ticks)."""
        return self.options.period_s if self.options.mode != "event" else self._pass_period

    def _first_tick(self) -> None:
        """The periodic modes' first tick, on the period's grid after the first submission (a cadence's ticks are
        armed when a group is shown)."""
        if self.options.mode != "event" and self._jobs:
            period = self.options.period_s
            self._push(math.ceil(self._last_submit / period) * period, TICK, 0)

    def _shown_one(self, now: float) -> None:
        """A group was shown: under a cadence, the next pass is due on its grid."""
        self._shown += 1
        period = self._pass_period
        if period is not None and not self._pass_armed:
            self._pass_armed = True
            self._push(math.ceil(now / period) * period, TICK, 0)

    def _on_tick(self, _payload: int, _version: int, t: float) -> bool:
        moved = False
        # A mode's tick always decides; a cadence's pass is skipped when nothing changed since the last one.
        changed = self._pass_period is None or (self._moves, self._releases, self._shown) != self._pass_seen
        if changed and (self._pending or self.options.call_when_idle):
            moved = self._schedule(t, self.policy)[0]
            self._pass_seen = (self._moves, self._releases, self._shown)
        if self._pass_period is not None and not self._pending:
            self._pass_armed = False  # the next group shown arms it again
        elif self._open:
            if not moved and not self._busy and self._exhausted and self._arrived == self._read:
                self._stalled(t)
            period = self._tick_period
            assert period is not None
            self._push(t + period, TICK, 0)
        return True

    def _schedule(self, now: float, policy: Policy) -> tuple[bool, bool]:
        raise NotImplementedError  # the kernel's (`Engine._schedule`)
