"""slurmxd's HTTP endpoint: `/metrics` (Prometheus text) and `/healthz` on one port, in a daemon thread.

`/healthz` is 200 while cycles succeed and Slurm answers, else 503 with the reason: what a systemd watchdog
script, a load balancer or a Kubernetes probe can act on without parsing metrics.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST

from slurmx.daemon.metrics import Metrics

__all__ = ["health_limit", "serve_metrics"]

HEALTH_INTERVALS = 3
HEALTH_SLACK_S = 30.0


def health_limit(interval_s: float) -> float:
    """How old the last successful cycle may be before `/healthz` fails: a few intervals and some slack."""
    return HEALTH_INTERVALS * interval_s + HEALTH_SLACK_S


def serve_metrics(metrics: Metrics, port: int, host: str = "127.0.0.1", *, max_age_s: float = 60.0,
                  clock: Callable[[], float] = time.time) -> ThreadingHTTPServer:
    """Serve `/metrics` and `/healthz` on host:port (port 0: any free one; `server_port` says which)."""

    class Handler(BaseHTTPRequestHandler):
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

    server_class = _Server6 if _family(host, port) == socket.AF_INET6 else ThreadingHTTPServer
    server = server_class((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="slurmx-metrics", daemon=True).start()
    return server


class _Server6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


def _family(host: str, port: int) -> int:
    """The address family `host` resolves to first (IPv6 for '::1' or a v6-only name)."""
    try:
        return int(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0])
    except (OSError, IndexError):
        return int(socket.AF_INET)  # the bind then says what is wrong with the name
