"""slurmxd's backend of the one cycle (`slurmx.cycle`): Slurm observed through squeue, changed through scontrol.

`observe` reads jobs, nodes and partitions, reconciles them with the store, advances the open intents of earlier
cycles and, when that changed anything in Slurm (a requeue at a grace deadline, a release, a cancelled sibling),
reads Slurm again: no decision is taken on a view older than the last action applied. The handlers turn each
action into the enforcer's crash-safe steps (`enforce`). The backend keeps the cycle's quarantine across cycles
(groups the policy failed on, `cycle.isolate`) and reports each group it sets aside once: a log line and an
`ignore` audit row, which `slurmx explain` shows.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from slurmx.core.actions import Action, Cancel, Hold, Plan, Preempt, Release, Resize, SetPriority, Start
from slurmx.core.config import SiteConfig
from slurmx.core.model import ClusterView, Node, Partition
from slurmx.core.ownership import SpoolOwners
from slurmx.cycle import Handler, Outcome, Quarantine, checked_handlers
from slurmx.daemon.enforce import Enforcer, grace_marks, start_marks
from slurmx.daemon.errors import CycleTimeout
from slurmx.daemon.observe import Observation, build_view
from slurmx.daemon.profiling import ProfilingStage
from slurmx.daemon.store import Store
from slurmx.slurm import SlurmError
from slurmx.slurm.records import SlurmJob
from slurmx.slurm.wrappers import CountingSlurm

__all__ = ["ISOLATION_BUDGET_S", "SlurmBackend"]

log = logging.getLogger("slurmxd")
# Wall time one cycle may spend finding the groups its policy fails on: a quarter of the watchdog's shortest limit
# (120 s), so a slow solver tried a few dozen times ends in FIFO's plan for that cycle, not in an abandoned cycle.
# Culprits found before the budget ran out stay set aside; the next cycle goes on from there.
ISOLATION_BUDGET_S = 30.0


@dataclass
class SlurmBackend:
    """The cycle's Slurm side: `observe` -> view, one handler per action type; `obs` is the last observation."""

    site: SiteConfig
    slurm: CountingSlurm
    store: Store
    enforcer: Enforcer
    profiling: ProfilingStage | None = None
    cycle: int = 0
    reads: int = 0  # full Slurm reads, for tests and metrics: two in a cycle whose follow-up changed Slurm
    on_observed: Callable[[Observation, float], None] = lambda obs, now: None
    obs: Observation | None = None
    profiled: list[tuple[float, int, str, str, str]] = field(default_factory=list)
    observe_s: float = 0.0  # this cycle's time in `observe` and in the handlers (metrics: decide vs enforce)
    enforce_s: float = 0.0
    handlers: dict[type[Action], Handler] = field(init=False)
    owners: SpoolOwners = field(init=False)  # who owns each group's folder (core/ownership.py), remembered
    quarantine: Quarantine = field(default_factory=lambda: Quarantine(budget_s=ISOLATION_BUDGET_S))
    # The cycle's own ends: slurmctld unreachable or refusing, the watchdog's alarm. Never blamed on a group.
    fatal: ClassVar[tuple[type[BaseException], ...]] = (SlurmError, CycleTimeout)

    @property
    def name(self) -> str:
        return "slurm"

    def __post_init__(self) -> None:
        self.owners = SpoolOwners(self.site.submit.spool_dir)
        # One handler per action type, each the enforcer's step for it (a plan's starts go as one batch).
        handler = self._handler
        self.handlers = checked_handlers(self.name, {
            Start: handler(Start), Preempt: handler(Preempt), Cancel: handler(Cancel), Resize: handler(Resize),
            SetPriority: handler(SetPriority), Hold: handler(Hold), Release: handler(Release)})

    def read(self, now: float) -> Observation:
        """Jobs, nodes and partitions in one go, reconciled with the store; raises SlurmError if Slurm is down."""
        jobs, nodes, partitions = self.read_slurm()
        return build_view(self.site, jobs, nodes, partitions, now, owner_of=self.owners,
                          facts=self.store.group_facts(), starts=start_marks(self.store), grace=grace_marks(self.store),
                          user_nodes=self.store.user_nodes(()))

    def read_slurm(self) -> tuple[list[SlurmJob], list[Node], list[Partition]]:
        """One full read of Slurm (counted in `reads`)."""
        self.reads += 1
        kinds = {kind.partition: name for name, kind in self.site.resources.items()}
        return self.slurm.jobs(), self.slurm.nodes(), self.slurm.partitions(kinds)

    def observe(self, now: float) -> ClusterView:
        began = time.perf_counter()
        self.enforce_s = 0.0
        try:
            return self._observe(now)
        finally:
            self.observe_s = time.perf_counter() - began

    def _observe(self, now: float) -> ClusterView:
        obs = self.read(now)
        self.on_observed(obs, now)
        changes, marks = self.slurm.changes, self._marks()
        self.enforcer.follow_up(obs, now)  # intents from earlier cycles (or an earlier life) first
        if self.slurm.changes != changes:  # Slurm moved on (a requeue, a release, a cancel): look again
            obs = self.read(now)
        elif self._marks() != marks:  # only the store's marks moved (an intent settled): same snapshot, new marks
            obs = build_view(self.site, obs.jobs.values(), obs.view.nodes.values(), obs.view.partitions.values(),
                             now, owner_of=self.owners, facts=self.store.group_facts(),
                             starts=start_marks(self.store), grace=grace_marks(self.store),
                             user_nodes=self.store.user_nodes(()))
        if self.profiling is not None:  # estimates into the view; groups still profiling stay out of it
            obs, profiled = self.profiling.cycle(obs, now, self.cycle)
            self.enforcer.log.extend(profiled)
        self.obs = obs
        return obs.view

    def renew_leases(self, now: float) -> list[int]:
        """After the plan is enforced: every managed variant still waiting stays the daemon's for one more lease
        (the ones the plan started have their begin time at now on purpose and are left alone), except in groups
        left to Slurm (`Observation.unplaced`)."""
        if self.obs is None:
            return []
        started = [int(i.data["job_id"]) for i in self.store.intents("start")]
        unplaced = self.obs.unplaced
        trusted = [job for group in self.obs.groups.values() if group.group_id not in unplaced
                   for job in group.jobs.values()]  # never a forgery
        return self.slurm.renew(trusted, now, started)

    def take_notes(self, plan: Plan, now: float) -> None:
        self.enforcer.note(plan, self._current())

    def set_aside(self, group_id: str, reason: str, now: float) -> None:
        detail = (f"set aside: the policy failed on this group's data ({reason}); not scheduled until the group "
                  "changes (e.g. its estimate) or leaves the queue")
        log.warning("group %s %s", group_id, detail, extra={"group": group_id, "event": "ignore", "cycle": self.cycle})
        self.store.audit([(now, self.cycle, group_id, "ignore", detail)])

    def fell_back(self, reason: str, now: float) -> None:
        log.error("cycle %d: %s", self.cycle, reason, extra={"event": "error", "cycle": self.cycle})

    def _handler(self, kind: type[Action]) -> Handler:
        def handle(batch: Sequence[Action], now: float) -> list[Outcome]:
            began = time.perf_counter()
            try:
                return self.enforcer.apply_batch(kind, list(batch), self._current(), now)
            finally:
                self.enforce_s += time.perf_counter() - began
        return handle

    def _current(self) -> Observation:
        if self.obs is None:
            raise RuntimeError("SlurmBackend: an action before the first observation")
        return self.obs

    def _marks(self) -> tuple[object, object]:
        return start_marks(self.store), grace_marks(self.store)
