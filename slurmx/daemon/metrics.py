"""slurmxd's Prometheus metrics, on a registry of their own (tests build many daemons; the global one is shared).

One prefix (`slurmxd_`), base units in the names (`_seconds`, `_timestamp_seconds`), counters ending in `_total`,
and no `_created` series (a counter's creation time doubles the series for nothing a rate needs). Every counter
starts at zero for each label value the daemon knows, so a scrape before the first event shows the series (a rate
over an absent series is no rate at all). `endpoint` serves them with `/healthz`; docs/daemon.md lists every family
(a unit test holds the table equal to this registry).
"""

from __future__ import annotations

import platform
import threading
from collections.abc import Mapping
from importlib import metadata

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)

__all__ = ["ACTION_OUTCOMES", "ERROR_WHERE", "GROUP_STATES", "PHASES", "Health", "Metrics", "package_version"]

# prometheus_client's switch is process-wide: slurmxd exports only this module's registry and the process collectors.
disable_created_metrics()  # type: ignore[no-untyped-call]

# A cycle on a large cluster can take tens of seconds; the watchdog abandons one after 120 s or more.
_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
# What the enforcer reports through `on_action` (action type -> outcomes it can have); others still count.
ACTION_OUTCOMES: Mapping[str, tuple[str, ...]] = {
    "start": ("ok", "error", "timeout"),
    "preempt": ("ok", "error"),
    "resize": ("ok", "error", "signalled"),
    "setpriority": ("ok", "error"),
    "hold": ("ok", "error"),
    "release": ("ok", "error"),
    "cancel": ("ok", "error"),
    "requeue": ("ok",),
    "cancel_sibling": ("ok",),
    "lease_renew": ("ok",),  # a waiting managed variant's lease pushed forward (daemon/lease.py)
    "follow_up": ("error",),
    "cycle": ("unavailable",),
}
ERROR_WHERE = ("cycle", "watchdog")  # where `Daemon.run` counts a failed cycle
PHASES = ("observe", "enforce")  # the Slurm-facing parts of a cycle; the decision between them has its own histogram
GROUP_STATES = ("pending", "running", "rejected", "quarantined")  # `slurmxd_groups{state}`, zero from the start
SLURM_COMMANDS = ("squeue", "scontrol", "scancel", "sbatch", "sacct", "sacctmgr")  # zero from the start


def package_version() -> str:
    """The installed slurmx's version ('unknown' when run from a tree that was never installed)."""
    try:
        return metadata.version("slurmx-hpc")
    except metadata.PackageNotFoundError:
        return "unknown"


class Health:
    """What `/healthz` answers from: the last successful cycle's time and whether the last cycle reached Slurm."""

    def __init__(self) -> None:
        self.last_ok: float | None = None
        self.slurm_up: bool | None = None

    def check(self, now: float, max_age_s: float) -> tuple[bool, str]:
        """(healthy, reason): healthy when a cycle succeeded within `max_age_s` and Slurm answered the last one."""
        if self.slurm_up is False:
            return False, "the last cycle could not reach Slurm"
        if self.last_ok is None:
            return False, "no successful cycle yet"
        age = now - self.last_ok
        if age > max_age_s:
            return False, f"last successful cycle {age:.0f} s ago (limit {max_age_s:.0f} s)"
        return True, f"last successful cycle {max(age, 0.0):.0f} s ago"


