"""slurmxd's Prometheus metrics, on a registry of their own (tests build many daemons; the global one is shared).

Every counter starts at zero for each label value the daemon knows, so a scrape before the first event shows the
series (a rate over an absent series is no rate at all). `endpoint` serves them with `/healthz`.
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
    generate_latest,
)

__all__ = ["ACTION_OUTCOMES", "ERROR_WHERE", "PHASES", "Health", "Metrics", "package_version"]

_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
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
PHASES = ("observe", "decide", "enforce")  # one cycle's parts, timed apart
SLURM_COMMANDS = ("squeue", "scontrol", "scancel", "sbatch", "sacct", "sacctmgr")  # zero from the start


def package_version() -> str:
    """The installed slurmx's version ('unknown' when run from a tree that was never installed)."""
    try:
        return metadata.version("slurmx")
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
        self._decision = Histogram("slurmx_decision_seconds", "Time of one observe-decide-enforce cycle.",
                                   buckets=_BUCKETS, registry=reg)
        self._phase = Histogram("slurmxd_cycle_phase_seconds", "Time of one part of a cycle: observe (Slurm read, "
                                "follow-up), decide (the policy), enforce (the plan applied).", ["phase"],
                                buckets=_BUCKETS, registry=reg)
        self._actions = Counter("slurmx_actions", "Actions enforced, by type and outcome.", ["type", "outcome"],
                                registry=reg)
        self._preemptions = Counter("slurmx_preemptions", "Grace signals sent.", registry=reg)
        self._errors = Counter("slurmx_errors", "Failed cycles, by where.", ["where"], registry=reg)
        self._queue = Gauge("slurmx_queue", "Groups by state in the latest snapshot.", ["state"], registry=reg)
        self._last_ok = Gauge("slurmxd_last_cycle_timestamp_seconds", "Unix time of the last successful cycle.",
                              registry=reg)
        self._slurm_up = Gauge("slurmxd_slurm_up", "1 when the last cycle reached Slurm, else 0.", registry=reg)
        self._commands = Counter("slurmxd_slurm_commands", "Slurm commands (RPCs) run, by command.", ["command"],
                                 registry=reg)
        self._cycle_commands = Gauge("slurmxd_cycle_slurm_commands", "Slurm commands run by the last cycle "
                                     "(divide the commands rate by the start rate for commands per started group).",
                                     registry=reg)
        for command in SLURM_COMMANDS:
            self._commands.labels(command)
        build = Gauge("slurmx_build_info", "The running slurmx: version and Python.", ["version", "python"],
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

    def action(self, kind: str, outcome: str) -> None:
        self._actions.labels(kind, outcome).inc()
        if kind == "preempt" and outcome == "ok":
            self._preemptions.inc()

    def error(self, where: str) -> None:
        with self._lock:
            self._wheres.add(where)
        self._errors.labels(where).inc()

    def gauge(self, name: str, value: float) -> None:
        self._queue.labels(name).set(value)

    def decision(self, seconds: float) -> None:
        """One whole cycle's time."""
        self._decision.observe(seconds)

    def phase(self, name: str, seconds: float) -> None:
        self._phase.labels(name).observe(seconds)

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
        counts = {w: int(self.registry.get_sample_value("slurmx_errors_total", {"where": w}) or 0) for w in wheres}
        return {w: n for w, n in counts.items() if n}

    def render(self) -> str:
        """The Prometheus text exposition of every metric on this registry."""
        return generate_latest(self.registry).decode()
