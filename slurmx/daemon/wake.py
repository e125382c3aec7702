"""Wake slurmxd at once after a submission (a datagram on its local socket); standard library only, so the
submit path pays nothing for it. Best effort: without a daemon or socket, it decides at its next tick."""

from __future__ import annotations

import socket
from pathlib import Path

__all__ = ["notify"]


def notify(path: Path | None) -> bool:
    """Send one wake-up to the daemon's socket; says whether it was delivered to a listening socket."""
    if path is None:
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.sendto(b"wake", str(path))
    except OSError:
        return False
    return True
