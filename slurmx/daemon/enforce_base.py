"""What every enforcement step shares: the audit trail, the Slurm adapter and where intent files go."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from slurmx.core.actions import Action
from slurmx.core.config import SiteConfig
from slurmx.core.model import VariantState
from slurmx.cycle import Outcome
from slurmx.cycle.admissible import Lookup, Standing, Verdict, verdict_outcome
from slurmx.cycle.log import APPLIED, REFUSED
from slurmx.daemon.intent_files import LOCAL_FILES, IntentFiles
from slurmx.daemon.observe import Observation
from slurmx.daemon.store import Store
from slurmx.slurm import SlurmAdapter

__all__ = ["WAITING", "AuditRow", "EnforcerBase", "active_ids", "group_variants", "one_line", "show_ids"]

AuditRow = tuple[float, int, str, str, str]
WAITING = (VariantState.PENDING, VariantState.HELD, VariantState.REQUEUED)


@dataclass
class EnforcerBase:
    """The state both halves of `Enforcer` share: Slurm, the store, the audit rows, the intent files.

    A dry run is assembled, not switched on here: a recording adapter, a scratch store and recorded intent files
    (`daemon.loop.Daemon`), so this code runs the same whether or not its calls reach Slurm."""

    adapter: SlurmAdapter
    store: Store
    site: SiteConfig
    files: IntentFiles = LOCAL_FILES  # where the grace protocol writes its intent files
    clock: Callable[[], float] = time.time
    on_action: Callable[[str, str], None] = lambda kind, outcome: None  # metrics hook: (action type, outcome)
    log: list[AuditRow] = field(default_factory=list)
    cycle: int = 0
    _last_note: dict[str, str] = field(default_factory=dict)
    _settled: set[int] = field(default_factory=set)  # jobs requeued or released by this cycle's follow-up
    _requeued_now: dict[str, int] = field(default_factory=dict)  # group -> job requeued by this plan (grace 0)
    _seen_running: set[int] = field(default_factory=set)  # running jobs already checked for who started them
    # What this plan did so far that its snapshot cannot show yet (`standing`): groups cancelled, groups started.
    _cancelled_now: set[str] = field(default_factory=set)
    _started_now: set[str] = field(default_factory=set)

    def new_plan(self) -> None:
        """Forget what the previous plan did: its effects are in the next snapshot."""
        self._requeued_now.clear()
        self._cancelled_now.clear()
        self._started_now.clear()

    def standing(self, obs: Observation) -> Lookup:
        """Each group as `cycle.admissible` reads it: the snapshot, the open intents, and this plan's actions so far
        (a cancelled group has left, a started one runs, a victim requeued with no grace waits again)."""
        starting: set[str] | None = None  # groups with an open start intent: read once, when a waiting one is asked

        def lookup(group_id: str) -> Standing | None:
            nonlocal starting
            group = obs.view.groups.get(group_id)
            if group is None or group_id in self._cancelled_now:
                return None
            if group_id in self._started_now:
                return Standing(running=True)
            running = group.running_variant()
            if running is None or running.job_id is None or running.job_id == self._requeued_now.get(group_id):
                waiting = frozenset(v.kind for v in self._waiting(obs, group_id))
                if starting is None:
                    starting = {i.group_id for i in self.store.intents("start")}
                return Standing(waiting=waiting, starting=group_id in starting)
            job_id = running.job_id
            job = obs.jobs.get(job_id)
            signalled = [i for i in (self.store.intent(f"preempt:{job_id}"), self.store.intent(f"resize:{job_id}"))
                         if i is not None and i.step != "requeued"]
            return Standing(running=True, in_grace=bool(signalled),
                            size=(job.request.cpus, job.request.mem_mb) if job is not None else None)
        return lookup

    def _waiting(self, obs: Observation, group_id: str) -> list[Any]:
        """The group's waiting variants with a job, the one this plan requeued with no grace among them (the
        snapshot still shows it running; `requeuehold` left it held)."""
        requeued = self._requeued_now.get(group_id)
        return [v for v in group_variants(obs, group_id)
                if v.job_id is not None and (v.state in WAITING or v.job_id == requeued)]

    def _held(self, group_id: str, variant: Any) -> bool:
        return variant.state is VariantState.HELD or variant.job_id == self._requeued_now.get(group_id)

    def _not_admitted(self, action: Action, verdict: Verdict) -> Outcome:
        """The outcome of an action `cycle.admissible` refused or found under way; a refusal is audited."""
        outcome = verdict_outcome(verdict, action)
        if outcome.status is REFUSED:
            kind = type(action).__name__.lower()
            self._audit(action.group_id, "error", f"{kind} refused: {outcome.detail}")
            self.on_action(kind, "error")
        return outcome

    def _audit(self, group_id: str, event: str, detail: str) -> None:
        self.log.append((self.clock(), self.cycle, group_id, event, detail))

    def flush(self) -> list[AuditRow]:
        rows, self.log = self.log, []
        self.store.audit(rows)
        return rows

    def _run(self, group_id: str, kind: str, what: str, call: Callable[[], None], reason: str) -> Outcome:
        call()
        self.on_action(kind, "ok")
        self._audit(group_id, kind, what + (f" ({reason})" if reason else ""))
        return Outcome(APPLIED)


def group_variants(obs: Observation, group_id: str) -> tuple[Any, ...]:
    group = obs.view.groups.get(group_id)
    return group.variants if group is not None else ()


def active_ids(obs: Observation, group_id: str) -> list[int]:
    group = obs.groups.get(group_id)
    return [j.job_id for j in group.jobs.values() if j.state.is_active] if group is not None else []


def show_ids(ids: Iterable[int]) -> str:
    return ",".join(map(str, ids)) or "none"


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
