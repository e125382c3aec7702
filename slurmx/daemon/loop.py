"""slurmxd's control loop: the clock, wake-ups, back-off and the lock around the one decision cycle.

Each cycle is `slurmx.cycle.decide` over the Slurm backend (`backend`): it reads three things from Slurm (jobs,
nodes, partitions), reads them again if advancing earlier intents changed Slurm, lets the policy decide and
enforces the plan; if a read fails the cycle does nothing, so the daemon never acts on a stale view. Between
cycles it sleeps `daemon.interval`, woken early by a datagram on `daemon.socket` (what `slurmx submit` sends;
rationed per user, see `wake`); while slurmctld is unreachable it backs off, doubling the wait. Any other
failure of a cycle is logged and backed off from the same way, and a cycle that runs past its limit is
abandoned (`_Watchdog`): no one bad input stops the loop.

A dry run is assembled here and nowhere else: the same cycle, enforcer and profiler on a recording adapter
(`slurm.recording`: reads reach Slurm, changes are recorded and never made), recorded intent files, and a scratch
copy of the store taken again at each cycle (`store.ScratchStore`). No module below reads `dry_run`.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import IO

from slurmx.core.actions import Plan
from slurmx.core.config import SiteConfig
from slurmx.cycle import DecisionLog, decide
from slurmx.daemon.backend import SlurmBackend
from slurmx.daemon.drain import is_drained
from slurmx.daemon.enforce import AuditRow, Enforcer
from slurmx.daemon.errors import CycleTimeout, DaemonError
from slurmx.daemon.intent_files import LOCAL_FILES, IntentFiles
from slurmx.daemon.lease import LeasedSlurm
from slurmx.daemon.metrics import Metrics
from slurmx.daemon.observe import Observation, fact_of
from slurmx.daemon.profiling import ProfilingStage
from slurmx.daemon.store import GroupFact, ScratchStore, Store, store_path
from slurmx.daemon.wake import Waker, notify
from slurmx.policies.base import Policy
from slurmx.profile.sampling import profiling_on
from slurmx.slurm import SlurmAdapter, SlurmError
from slurmx.slurm.recording import Change, RecordingSlurm

__all__ = ["AlreadyRunning", "CycleReport", "CycleTimeout", "Daemon", "Waker", "acquire_lock", "notify", "store_path"]

log = logging.getLogger("slurmxd")
MAX_BACKOFF_S = 60.0
# The watchdog's limit on one cycle, derived rather than a site setting: the longer of these two.
CYCLE_LIMIT_MIN_S = 120.0
CYCLE_LIMIT_INTERVALS = 20
MAX_CAUSES = 256  # distinct failure causes whose traceback is logged; past it, one line each


# Seconds between two full passes of the cyclic collector (`_collector_settled`): at 100,000 groups a pass takes about
# half a second, spread over this long (about 30 cycles at a 10 s interval). By time, not by cycle count: a process
# that runs cycles back to back (a test, a replay) would otherwise pay a pass over its whole heap every few seconds.
FULL_COLLECTION_INTERVAL_S = 300.0


class AlreadyRunning(DaemonError):
    """Another slurmxd holds the lock on this state directory."""


def acquire_lock(state_dir: Path, name: str = "slurmxd.lock", who: str = "slurmxd") -> IO[str]:
    """One daemon per state directory (two would both act on every decision); the lock dies with the process.
    A shadow daemon takes a lock of its own `name`: it may run beside the enforcing one, not beside another shadow."""
    state_dir.mkdir(parents=True, exist_ok=True)
    handle = open(state_dir / name, "a+")  # noqa: SIM115 (held for the daemon's life)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise AlreadyRunning(f"{state_dir}: another {who} is running on this state directory") from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


@dataclass(frozen=True, slots=True)
class CycleReport:
    cycle: int
    now: float
    plan: Plan
    seconds: float
    pending: int
    running: int
    rejected: int
    audit: tuple[AuditRow, ...]
    would: tuple[Change, ...] = ()  # a dry run: the changes its adapter recorded instead of making them


@dataclass
class Daemon:
    """One policy on one cluster. `cycle()` is the whole loop body; `run()` repeats it."""

    site: SiteConfig
    adapter: SlurmAdapter
    store: Store
    policy: Policy
    dry_run: bool = False  # act on nothing: see the module's docstring
    clock: Callable[[], float] = time.time
    metrics: Metrics = field(default_factory=Metrics)
    cycles: int = 0
    _reported: set[tuple[str, str]] = field(default_factory=set)
    enforcer: Enforcer = field(init=False)
    profiling: ProfilingStage | None = None  # built from `site.profile` unless given
    cycle_limit_s: float | None = None  # the watchdog's limit; None: see `cycle_limit`
    decisions: DecisionLog | None = None  # every action and its outcome, as the simulator logs them (tests)
    _failures: set[tuple[str, str]] = field(default_factory=set)  # causes whose traceback was logged
    backend: SlurmBackend = field(init=False)
    restart_delay_s: int = 121  # Slurm's wait after a requeue (cred_expire + 1), read from Slurm at start-up
    _drained: bool = False
    _commands_seen: dict[str, int] = field(default_factory=dict)
    _next_full_pass: float = field(default_factory=lambda: time.monotonic() + FULL_COLLECTION_INTERVAL_S)
    recorder: RecordingSlurm | None = field(default=None, init=False)  # a dry run's record of its changes
    scratch: ScratchStore | None = field(default=None, init=False)  # a dry run's store: a copy of `store`
    _said: str = field(default="", init=False)  # what a log line of this daemon's audit starts with

    def __post_init__(self) -> None:
        files: IntentFiles = LOCAL_FILES
        if self.dry_run:  # the one place a dry run differs: what the same code is given to act on
            self.recorder, self.scratch = RecordingSlurm(self.adapter), ScratchStore(self.store)
            self.adapter, self.store, files = self.recorder, self.scratch, self.recorder.files()
            self._said = "dry run, not done: "
        slurm = LeasedSlurm(self.adapter, lease_s=self.site.daemon.lease_s, restart_delay_s=self.restart_delay_s,
                            clock=self.clock)
        self.enforcer = Enforcer(slurm, self.store, self.site, files=files, clock=self.clock,
                                 on_action=self.metrics.action)
        self.metrics.configure(self.site.daemon.interval_s, self.site.daemon.lease_s)
        if self.profiling is None and profiling_on(self.site):
            # The adapter below the counting wrapper (a dry run's recorder passes its transport on): the profiling
            # QOS check runs sacctmgr over it; sample releases and cancels are a few per group, not counted.
            self.profiling = ProfilingStage(self.site, self.adapter, self.store)
        self.backend = SlurmBackend(self.site, slurm, self.store, self.enforcer, self.profiling,
                                    on_observed=self._record_new)

    def observe(self, now: float) -> Observation:
        """What the policy would see now, read without advancing any intent (for probes and `explain`)."""
        return self.backend.read(now)

    def cycle(self) -> CycleReport:
        now = time.monotonic()
        full_pass = now >= self._next_full_pass  # never on the first cycle: nothing is frozen before it
        if full_pass:
            self._next_full_pass = now + FULL_COLLECTION_INTERVAL_S
        with _collector_settled(full_pass):  # see _collector_settled
            try:
                return self._cycle()
            except SlurmError:
                self.metrics.slurm_down()
                raise
            finally:
                self._count_commands()

    def _count_commands(self) -> None:
        """The Slurm commands this cycle ran (profiling's too), as deltas for the metrics."""
        counts = dict(self.adapter.command_counts())
        delta = {name: n - self._commands_seen.get(name, 0) for name, n in counts.items()}
        self._commands_seen = counts
        self.metrics.slurm_commands({k: v for k, v in delta.items() if v > 0})

    def _cycle(self) -> CycleReport:
        began = time.perf_counter()
        self.cycles += 1
        self.enforcer.cycle = self.backend.cycle = self.cycles
        now = self.clock()
        if self.scratch is not None and self.recorder is not None:  # a dry run starts each cycle from the store
            self.scratch.reload()  # as it is, and records this cycle's changes alone
            self.recorder.take()
        if is_drained(Path(self.site.daemon.state_dir)):  # `slurmxd drain`: Slurm runs the groups; touch nothing
            if not self._drained:
                log.warning("drained: deciding nothing until `slurmxd resume`", extra={"event": "drained"})
            self._drained = True
            self.metrics.cycle_idle(now)  # drained on purpose: alive, not unhealthy
            return CycleReport(self.cycles, now, Plan(), time.perf_counter() - began, 0, 0, 0, ())
        self._drained = False
        decision = decide(self.policy, self.backend, now, self.decisions, self.cycles)
        obs = self.backend.obs
        assert obs is not None  # decide observed
        flushed = time.perf_counter()  # enforcement's tail: lease renewals, the audit
        expired = 0
        for job_id in self.backend.renew_leases(now):
            self.metrics.action("lease_renew", "ok")
            begin = obs.jobs[job_id].begin_time if job_id in obs.jobs else None
            expired += begin is not None and begin <= now  # ran out before this renewal: Slurm may have started it
        self.metrics.leases_expired(expired)
        rows = tuple(self.enforcer.flush())
        ended = time.perf_counter()
        seconds = ended - began
        pending, running = len(obs.view.pending_groups()), len(obs.view.running_groups())
        self.metrics.cycle(seconds)
        self.metrics.decision(decision.policy_s)
        self.metrics.phase("observe", self.backend.observe_s)
        self.metrics.phase("enforce", self.backend.enforce_s + ended - flushed)
        self.metrics.cycle_ok(now)
        for state, value in (("pending", pending), ("running", running), ("rejected", len(obs.rejected)),
                             ("quarantined", len(self.backend.quarantine))):
            self.metrics.groups(state, value)
        would = tuple(self.recorder.take()) if self.recorder is not None else ()
        for row in rows:
            log.info("%s%s", self._said, row[4], extra={"group": row[2], "event": row[3], "cycle": row[1]})
        for change in would:
            log.info("would %s", change.what(), extra={"event": "would", "cycle": self.cycles})
        return CycleReport(self.cycles, now, decision.plan, seconds, pending, running, len(obs.rejected), rows,
                           would)

    def _record_new(self, obs: Observation, now: float) -> None:
        """Remember open groups' facts and drop those of closed ones; report each untrusted group once while it is
        rejected."""
        self.backend.owners.keep(obs.groups)
        self._record_facts(obs)
        if (self.cycles - 1) % self.site.daemon.audit_prune_every == 0:  # at start-up, then now and then
            self._prune_audit(now)
        rows: list[AuditRow] = []
        current = {(rejected.group_id, rejected.reason) for rejected in obs.rejected}
        self._reported &= current  # bounded by what squeue shows now: a rejection that ends is forgotten
        for rejected in obs.rejected:
            key = (rejected.group_id, rejected.reason)
            if key not in self._reported:
                self._reported.add(key)
                log.warning("ignoring group %s (jobs %s): %s", rejected.group_id,
                            ",".join(map(str, rejected.job_ids)), rejected.reason,
                            extra={"group": rejected.group_id, "event": "ignore", "cycle": self.cycles})
                rows.append((now, self.cycles, rejected.group_id, "ignore",
                             f"ignored (jobs {','.join(map(str, rejected.job_ids))}): {rejected.reason}"))
        if rows:
            self.store.audit(rows)

    def _record_facts(self, obs: Observation) -> None:
        """Facts of groups seen for the first time (or with new jobs) into the store; those of groups that closed
        (no active job of the owner left, or gone from squeue) out of it, so a group id used again starts afresh."""
        facts = self.store.group_facts()
        fresh: list[GroupFact] = []
        matched: set[tuple[str, int, int]] = set()
        groups = obs.view.groups
        for tg in obs.groups.values():
            jobs = tg.jobs.values()
            for job in jobs:  # a plain loop: it runs for every group every cycle
                if job.state.is_active:
                    break
            else:
                continue  # closed: its facts (if any) are dropped below
            ids = frozenset([job.job_id for job in jobs])
            fact = fact_of(facts, tg) if tg.group_id in facts else None
            if fact is None:
                group = groups.get(tg.group_id)
                submit = group.submit_time if group is not None else \
                    min([float(j.submit_time) for j in jobs if j.submit_time], default=obs.view.now)
                fresh.append(GroupFact(tg.group_id, tg.user_id, tg.first_job_id, ids, submit))
                continue
            matched.add((fact.group_id, fact.owner_uid, fact.first_job))
            if not ids <= fact.job_ids:
                fresh.append(replace(fact, job_ids=fact.job_ids | ids))
        closed = [f for rows in facts.values() for f in rows if (f.group_id, f.owner_uid, f.first_job) not in matched]
        self.store.close_groups(closed)
        self.store.remember_groups(fresh, obs.view.now)

    def _prune_audit(self, now: float) -> None:
        """Apply the site's audit retention (`daemon.audit_keep`, `daemon.audit_keep_rows`)."""
        keep_s, keep_rows = self.site.daemon.audit_keep_s, self.site.daemon.audit_keep_rows
        removed = self.store.prune_audit(now - keep_s if keep_s else None, keep_rows or None)
        if removed:
            log.info("audit retention: %d old entries removed", removed, extra={"event": "prune", "cycle": self.cycles})

    def run(self, stop: threading.Event, waker: Waker | None = None,
            beat: Callable[[int], None] | None = None) -> None:
        """Cycle until `stop` is set; never let one bad cycle end the loop. `beat(cycles)` after every cycle,
        whatever its outcome (systemd's readiness and watchdog, `sdnotify`).

        Any `Exception` from a cycle (Slurm down, a parser or policy bug, an OSError from a planted file, a cycle
        the watchdog abandoned) is logged, counted and backed off from, doubling the wait: a daemon that exits on
        it is restarted by systemd only to fail the same way every 5 s. KeyboardInterrupt and SystemExit end it.
        """
        interval = float(self.site.daemon.interval_s)
        wait = interval
        with _Watchdog(self.cycle_limit()) as watchdog:
            while not stop.is_set():
                try:
                    with watchdog.armed():
                        self.cycle()
                    wait = interval
                except SlurmError as exc:
                    self.metrics.error("cycle")
                    wait = min(max(wait * 2, interval), MAX_BACKOFF_S)
                    log.warning("Slurm unavailable or refusing (%s); next try in %.0f s, nothing enforced on a stale "
                                "view", " ".join(str(exc).split()), wait, extra={"event": "backoff"})
                except CycleTimeout:
                    self.metrics.error("watchdog")
                    wait = min(max(wait * 2, interval), MAX_BACKOFF_S)
                    log.error("cycle %d abandoned: still running after its %g s limit; next try in %.0f s",
                              self.cycles, watchdog.limit_s, wait, extra={"event": "watchdog", "cycle": self.cycles})
                except Exception as exc:
                    self.metrics.error("cycle")
                    wait = min(max(wait * 2, interval), MAX_BACKOFF_S)
                    self._report_failure(exc, wait)
                if beat is not None:
                    beat(self.cycles)
                if waker is not None:
                    waker.wait(wait, stop)
                else:
                    stop.wait(wait)

    def cycle_limit(self) -> float:
        """The watchdog's limit on one cycle: `cycle_limit_s`, else the longer of 120 s and 20 intervals."""
        if self.cycle_limit_s is not None:
            return self.cycle_limit_s
        return max(CYCLE_LIMIT_MIN_S, CYCLE_LIMIT_INTERVALS * float(self.site.daemon.interval_s))

    def _report_failure(self, exc: Exception, wait: float) -> None:
        """The traceback once per cause (its type and the line that raised it), then one line per repeat: a cause
        that fails every cycle must not write the same traceback every few seconds."""
        kind, where = _cause(exc)
        summary = " ".join(f"{kind}: {exc}".split())[:300]  # one line, whatever the message holds
        extra = {"event": "error", "cycle": self.cycles}
        if (kind, where) not in self._failures and len(self._failures) < MAX_CAUSES:
            self._failures.add((kind, where))
            log.exception("cycle %d failed (%s at %s); next try in %.0f s", self.cycles, summary, where, wait,
                          extra=extra)
        else:
            log.error("cycle %d failed (%s at %s); next try in %.0f s (traceback logged at its first time)",
                      self.cycles, summary, where, wait, extra=extra)


@contextlib.contextmanager
def _collector_settled(full_pass: bool) -> Iterator[None]:
    """The cyclic collector off for the cycle (`collector_paused`), and what the cycle leaves alive set aside
    unscanned (`gc.freeze`) before it is back on; with `full_pass`, one full collection first.

    Why: the collector counts allocations while it is off, so the first allocation after it was back on ran a pass
    over every object the cycle made and kept (the view, the records: 0.4 s at 100,000 groups) and found nothing,
    for they are acyclic. Frozen objects are still freed by refcounting (the previous cycle's records, as always),
    but never by the collector: so each cycle first unfreezes, and every `FULL_COLLECTION_INTERVAL_S` seconds a full
    pass finds whatever cyclic garbage the cycles since left (an exception's traceback).
    Freezing and unfreezing take constant time.
    """
    was_enabled = gc.isenabled()
    gc.unfreeze()
    if full_pass:
        gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


def _cause(exc: BaseException) -> tuple[str, str]:
    """An exception's type and the file:line that raised it: the same bug with other data in its message."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}" if tb is not None else "?"
    return f"{type(exc).__module__}.{type(exc).__qualname__}", where


class _Watchdog:
    """Abandons a cycle that runs past `limit_s`: the SIGALRM handler raises `CycleTimeout` inside it.

    A raising handler also interrupts a blocking system call (an open() of a planted FIFO, a hung NFS read): since
    PEP 475 an interrupted call is retried unless the handler raises. An abandoned cycle is like a crash in the
    middle of one, which enforcement's intents are made to survive. Only in the main thread: Python runs signal
    handlers there alone, so the alarm could not reach a cycle in another thread (and `signal.signal` refuses to be
    called there); off the main thread there is no watchdog. The previous SIGALRM handler comes back on exit.
    """

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self.active = threading.current_thread() is threading.main_thread()
        self._armed = False
        self._previous: signal.Handlers | Callable[[int, FrameType | None], object] | int | None = None

    def __enter__(self) -> _Watchdog:
        if self.active:
            self._previous = signal.signal(signal.SIGALRM, self._alarm)
        return self

    def __exit__(self, *_: object) -> None:
        if self.active:
            signal.setitimer(signal.ITIMER_REAL, 0)
            # None: the previous handler was not set from Python and cannot be put back; the default is closest.
            signal.signal(signal.SIGALRM, signal.SIG_DFL if self._previous is None else self._previous)

    @contextlib.contextmanager
    def armed(self) -> Iterator[None]:
        """Run the block under the limit; disarmed however it ends."""
        if not self.active:
            yield
            return
        try:
            self._armed = True
            signal.setitimer(signal.ITIMER_REAL, self.limit_s)
            yield
        finally:
            self._armed = False  # first: an alarm that lands from here on is ignored, not raised outside the cycle
            signal.setitimer(signal.ITIMER_REAL, 0)

    def _alarm(self, signum: int, frame: FrameType | None) -> None:
        if self._armed:
            self._armed = False
            raise CycleTimeout(f"cycle still running after {self.limit_s:g} s")

