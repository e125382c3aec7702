"""The wake-up datagram `slurmx submit` sends slurmxd's socket so a new group is decided before the next tick.

The sending half lives here so the submitter needs nothing of the daemon; the daemon's receiving half, with its
per-user ration, is `slurmx.daemon.wake`.
"""

from __future__ import annotations

import socket
from pathlib import Path

__all__ = ["WAKE_MESSAGE", "notify"]

WAKE_MESSAGE = b"wake"


def notify(path: Path | None) -> bool:
    """Send one wake-up to the daemon's socket; says whether it was delivered to a listening socket."""
    if path is None:
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            # Non-blocking: a queue filled by someone's flood must not stall a submission (the tick still comes).
            sock.sendto(WAKE_MESSAGE, socket.MSG_DONTWAIT, str(path))
    except OSError:
        return False
    return True