class Metrics:
    """Written by the loop, read by the HTTP thread (prometheus_client's metrics are thread-safe)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.health = Health()
        self._lock = threading.Lock()
        self._wheres: set[str] = set(ERROR_WHERE)
        reg = self.registry
        self._cycle = Histogram("slurmxd_cycle_seconds", "Wall time of one whole cycle: observe, decide, enforce.",
                                buckets=_BUCKETS, registry=reg)
        self._decision = Histogram("slurmxd_decision_seconds", "Wall time of one decision: the policy's plan and the "
                                   "backfill of the groups it cannot place; no Slurm command runs in it.",
                                   buckets=_BUCKETS, registry=reg)
        self._phase = Histogram("slurmxd_cycle_phase_seconds", "Wall time of one Slurm-facing part of a cycle: "
                                "observe (Slurm read, follow-up), enforce (the plan applied, leases renewed, audit).",
                                ["phase"], buckets=_BUCKETS, registry=reg)
        self._actions = Counter("slurmxd_actions", "Actions enforced, by type and outcome.", ["type", "outcome"],
                                registry=reg)
        self._preemptions = Counter("slurmxd_preemptions", "Grace signals sent (preemptions begun).", registry=reg)
        self._errors = Counter("slurmxd_cycle_failures", "Failed cycles, by where they failed: cycle (Slurm down or "
                               "an exception), watchdog (abandoned past its time limit).", ["where"], registry=reg)
        self._groups = Gauge("slurmxd_groups", "slurmx groups in the latest cycle's snapshot, by state: pending "
                             "(no variant started yet), running (a variant runs), rejected (set aside before the "
                             "policy: a foreign copy of a tag, an unreadable tag or folder), quarantined (set aside "
                             "after the policy failed on its data).", ["state"], registry=reg)
        self._last_ok = Gauge("slurmxd_last_cycle_timestamp_seconds", "Unix time of the last successful cycle.",
                              registry=reg)
        self._slurm_up = Gauge("slurmxd_slurm_up", "1 when the last cycle reached Slurm, else 0.", registry=reg)
        self._commands = Counter("slurmxd_slurm_commands", "Slurm commands (RPCs) run, by command.", ["command"],
                                 registry=reg)
        self._cycle_commands = Gauge("slurmxd_cycle_slurm_commands", "Slurm commands run by the last cycle "
                                     "(divide the commands rate by the start rate for commands per started group).",
                                     registry=reg)
        self._expired = Counter("slurmxd_leases_expired", "Waiting managed variants whose lease had run out before "
                                "slurmxd renewed it (slurmxd away or stalled for half a lease or more): Slurm may "
                                "have started them by itself.", registry=reg)
        self._interval = Gauge("slurmxd_interval_seconds", "The configured time between cycles (daemon.interval).",
                               registry=reg)
        self._lease = Gauge("slurmxd_lease_seconds", "The configured lease of a waiting managed variant "
                            "(daemon.lease).", registry=reg)
        for command in SLURM_COMMANDS:
            self._commands.labels(command)
        build = Gauge("slurmxd_build_info", "The running slurmx: version and Python.", ["version", "python"],
                      registry=reg)
        build.labels(package_version(), platform.python_version()).set(1)
        ProcessCollector(registry=reg)
        PlatformCollector(registry=reg)
        for kind, outcomes in ACTION_OUTCOMES.items():
            for outcome in outcomes:
                self._actions.labels(kind, outcome)
        for where in ERROR_WHERE:
            self._errors.labels(where)
        for phase in PHASES:
            self._phase.labels(phase)
        for state in GROUP_STATES:
            self._groups.labels(state)

    def configure(self, interval_s: float, lease_s: float) -> None:
        """The site's cycle interval and lease, exported so alert rules compare against this site's own values."""
        self._interval.set(interval_s)
        self._lease.set(lease_s)

    def action(self, kind: str, outcome: str) -> None:
        self._actions.labels(kind, outcome).inc()
        if kind == "preempt" and outcome == "ok":
            self._preemptions.inc()

    def error(self, where: str) -> None:
        with self._lock:
            self._wheres.add(where)
        self._errors.labels(where).inc()

    def groups(self, state: str, count: float) -> None:
        """How many groups the latest snapshot holds in `state` (GROUP_STATES)."""
        self._groups.labels(state).set(count)

    def cycle(self, seconds: float) -> None:
        """One whole cycle's wall time."""
        self._cycle.observe(seconds)

    def decision(self, seconds: float) -> None:
        """One decision's wall time (the policy and the handover's backfill)."""
        self._decision.observe(seconds)

    def phase(self, name: str, seconds: float) -> None:
        self._phase.labels(name).observe(seconds)

    def leases_expired(self, count: int) -> None:
        """`count` leases found already run out when slurmxd renewed them."""
        if count:
            self._expired.inc(count)

    def cycle_ok(self, timestamp: float) -> None:
        """A cycle ran to its end: Slurm answered it."""
        self.health.last_ok = timestamp
        self.health.slurm_up = True
        self._last_ok.set(timestamp)
        self._slurm_up.set(1)

    def cycle_idle(self, timestamp: float) -> None:
        """A cycle that deliberately read nothing (drained): the daemon is alive; Slurm's state is unknown."""
        self.health.last_ok = timestamp
        self._last_ok.set(timestamp)

    def slurm_down(self) -> None:
        """A cycle failed because Slurm did not answer or refused."""
        self.health.slurm_up = False
        self._slurm_up.set(0)

    def slurm_commands(self, counts: Mapping[str, int]) -> None:
        """Add the Slurm commands run since the last call (deltas, by command name); the last cycle's total."""
        self._cycle_commands.set(sum(counts.values()))
        for command, count in counts.items():
            if count < 0:
                raise ValueError(f"slurm_commands: {command}: a count of {count}; pass what ran since the last call")
            if count:
                self._commands.labels(command).inc(count)

    @property
    def errors(self) -> dict[str, int]:
        """Failed cycles by where, the non-zero ones only (tests and logs)."""
        with self._lock:
            wheres = sorted(self._wheres)
        counts = {w: int(self.registry.get_sample_value("slurmxd_cycle_failures_total", {"where": w}) or 0)
                  for w in wheres}
        return {w: n for w, n in counts.items() if n}

    def render(self) -> str:
        """The Prometheus text exposition of every metric on this registry."""
        return generate_latest(self.registry).decode()
