"""The daemon's wake-up socket: `notify` (in `slurmx submit`) sends a datagram, `Waker` (in slurmxd) ends its wait
between cycles on one. Standard library only, so the submit path pays nothing for it. Best effort: without a daemon
or socket, it decides at its next tick.

The socket is world-writable (any user's submission may wake the root daemon), so wake-ups are rationed per sender.
The kernel stamps each datagram with the sender's uid (SO_PASSCRED), which an unprivileged user cannot forge; each
uid earns at most one early cycle per `PER_USER_S`, and all senders together end the wait at most once per `FLOOR_S`.
"""

from __future__ import annotations

import contextlib
import math
import select
import socket
import struct
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from slurmx.core.wake import notify

if TYPE_CHECKING:
    import threading

__all__ = ["ANONYMOUS", "FLOOR_S", "PER_USER_S", "WakeLimit", "Waker", "notify", "sender_uid"]

PER_USER_S = 5.0  # one uid's early cycles: at most one per this many seconds
FLOOR_S = 1.0  # all uids together: the wait ends early at most once per this many seconds
MAX_SENDERS = 4096  # uids remembered at once; past it, new senders wait for the tick
ANONYMOUS = -1  # datagrams without credentials share one allowance
_DRAIN_MAX = 1024  # datagrams read per readiness, so a flood cannot keep the waiter reading past its deadline
_UCRED = struct.Struct("iII")  # struct ucred: pid_t pid; uid_t uid; gid_t gid


@dataclass
class WakeLimit:
    """Which wake-ups may end the daemon's wait: bookkeeping over (uid, time) only, no I/O.

    `granted` maps each uid that earned a wake-up within `per_user_s` to when it did, oldest first (entries are only
    added when absent), so forgetting the expired ones stops at the first fresh entry.
    """

    per_user_s: float = PER_USER_S
    floor_s: float = FLOOR_S
    max_senders: int = MAX_SENDERS
    granted: dict[int, float] = field(default_factory=dict)
    owed: bool = False  # a wake-up earned and not yet given (the floor may hold it back up to `floor_s`)
    _last_early: float = -math.inf  # when a wait last ended early

    def admit(self, uid: int, now: float) -> bool:
        """Whether a datagram from `uid` at `now` earns a wake-up: not if this uid earned one within `per_user_s`."""
        while self.granted:
            oldest, when = next(iter(self.granted.items()))
            if now - when < self.per_user_s:
                break
            del self.granted[oldest]
        if uid in self.granted or len(self.granted) >= self.max_senders:
            return False
        self.granted[uid] = now
        self.owed = True
        return True

    def due(self) -> float | None:
        """When the owed wake-up may end the wait (now, or once the floor has passed); None when none is owed."""
        return self._last_early + self.floor_s if self.owed else None

    def give(self, now: float) -> None:
        """The wait ended early at `now`."""
        self.owed = False
        self._last_early = now


def sender_uid(ancdata: Iterable[tuple[int, int, bytes]], flags: int) -> int:
    """The uid the kernel stamped on a datagram (SCM_CREDENTIALS); `ANONYMOUS` when it carries none."""
    if not flags & socket.MSG_CTRUNC:
        for level, kind, data in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(data) >= _UCRED.size:
                return int(_UCRED.unpack_from(data)[1])
    return ANONYMOUS


class Waker:
    """A unix datagram socket `slurmx submit` pokes so the daemon decides at once instead of at the next tick.

    Linux only (SO_PASSCRED), like slurmxd. A datagram's content means nothing; its sender's uid is all that counts.
    """

    def __init__(self, path: Path, limit: WakeLimit | None = None) -> None:
        self.path = path
        self.limit = WakeLimit() if limit is None else limit
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        path.parent.mkdir(parents=True, exist_ok=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # before bind: every datagram has a uid
        self.sock.bind(str(path))
        path.chmod(0o666)  # any user's `slurmx submit` may wake the daemon, within its allowance
        self._cmsg_size = socket.CMSG_SPACE(_UCRED.size)

    def wait(self, timeout: float, stop: threading.Event) -> None:
        """Sleep up to `timeout` or until `stop`; end early only for a wake-up `limit` lets through."""
        deadline = time.monotonic() + timeout
        while not stop.is_set():
            now = time.monotonic()
            due = self.limit.due()
            if due is not None and now >= due:
                self.limit.give(now)
                return
            if now >= deadline:
                self.limit.owed = False  # this tick's cycle serves it
                return
            until = deadline if due is None else min(deadline, due)
            ready, _, _ = select.select([self.sock], [], [], min(until - now, 0.5))
            if ready:
                self._drain(time.monotonic())

    def _drain(self, now: float) -> None:
        """Read what is queued (a bounded number), counting each datagram against its sender's allowance."""
        for _ in range(_DRAIN_MAX):
            try:
                _, ancdata, flags, _ = self.sock.recvmsg(64, self._cmsg_size, socket.MSG_DONTWAIT)
            except OSError:  # BlockingIOError: drained
                return
            self.limit.admit(sender_uid(ancdata, flags), now)

    def close(self) -> None:
        self.sock.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
