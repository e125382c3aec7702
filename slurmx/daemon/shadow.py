"""`slurmxd --shadow`: the full loop on the live queue, acting on nothing, recording what it would have done.

The admin's evidence before switching enforcement on. The shadow daemon runs the enforcing daemon's very cycle
(observe, profile, decide, enforce) as a dry run (`loop.Daemon`: a recording adapter and a scratch store, so
Slurm and the files are never changed) over a view corrected to look as if it managed every group
(`shadow_view`), and records each group it saw and each would-be decision (time, group, action, kind, nodes,
reason) in `shadow.sqlite` in the state directory. It takes its own lock and never the enforcing daemon's lock,
store, wake socket or metrics port, so it runs beside an enforcing daemon or alone. `slurmx shadow-report`
compares the record with what Slurm did.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import click

from slurmx.core.config import SiteConfig
from slurmx.cycle import DecisionLog
from slurmx.cycle.log import APPLIED, REPEATED, SHADOW, DecisionRecord
from slurmx.daemon.backend import SlurmBackend
from slurmx.daemon.checks import run_checks
from slurmx.daemon.enforce import grace_marks
from slurmx.daemon.loop import CycleReport, Daemon, acquire_lock
from slurmx.daemon.observe import Observation, build_view
from slurmx.daemon.sdnotify import notifying
from slurmx.daemon.shadow_store import SeenGroup, ShadowDecision, ShadowStore, shadow_path
from slurmx.daemon.shadow_view import as_if_managed
from slurmx.daemon.store import Store
from slurmx.policies.base import make_policy
from slurmx.slurm import adapter_from_config

__all__ = ["ShadowBackend", "ShadowDaemon", "run_shadow"]

log = logging.getLogger("slurmxd")
LOCK_FILE = "shadow.lock"


@dataclass
class ShadowBackend(SlurmBackend):
    """The Slurm backend reading the queue through `as_if_managed`; `started`: each group's first would-be Start."""

    started: dict[str, ShadowDecision] = field(default_factory=dict)
    since: float = 0.0

    def read(self, now: float) -> Observation:
        jobs, nodes, partitions = self.read_slurm()
        jobs, nodes, marks = as_if_managed(jobs, nodes, self.started, self.since)
        return build_view(self.site, jobs, nodes, partitions, now, owner_of=self.owners,
                          facts=self.store.group_facts(), starts=marks, grace=grace_marks(self.store),
                          user_nodes=self.store.user_nodes(()))


@dataclass
class ShadowDaemon(Daemon):
    """A `Daemon` in dry-run whose every cycle ends by writing what it saw and would have done to `record`."""

    record: ShadowStore = field(kw_only=True)
    since: float = field(kw_only=True)
    _last: dict[tuple[str, str], tuple[object, ...]] = field(default_factory=dict, kw_only=True)
    _seen: set[str] = field(default_factory=set, kw_only=True)  # groups in the last view (already recorded)

    def __post_init__(self) -> None:
        self.dry_run = True
        self.decisions = DecisionLog()
        super().__post_init__()
        self.backend = ShadowBackend(self.site, self.backend.slurm, self.store, self.enforcer, self.profiling,
                                     on_observed=self._record_new, started=self.record.first_starts(),
                                     since=self.since)

    def cycle(self) -> CycleReport:
        try:
            report = super().cycle()
        finally:
            records = list(self.decisions.records) if self.decisions is not None else []
            if self.decisions is not None:  # what this cycle decided is written below; the log must not grow
                self.decisions.records.clear()
                self.decisions.decisions.clear()
        obs = self.backend.obs
        if obs is not None:
            self._write(report, obs, records)
        return report

    def _write(self, report: CycleReport, obs: Observation, records: list[DecisionRecord]) -> None:
        view = obs.view
        self.record.see(SeenGroup(g.group_id, report.now, g.submit_time, g.user, tuple(v.kind for v in g.variants))
                        for g in view.groups.values() if g.group_id not in self._seen)
        self._seen = set(view.groups)  # bounded by the queue, not by every group ever seen
        if len(self._last) > 2 * len(view.groups) + 1000:  # standing decisions of groups long gone
            self._last = {k: v for k, v in self._last.items() if k[0] in view.groups}
        actions = {a.action_id: a for a in report.plan}
        rows: list[ShadowDecision] = []
        for rec in records:
            action = actions.get(rec.action_id)
            if action is None:
                continue
            # Applied on the recording adapter: recorded, not done, which the record calls `shadow`.
            status = SHADOW if rec.outcome.status is APPLIED else rec.outcome.status
            kind = str(getattr(action, "kind", ""))
            nodes = tuple(getattr(action, "nodes", ()))
            group = view.groups.get(action.group_id)
            variant = group.variant(kind) if group is not None and kind else None
            name = type(action).__name__
            key, value = (action.group_id, name), (rec.action_id, status)
            if status == REPEATED or self._last.get(key) == value:
                continue  # a policy repeats a standing decision every cycle: the record keeps its first time
            self._last[key] = value
            rows.append(ShadowDecision(report.now, report.cycle, action.group_id, name, kind,
                                       variant.job_id if variant is not None else None, nodes,
                                       str(getattr(action, "reason", "")), status))
        self.record.record(rows)
        backend = self.backend
        if isinstance(backend, ShadowBackend):
            for row in rows:
                if row.action == "Start" and row.outcome == SHADOW and row.group_id not in backend.started:
                    backend.started[row.group_id] = row


def run_shadow(site: SiteConfig, *, once: bool = False, log_level: int | None = None) -> None:
    """Start-up of `slurmxd --shadow`: checks as warnings only (it acts on nothing), its own lock and record."""
    from slurmx.daemon.main import _plan_lines, configure_logging

    configure_logging(site.daemon.log_format, log_level if log_level is not None else logging.INFO)
    adapter = adapter_from_config(site.transport)
    policy = make_policy(site.policy.name, site.policy.params, "policy")
    transport = getattr(adapter, "transport", None)
    if transport is not None:
        checked = run_checks(site, transport)
        for warning in ([checked.problem] if checked.problem else []) + checked.privileges + checked.coexistence:
            log.warning("shadow mode, nothing enforced: %s", warning, extra={"event": "coexistence"})
    state_dir = Path(site.daemon.state_dir)
    lock = acquire_lock(state_dir, LOCK_FILE, "slurmxd --shadow")
    record = ShadowStore(shadow_path(state_dir))
    now = time.time()
    if record.get_meta("first_started") is None:
        record.set_meta("first_started", repr(now))
    record.set_meta("started", repr(now))
    store = Store(":memory:")  # the enforcing daemon's store is never opened; a shadow's own facts die with it
    daemon = ShadowDaemon(site, adapter, store, policy, record=record, since=now)
    stop = threading.Event()
    try:
        if once:
            for line in _plan_lines(daemon.cycle()):
                click.echo(line)
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        log.info("slurmxd --shadow started: policy %s, every %d s, record %s; acting on nothing", site.policy.name,
                 site.daemon.interval_s, record.path, extra={"event": "start"})
        notifying(lambda beat: daemon.run(stop, None, beat), daemon)  # a copy of the unit runs it as Type=notify
    finally:
        store.close()
        record.close()
        lock.close()
        log.info("slurmxd --shadow stopped at %s", time.strftime("%H:%M:%S"), extra={"event": "stop"})
