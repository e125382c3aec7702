"""The metrics endpoint stays bounded under abuse (issue 31, item 7): real sockets against a real server.

Idle connections (a client that connects and says nothing, or a byte now and then) used to hold a thread each for
good; with systemd's TasksMax the daemon then could not fork squeue. Each connection now has a few seconds in all,
at most `MAX_CONNECTIONS` are served at once, and one more is answered 503 and closed at once.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmx.daemon.endpoint import CONNECTION_TIMEOUT_S, MAX_CONNECTIONS, serve_metrics
from slurmx.daemon.metrics import Metrics


@contextlib.contextmanager
def served(**limits: float) -> Iterator[tuple[object, int]]:
    server = serve_metrics(Metrics(), 0, **limits)  # type: ignore[arg-type]
    try:
        yield server, server.server_port
    finally:
        server.shutdown()
        server.server_close()


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=30)


def closed_by_server(sock: socket.socket, within: float) -> tuple[bool, bytes]:
    """Whether the server ends this connection within `within` seconds, and what it said before."""
    sock.settimeout(within)
    said = b""
    try:
        while chunk := sock.recv(4096):
            said += chunk
    except TimeoutError:
        return False, said
    except ConnectionResetError:
        pass
    return True, said


def scrape(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_idle_connections_neither_pile_up_threads_nor_stop_a_scrape() -> None:
    """Three times the cap of idle connections: the excess is refused at once, the thread count stays bounded,
    a scrape succeeds within the timeout, and every idle one is closed after it."""
    base = threading.active_count()
    with served() as (_server, port):
        idle = [connect(port) for _ in range(3 * MAX_CONNECTIONS)]
        time.sleep(0.5)  # let the server accept them all
        assert threading.active_count() <= base + 1 + MAX_CONNECTIONS  # + the accepting thread
        started = time.monotonic()
        while (status := scrape(port)) != 200:
            assert status == 503
            assert time.monotonic() - started < CONNECTION_TIMEOUT_S + 2, "no scrape got through"
            time.sleep(0.1)
        assert time.monotonic() - started < CONNECTION_TIMEOUT_S + 2
        answers = [closed_by_server(sock, CONNECTION_TIMEOUT_S + 2) for sock in idle]
        assert all(closed for closed, _ in answers)
        refused = [said for _, said in answers if said]
        assert len(refused) >= 2 * MAX_CONNECTIONS - 1  # the excess, answered at once
        assert all(said.startswith(b"HTTP/1.0 503 ") and said.endswith(b"too many connections, retry\n")
                   for said in refused)
        for sock in idle:
            sock.close()
        time.sleep(0.5)
        assert threading.active_count() <= base + 1


def test_a_client_dribbling_bytes_is_cut_off_at_the_deadline_in_all() -> None:
    """A byte every 0.2 s never trips a per-read timeout; the deadline counts from the connection."""
    with served(timeout_s=1.0) as (_server, port), connect(port) as sock:
        started = time.monotonic()
        sock.settimeout(0.2)
        closed = False
        for byte in b"GET /metrics HTTP/1.0\r\nX-Slow: " + b"a" * 100:
            try:
                sock.send(bytes([byte]))
                if sock.recv(1) == b"":
                    closed = True
                    break
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
        assert closed and time.monotonic() - started < 2.5


@settings(max_examples=6, deadline=None)
@given(clients=st.lists(st.sampled_from(["idle", "partial", "scrape", "close"]), min_size=1, max_size=24),
       cap=st.integers(1, 6))
def test_any_mix_of_clients_keeps_the_threads_within_the_cap(clients: list[str], cap: int) -> None:
    base = threading.active_count()
    with served(timeout_s=0.4, max_connections=cap) as (server, port):
        socks = []
        for kind in clients:
            if kind == "scrape":
                assert scrape(port) in (200, 503)
                continue
            sock = connect(port)
            if kind == "partial":
                sock.sendall(b"GET /metrics HTTP/1.0\r\n")
            if kind == "close":
                sock.close()
            else:
                socks.append(sock)
        time.sleep(0.2)
        assert threading.active_count() <= base + 1 + cap
        assert server.open_connections() <= cap  # type: ignore[attr-defined]
        time.sleep(0.8)  # past the deadline: nothing idle is left open
        assert server.open_connections() == 0  # type: ignore[attr-defined]
        assert scrape(port) == 200
        for sock in socks:
            sock.close()


@pytest.mark.parametrize("path", ["/metrics", "/healthz"])
def test_ordinary_scrapes_are_untouched(path: str) -> None:
    with served() as (_server, port):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
                status = answer.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        assert status in (200, 503) and (path == "/healthz" or status == 200)
