"""systemd's readiness and watchdog protocol (`Type=notify`, `WatchdogSec=`), in the standard library.

The protocol is one datagram of `KEY=VALUE` lines to the AF_UNIX socket named by $NOTIFY_SOCKET (a leading '@'
names an abstract socket). slurmxd says READY=1 once its first cycle is over (the unit's start waits for the
start-up checks and one real look at Slurm, not for the process to exist), WATCHDOG=1 after every cycle
(systemd kills and restarts a loop that stops coming round: a hang the in-process SIGALRM watchdog cannot break,
such as a deadlock in C code) and STOPPING=1 on the way out. Without $NOTIFY_SOCKET (not under systemd, or
Type=simple) every call is a no-op. A failed send is logged once and otherwise ignored: the daemon's work does
not depend on systemd hearing it.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Mapping

from slurmx.daemon.loop import MAX_BACKOFF_S, Daemon

__all__ = ["Notifier", "longest_gap_s", "notifying", "watchdog_period_s"]

log = logging.getLogger("slurmxd")


def watchdog_period_s(environ: Mapping[str, str], pid: int) -> float | None:
    """The watchdog period systemd expects pings within ($WATCHDOG_USEC), or None when there is no watchdog for
    this process ($WATCHDOG_PID names another one, the value is not a positive integer, or it is unset)."""
    owner = environ.get("WATCHDOG_PID")
    if owner is not None and owner.strip() != str(pid):
        return None
    try:
        usec = int(environ.get("WATCHDOG_USEC", ""))
    except ValueError:
        return None
    return usec / 1e6 if usec > 0 else None


class Notifier:
    """Sends the daemon's state to systemd; `address` None: nobody listens and nothing is sent."""

    def __init__(self, address: str | None, watchdog_s: float | None = None) -> None:
        self.address = address
        self.watchdog_s = watchdog_s
        self.ready = False
        self._failed = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Notifier:
        env = os.environ if environ is None else environ
        return cls(env.get("NOTIFY_SOCKET") or None, watchdog_period_s(env, os.getpid()))

    def send(self, *fields: str) -> bool:
        """One datagram of `fields`, one per line; True when it was sent."""
        if self.address is None:
            return False
        target = "\0" + self.address[1:] if self.address.startswith("@") else self.address
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.sendto("\n".join(fields).encode(), target)
        except OSError as exc:
            if not self._failed:
                self._failed = True
                log.warning("systemd notification to %s failed (%s); going on without it", self.address, exc,
                            extra={"event": "sd_notify"})
            return False
        return True

    def cycle_done(self, cycles: int) -> None:
        """After each cycle, whatever its outcome (a cycle backing off from Slurm is still a live loop)."""
        if self.ready:
            self.send("WATCHDOG=1")
            return
        self.ready = True
        self.send("READY=1", f"STATUS=cycling ({cycles} cycle{'s' * (cycles != 1)} done)")

    def need_watchdog(self, longest_gap_s: float) -> None:
        """Widen the unit's watchdog to `longest_gap_s` (a cycle at its limit plus the longest wait) when the
        configured period is shorter: a slow site (a long `daemon.interval`) must not be killed for being slow."""
        if self.watchdog_s is not None and self.watchdog_s < longest_gap_s:
            usec = int(longest_gap_s * 1e6)
            if self.send(f"WATCHDOG_USEC={usec}"):
                log.info("systemd watchdog widened from %g s to %g s (a cycle's limit plus the longest wait)",
                         self.watchdog_s, longest_gap_s, extra={"event": "sd_notify"})
                self.watchdog_s = longest_gap_s

    def stopping(self) -> None:
        self.send("STOPPING=1")


def longest_gap_s(daemon: Daemon) -> float:
    """The longest time between two beats: a cycle at its limit, then the longest wait (the interval or the
    back-off cap), and half a minute to spare."""
    return daemon.cycle_limit() + max(float(daemon.site.daemon.interval_s), MAX_BACKOFF_S) + 30


def notifying(run: Callable[[Callable[[int], None]], None], daemon: Daemon,
              environ: Mapping[str, str] | None = None) -> None:
    """`run(beat)` (a daemon's loop) with systemd told of readiness, each cycle and the stop."""
    notifier = Notifier.from_env(environ)
    notifier.need_watchdog(longest_gap_s(daemon))
    try:
        run(notifier.cycle_done)
    finally:
        notifier.stopping()
