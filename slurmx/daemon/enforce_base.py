"""What every enforcement step shares: the audit trail, the dry-run switch and the Slurm adapter."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from slurmx.core.config import SiteConfig
from slurmx.core.model import VariantState
from slurmx.cycle import Outcome
from slurmx.cycle.log import APPLIED, SHADOW
from slurmx.daemon.observe import Observation
from slurmx.daemon.store import Store
from slurmx.slurm import SlurmAdapter

__all__ = ["WAITING", "AuditRow", "EnforcerBase", "active_ids", "group_variants", "one_line", "show_ids"]

AuditRow = tuple[float, int, str, str, str]
WAITING = (VariantState.PENDING, VariantState.HELD, VariantState.REQUEUED)


@dataclass
class EnforcerBase:
    """The state both halves of `Enforcer` share: Slurm, the store, the audit rows, the dry-run switch."""

    adapter: SlurmAdapter
    store: Store
    site: SiteConfig
    dry_run: bool = False
    clock: Callable[[], float] = time.time
    on_action: Callable[[str, str], None] = lambda kind, outcome: None  # metrics hook: (action type, outcome)
    log: list[AuditRow] = field(default_factory=list)
    cycle: int = 0
    _last_note: dict[str, str] = field(default_factory=dict)
    _settled: set[int] = field(default_factory=set)  # jobs requeued or released by this cycle's follow-up
    _requeued_now: dict[str, int] = field(default_factory=dict)  # group -> job requeued by this plan (grace 0)
    _seen_running: set[int] = field(default_factory=set)  # running jobs already checked for who started them

    def _audit(self, group_id: str, event: str, detail: str) -> None:
        self.log.append((self.clock(), self.cycle, group_id, event, detail))

    def flush(self) -> list[AuditRow]:
        rows, self.log = self.log, []
        if not self.dry_run:
            self.store.audit(rows)
        return rows

    def _run(self, group_id: str, kind: str, what: str, call: Callable[[], None], reason: str) -> Outcome:
        if self.dry_run:
            self._audit(group_id, kind, f"would {what}" + (f" ({reason})" if reason else ""))
            return Outcome(SHADOW)
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
