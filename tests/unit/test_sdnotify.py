"""slurmxd speaks systemd's notify protocol to a real AF_UNIX datagram socket: READY=1 after its first cycle,
WATCHDOG=1 after each later one, STOPPING=1 on the way out, and nothing at all outside systemd."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurmx.daemon import main
from slurmx.daemon.sdnotify import Notifier, watchdog_period_s
from tests.unit.test_daemon import SITE, FakeSlurm, job
from tests.unit.test_daemon_resilience import FailingSlurm, Ticks, _daemon


@contextlib.contextmanager
def listener(abstract: bool = False) -> Iterator[tuple[str, socket.socket]]:
    """A bound datagram socket as systemd's manager holds it, and the $NOTIFY_SOCKET value naming it."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.settimeout(5)
    with tempfile.TemporaryDirectory(prefix="sdn") as folder:  # short: a socket path has 108 bytes at most
        if abstract:
            name = f"slurmx-test-{os.getpid()}-{id(sock)}"
            sock.bind("\0" + name)
            address = "@" + name
        else:
            address = str(Path(folder) / "notify")
            sock.bind(address)
        try:
            yield address, sock
        finally:
            sock.close()


def received(sock: socket.socket) -> list[str]:
    """Every datagram waiting on `sock`, decoded."""
    out = []
    sock.setblocking(False)
    with contextlib.suppress(BlockingIOError):
        while True:
            out.append(sock.recv(4096).decode())
    sock.settimeout(5)
    return out


@pytest.mark.parametrize("abstract", [False, True])
def test_ready_once_then_watchdog_each_cycle_then_stopping(abstract: bool) -> None:
    with listener(abstract) as (address, sock):
        notifier = Notifier.from_env({"NOTIFY_SOCKET": address})
        for cycles in (1, 2, 3):
            notifier.cycle_done(cycles)
        notifier.stopping()
        assert received(sock) == ["READY=1\nSTATUS=cycling (1 cycle done)", "WATCHDOG=1", "WATCHDOG=1",
                                  "STOPPING=1"]


def test_outside_systemd_nothing_is_sent() -> None:
    notifier = Notifier.from_env({})
    assert notifier.address is None and notifier.watchdog_s is None
    assert not notifier.send("READY=1")
    notifier.cycle_done(1)
    notifier.stopping()


def test_a_socket_gone_away_is_one_warning_and_the_daemon_goes_on(caplog: pytest.LogCaptureFixture,
                                                                   tmp_path: Path) -> None:
    notifier = Notifier(str(tmp_path / "nobody-listens"))
    with caplog.at_level(logging.WARNING, logger="slurmxd"):
        for cycles in range(1, 4):
            notifier.cycle_done(cycles)
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == [
        f"systemd notification to {tmp_path / 'nobody-listens'} failed"]


@pytest.mark.parametrize(("environ", "period"), [
    ({"WATCHDOG_USEC": "300000000"}, 300.0),
    ({"WATCHDOG_USEC": "300000000", "WATCHDOG_PID": "4242"}, 300.0),
    ({"WATCHDOG_USEC": "300000000", "WATCHDOG_PID": "1"}, None),  # another process's watchdog
    ({"WATCHDOG_USEC": "soon"}, None),
    ({"WATCHDOG_USEC": "0"}, None),
    ({}, None),
])
def test_the_watchdog_period_is_this_processs_or_none(environ: dict[str, str], period: float | None) -> None:
    assert watchdog_period_s(environ, 4242) == period


def test_a_watchdog_shorter_than_the_loops_longest_gap_is_widened() -> None:
    with listener() as (address, sock):
        notifier = Notifier(address, watchdog_s=60.0)
        notifier.need_watchdog(45.0)
        assert received(sock) == []
        notifier.need_watchdog(210.0)
        assert received(sock) == ["WATCHDOG_USEC=210000000"] and notifier.watchdog_s == 210.0
        Notifier(address, watchdog_s=None).need_watchdog(210.0)  # no watchdog configured: none is asked for
        assert received(sock) == []


def test_the_loop_beats_after_every_cycle_failed_or_not(tmp_path: Path) -> None:
    with listener() as (address, sock):
        notifier = Notifier(address)
        daemon = _daemon(tmp_path, FailingSlurm([None, ValueError("parser bug"), None]))
        daemon.run(Ticks(3), beat=notifier.cycle_done)
        assert daemon.cycles == 3
        assert received(sock) == ["READY=1\nSTATUS=cycling (1 cycle done)", "WATCHDOG=1", "WATCHDOG=1"]


def test_run_daemon_is_ready_after_its_first_cycle_and_says_stopping_on_sigterm(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = SITE.model_copy(update={"daemon": SITE.daemon.model_copy(update={"state_dir": tmp_path, "interval_s": 1})})
    monkeypatch.setattr(main, "adapter_from_config", lambda transport: FakeSlurm([job(1, "a"), job(2, "a", "gpu")]))
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    with listener() as (address, sock):
        monkeypatch.setenv("NOTIFY_SOCKET", address)
        monkeypatch.setenv("WATCHDOG_USEC", "10000000")  # 10 s: shorter than a cycle's limit, so widened
        monkeypatch.delenv("WATCHDOG_PID", raising=False)
        beats: list[int] = []
        real_run = main.Daemon.run

        def run_then_sigterm(self: main.Daemon, stop: object, waker: object = None, beat: object = None) -> None:
            def counted(cycles: int) -> None:
                assert callable(beat)
                beat(cycles)
                beats.append(cycles)
                if cycles == 2:
                    os.kill(os.getpid(), signal.SIGTERM)  # systemctl stop

            real_run(self, stop, waker, counted)  # type: ignore[arg-type]

        monkeypatch.setattr(main.Daemon, "run", run_then_sigterm)
        try:
            main.run_daemon(site, once=False, dry_run=False, check=False)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        assert beats == [1, 2]
        messages = received(sock)
    assert messages[0].startswith("WATCHDOG_USEC=") and int(messages[0].split("=")[1]) > 10_000_000
    assert messages[1:] == ["READY=1\nSTATUS=cycling (1 cycle done)", "WATCHDOG=1", "STOPPING=1"]
