"""slurmxd keeps going whatever one cycle does (raises anything, hangs in a system call), and no user can make it
cycle back to back through its world-writable wake-up socket."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import struct
import threading
import time
from pathlib import Path

import pytest

from slurmx.core.model import Node
from slurmx.daemon.loop import Daemon
from slurmx.daemon.store import Store
from slurmx.daemon.wake import ANONYMOUS, WakeLimit, Waker, notify, sender_uid
from slurmx.policies.base import make_policy
from slurmx.slurm.records import SlurmJob
from tests.unit.test_daemon import SITE, FakeSlurm, job

# ------------------------------------------------------------------------------------------------ the loop


class Ticks(threading.Event):
    """A stop event whose waits return at once and record their length; it sets itself after `waits` waits."""

    def __init__(self, waits: int) -> None:
        super().__init__()
        self.limit = waits
        self.waits: list[float | None] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout)
        if len(self.waits) >= self.limit:
            self.set()
        return self.is_set()


class FailingSlurm(FakeSlurm):
    """Raises the next of `failures` from `nodes()`, one per cycle (None: that cycle goes through)."""

    def __init__(self, failures: list[BaseException | None]) -> None:
        super().__init__([job(1, "a"), job(2, "b")])
        self.failures = failures

    def nodes(self) -> list[Node]:
        failure = self.failures.pop(0) if self.failures else None
        if failure is not None:
            raise failure
        return super().nodes()


def _daemon(tmp_path: Path, adapter: FakeSlurm, **kw: object) -> Daemon:
    return Daemon(SITE, adapter, Store(tmp_path / "s.sqlite"), make_policy("fifo"),  # type: ignore[arg-type]
                  clock=lambda: 1000.0, **kw)  # type: ignore[arg-type]


def _alarm_state() -> tuple[object, tuple[float, float]]:
    return signal.getsignal(signal.SIGALRM), signal.getitimer(signal.ITIMER_REAL)


def test_a_cycle_raising_any_exception_is_logged_counted_backed_off_and_the_loop_goes_on(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    failures: list[BaseException | None] = [ValueError("parser bug in job 7"), ValueError("parser bug in job 8"),
                                            RecursionError("deep"), None, None]
    fake = FailingSlurm(failures)
    daemon = _daemon(tmp_path, fake)
    before = _alarm_state()
    stop = Ticks(5)
    with caplog.at_level(logging.ERROR, logger="slurmxd"):
        daemon.run(stop)
    assert daemon.cycles == 5 and daemon.metrics.errors["cycle"] == 3
    assert stop.waits == [10.0, 20.0, 40.0, 5.0, 5.0]  # backed off like Slurm down, then the interval again
    assert "release" in fake.verbs()  # the cycles after the failures decided and acted
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 3
    # The traceback once per cause: the second ValueError (same line, other message) gets one line only.
    assert [r.exc_info is not None for r in errors] == [True, False, True]
    assert "ValueError: parser bug in job 8" in errors[1].getMessage()
    assert "\n" not in errors[1].getMessage()
    assert _alarm_state() == before  # the previous SIGALRM handler is back, no timer left armed


def test_keyboard_interrupt_and_system_exit_still_end_the_loop(tmp_path: Path) -> None:
    before = _alarm_state()
    for stopper in (KeyboardInterrupt(), SystemExit(3)):
        daemon = _daemon(tmp_path, FailingSlurm([ValueError("x"), stopper]))
        with pytest.raises(type(stopper)):
            daemon.run(Ticks(10))
        assert daemon.cycles == 2
        assert _alarm_state() == before


def test_off_the_main_thread_the_loop_survives_failures_without_touching_sigalrm(tmp_path: Path) -> None:
    fake = FailingSlurm([OSError("planted file"), None])
    daemon = _daemon(tmp_path, fake)
    before = _alarm_state()
    stop = Ticks(2)
    seen: list[object] = []

    def loop() -> None:
        daemon.run(stop)
        seen.append(signal.getsignal(signal.SIGALRM))

    thread = threading.Thread(target=loop)
    thread.start()
    thread.join(10)
    assert not thread.is_alive()
    assert daemon.cycles == 2 and daemon.metrics.errors["cycle"] == 1
    assert seen == [before[0]] and _alarm_state() == before


def test_the_cycle_limit_is_derived_from_the_interval_unless_given(tmp_path: Path) -> None:
    assert _daemon(tmp_path, FakeSlurm([])).cycle_limit() == 120.0  # 20 x 5 s is less than the floor
    slow = SITE.model_copy(update={"daemon": SITE.daemon.model_copy(update={"interval_s": 30})})
    assert Daemon(slow, FakeSlurm([]), Store(":memory:"),  # type: ignore[arg-type]
                  make_policy("fifo")).cycle_limit() == 600.0
    assert _daemon(tmp_path, FakeSlurm([]), cycle_limit_s=0.5).cycle_limit() == 0.5


class StuckSlurm(FakeSlurm):
    """The first `jobs()` opens a FIFO nobody writes to: a read that blocks forever in open(2)."""

    def __init__(self, fifo: Path) -> None:
        super().__init__([job(1, "a")])
        self.fifo = fifo
        self.stuck = 0

    def jobs(self, job_ids: object = None, user: str | None = None) -> list[SlurmJob]:
        if not self.stuck:
            self.stuck += 1
            with open(self.fifo, "rb") as planted:
                planted.read()
        return super().jobs()


def _rescue(fifo: Path, seconds: float) -> threading.Event:
    """If the watchdog fails, open the FIFO's other end after `seconds` so the test fails instead of hanging."""
    done = threading.Event()

    def rescue() -> None:
        if not done.wait(seconds):
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

    threading.Thread(target=rescue, daemon=True).start()
    return done


