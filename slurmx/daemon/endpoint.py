"""slurmxd's HTTP endpoint: `/metrics` (Prometheus text) and `/healthz` on one port, in a daemon thread.

`/healthz` is 200 while cycles succeed and Slurm answers, else 503 with the reason: what a systemd watchdog
script, a load balancer or a Kubernetes probe can act on without parsing metrics.

Bounded under abuse: anyone who can reach the port may open connections, and each one holds a thread (a task under
systemd's TasksMax, which the daemon also needs to fork squeue and scontrol). So each connection has
`CONNECTION_TIMEOUT_S` in all for its request to arrive and its answer to go out, then it is shut down; and at most
`MAX_CONNECTIONS` are served at once: one more is answered 503 and closed at once, never queued.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST

from slurmx.daemon.metrics import Metrics

__all__ = ["CONNECTION_TIMEOUT_S", "MAX_CONNECTIONS", "health_limit", "serve_metrics"]

log = logging.getLogger("slurmxd")

HEALTH_INTERVALS = 3
HEALTH_SLACK_S = 30.0
CONNECTION_TIMEOUT_S = 5.0  # for the request to arrive and the answer to go out, in all
MAX_CONNECTIONS = 16  # served at once; a scrape takes milliseconds, so only an abuser meets the cap
_BUSY = (b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 37\r\n"
         b"Connection: close\r\n\r\nslurmxd: too many connections, retry\n")


def health_limit(interval_s: float) -> float:
    """How old the last successful cycle may be before `/healthz` fails: a few intervals and some slack."""
    return HEALTH_INTERVALS * interval_s + HEALTH_SLACK_S


def serve_metrics(metrics: Metrics, port: int, host: str = "127.0.0.1", *, max_age_s: float = 60.0,
                  clock: Callable[[], float] = time.time, timeout_s: float = CONNECTION_TIMEOUT_S,
                  max_connections: int = MAX_CONNECTIONS) -> ThreadingHTTPServer:
    """Serve `/metrics` and `/healthz` on host:port (port 0: any free one; `server_port` says which)."""

    class Handler(BaseHTTPRequestHandler):
        timeout = timeout_s  # each read and write; `_Server` bounds the whole connection

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0].rstrip("/")
            if path in ("/metrics", ""):
                self._send(200, CONTENT_TYPE_LATEST, metrics.render().encode())
            elif path == "/healthz":
                ok, reason = metrics.health.check(clock(), max_age_s)
                body = json.dumps({"status": "ok" if ok else "unhealthy", "reason": reason}) + "\n"
                self._send(200 if ok else 503, "application/json", body.encode())
            else:
                self.send_error(404)

        def _send(self, status: int, content_type: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server_class = _Server6 if _family(host, port) == socket.AF_INET6 else _Server
    server = server_class((host, port), Handler, timeout_s=timeout_s, max_connections=max_connections)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": min(0.5, timeout_s / 4)},
                     name="slurmx-metrics", daemon=True).start()
    return server


class _Server(ThreadingHTTPServer):
    """A thread per connection, at most `max_connections` of them, none living past `timeout_s`.

    The accepting thread reaps: between two accepts (`service_actions`, every poll interval) it shuts down each
    connection past its deadline, which ends the blocked read or write of the thread serving it.
    """

    daemon_threads = True
    request_queue_size = 64  # the listen backlog: a burst is accepted (and refused or served) at once, not left
    # retrying its SYN for seconds, which would delay an honest scrape behind it

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], *, timeout_s: float,
                 max_connections: int) -> None:
        self.timeout_s = timeout_s
        self.max_connections = max_connections
        self.refused = 0  # connections answered 503 at the cap
        self.reaped = 0  # connections shut down at their deadline
        self._open: dict[socket.socket, float] = {}  # connection -> its deadline (monotonic)
        self._lock = threading.Lock()
        super().__init__(address, handler)

    def open_connections(self) -> int:
        with self._lock:
            return len(self._open)

    def process_request(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        with self._lock:
            full = len(self._open) >= self.max_connections
            if not full:
                self._open[request] = time.monotonic() + self.timeout_s
        if full:
            self.refused += 1
            with contextlib.suppress(OSError):
                request.setblocking(False)
                request.send(_BUSY)  # fits any socket buffer: never waits on the client
            super().shutdown_request(request)
            return
        super().process_request(request, client_address)

    def shutdown_request(self, request: socket.socket) -> None:  # type: ignore[override]
        with self._lock:
            self._open.pop(request, None)
        super().shutdown_request(request)

    def handle_error(self, request: object, client_address: object) -> None:
        """One line, not a traceback: e.g. no thread could be started (TasksMax); the connection is closed."""
        log.warning("metrics endpoint: a connection from %s failed: %s", client_address,
                    " ".join(str(sys.exc_info()[1]).split()))

    def service_actions(self) -> None:
        now = time.monotonic()
        with self._lock:  # under the lock: `shutdown_request` cannot close one of these meanwhile
            for connection, deadline in self._open.items():
                if deadline <= now:
                    with contextlib.suppress(OSError):
                        connection.shutdown(socket.SHUT_RDWR)
                    self._open[connection] = float("inf")  # shut down once; its thread closes it
                    self.reaped += 1


class _Server6(_Server):
    address_family = socket.AF_INET6


def _family(host: str, port: int) -> int:
    """The address family `host` resolves to first (IPv6 for '::1' or a v6-only name)."""
    try:
        return int(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0])
    except (OSError, IndexError):
        return int(socket.AF_INET)  # the bind then says what is wrong with the name
