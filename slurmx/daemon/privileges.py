"""What slurmxd's user may do beyond being a Slurm operator, as one line per missing privilege.

Two privileges besides the operator's (docs/daemon.md, "Permissions"), each needed by one feature:

- access to the users' group folders (mode 0700, owned by each user): the grace protocol writes its intent files
  there (preemption, running-job resize; without them a job falls back to its own grace period) and the profiler
  reads progress files; root's CAP_DAC_OVERRIDE on the daemon's own host, where the spool is mounted. Profiling
  samples need nothing more: users queue them, the daemon releases them, they report their timings in comments;
- CAP_NET_BIND_SERVICE for a metrics port below the kernel's first unprivileged port (1024 by default).

A missing one disables its feature, not the daemon: each is logged at start-up, naming the feature and the fix.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from slurmx.core.config import SiteConfig

__all__ = ["CAP_DAC_OVERRIDE", "CAP_NET_BIND_SERVICE", "Privileges", "effective_capabilities",
           "local_privileges", "privilege_warnings"]

CAP_DAC_OVERRIDE = 1  # capability numbers, linux/capability.h
CAP_NET_BIND_SERVICE = 10
_UNPRIVILEGED_PORT_START = Path("/proc/sys/net/ipv4/ip_unprivileged_port_start")


@dataclass(frozen=True, slots=True)
class Privileges:
    capabilities: int  # the daemon process's effective capability mask (bit n: capability n)
    remote_user: str  # who Slurm's commands run as (the transport's user)
    remote_uid: int | None  # None: unknown (`id -u` failed)
    first_unprivileged_port: int = 1024

    def has(self, capability: int) -> bool:
        return bool(self.capabilities >> capability & 1)


def effective_capabilities(status_text: str) -> int | None:
    """The `CapEff:` mask of a /proc/PID/status text; None when absent."""
    for line in status_text.splitlines():
        key, _, value = line.partition(":")
        if key == "CapEff":
            try:
                return int(value.strip(), 16)
            except ValueError:
                return None
    return None


def local_privileges(remote_user: str, remote_uid: int | None) -> Privileges:
    """This process's capabilities (root's full set when /proc says nothing) beside the transport's user."""
    try:
        caps = effective_capabilities(Path("/proc/self/status").read_text())
    except OSError:
        caps = None
    if caps is None:
        caps = (1 << 64) - 1 if os.geteuid() == 0 else 0
    try:
        first = int(_UNPRIVILEGED_PORT_START.read_text().strip())
    except (OSError, ValueError):
        first = 1024
    return Privileges(caps, remote_user, remote_uid, first)


def privilege_warnings(site: SiteConfig, privileges: Privileges) -> list[str]:
    """One line per missing privilege: what is missing, the feature it disables, the fix (pure)."""
    lines: list[str] = []
    if not privileges.has(CAP_DAC_OVERRIDE):
        lines.append("no access to the users' group folders (slurmxd is not root and lacks CAP_DAC_OVERRIDE): "
                     "preemptions and resizes are signalled without their intent files (jobs use their own grace "
                     "period, not the daemon's deadline) and running jobs' progress files go unread; run slurmxd as "
                     "root or give it CAP_DAC_OVERRIDE (docs/daemon.md, \"Permissions\": a systemd drop-in)")
    port = site.daemon.metrics_port
    if port and port < privileges.first_unprivileged_port and not privileges.has(CAP_NET_BIND_SERVICE):
        lines.append(f"daemon.metrics_port {port} is below {privileges.first_unprivileged_port} and slurmxd lacks "
                     "CAP_NET_BIND_SERVICE: the metrics and /healthz endpoint cannot listen; choose a port of "
                     f"{privileges.first_unprivileged_port} or more, or run as root")
    return lines