@pytest.mark.timeout(60, method="thread")  # the watchdog owns SIGALRM here
def test_a_cycle_stuck_in_a_blocking_open_is_abandoned_by_the_watchdog(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    fifo = tmp_path / "planted"
    os.mkfifo(fifo)
    fake = StuckSlurm(fifo)
    daemon = _daemon(tmp_path, fake, cycle_limit_s=0.3)
    before = _alarm_state()
    done = _rescue(fifo, 15)
    began = time.monotonic()
    stop = Ticks(2)
    with caplog.at_level(logging.ERROR, logger="slurmxd"):
        daemon.run(stop)
    done.set()
    assert time.monotonic() - began < 10
    assert daemon.cycles == 2 and daemon.metrics.errors == {"watchdog": 1}
    assert stop.waits == [10.0, 5.0]
    assert fake.verbs()  # the next cycle ran normally
    [line] = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert "abandoned" in line and "0.3 s limit" in line and "\n" not in line
    assert _alarm_state() == before


# ------------------------------------------------------------------------------------------------ wake-ups


@pytest.mark.timeout(60, method="thread")
def test_a_thousand_wake_ups_from_one_user_end_the_wait_early_at_most_twice(tmp_path: Path) -> None:
    waker = Waker(tmp_path / "w.sock")
    stop = threading.Event()
    early: list[float] = []
    began = time.monotonic()

    def waiter() -> None:
        while not stop.is_set():
            waker.wait(10.0, stop)
            if not stop.is_set():
                early.append(time.monotonic() - began)

    thread = threading.Thread(target=waiter)
    thread.start()
    try:
        delivered = 0
        for _ in range(1000):
            delivered += notify(waker.path)
            time.sleep(0.0008)
        time.sleep(max(0.0, 2.0 - (time.monotonic() - began)))
    finally:
        stop.set()
        thread.join(5)
        waker.close()
    assert delivered > 500  # the flood did reach the socket
    assert 1 <= len(early) <= 2, early
    assert list(waker.limit.granted) == [os.getuid()]  # the kernel's credentials of this process, not anonymous


def test_rate_limit_decision_gives_a_second_uid_its_own_wake_up_after_the_floor() -> None:
    """The decision function alone, called with a second uid (sending as another uid needs root; see below)."""
    limit = WakeLimit(per_user_s=5.0, floor_s=1.0)
    assert limit.admit(1000, 0.0)
    due = limit.due()
    assert due is not None and due <= 0.0  # the first wake-up ends the wait at once
    limit.give(0.0)
    assert limit.due() is None
    assert not limit.admit(1000, 0.1) and not limit.admit(1000, 4.9)  # drained, not woken
    assert limit.due() is None
    assert limit.admit(2000, 0.2) and limit.due() == 1.0  # its own wake-up, once the floor has passed
    assert not limit.admit(2000, 0.3)
    limit.give(1.0)
    assert limit.admit(1000, 5.0)  # its window is over
    assert list(limit.granted) == [2000, 1000]


def test_rate_limit_table_forgets_old_senders_and_is_bounded() -> None:
    limit = WakeLimit(per_user_s=5.0, max_senders=2)
    assert limit.admit(1, 0.0) and limit.admit(2, 0.0)
    assert not limit.admit(3, 1.0)  # full: a new sender waits for the tick
    assert limit.admit(3, 5.0) and list(limit.granted) == [3]


def test_a_datagram_without_credentials_counts_as_the_one_anonymous_sender() -> None:
    assert sender_uid([], 0) == ANONYMOUS
    creds = struct.pack("iII", 1, 1234, 1234)
    assert sender_uid([(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, creds)], 0) == 1234
    assert sender_uid([(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, creds)], socket.MSG_CTRUNC) == ANONYMOUS


def _send_as(path: Path, uid: int) -> None:
    """One wake-up stamped with `uid` (root may claim any); dropped, like `notify`'s, when the queue is full."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock, contextlib.suppress(BlockingIOError):
        creds = struct.pack("iII", os.getpid(), uid, os.getgid())
        sock.sendmsg([b"wake"], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, creds)], socket.MSG_DONTWAIT,
                     str(path))


@pytest.mark.timeout(60, method="thread")
@pytest.mark.skipif(os.geteuid() != 0, reason="sending as another uid needs CAP_SETUID")
def test_two_senders_with_different_uids_each_wake_the_daemon(tmp_path: Path) -> None:
    waker = Waker(tmp_path / "w.sock")
    other = 4242 if os.getuid() != 4242 else 4343
    try:
        _send_as(waker.path, other)
    except OSError as exc:  # no CAP_SETUID in this namespace, or the uid is not mapped in it
        waker.close()
        pytest.skip(f"cannot send as uid {other}: {exc}")
    stop = threading.Event()
    try:
        began = time.monotonic()
        waker.wait(10.0, stop)
        assert time.monotonic() - began < 1.0  # the other uid's wake-up, at once
        _send_as(waker.path, other)  # its second: drained
        notify(waker.path)  # this process's uid: its own, held back by the floor
        began = time.monotonic()
        waker.wait(10.0, stop)
        assert 0.3 < time.monotonic() - began < 2.0
        for _ in range(20):
            _send_as(waker.path, other)
            notify(waker.path)
        began = time.monotonic()
        waker.wait(1.5, stop)
        assert time.monotonic() - began >= 1.4  # both spent: the wait runs to its end
        assert sorted(waker.limit.granted) == sorted([other, os.getuid()])
    finally:
        waker.close()
