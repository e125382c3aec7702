"""Prometheus metrics for slurmxd: counters and gauges in memory, served as text on 127.0.0.1 by the stdlib.

No client library: the exposition format is a few lines of text, and the daemon needs five metric families.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["Metrics", "serve_metrics"]

_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    """Thread-safe: the loop writes, the HTTP thread reads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.actions: dict[tuple[str, str], int] = defaultdict(int)
        self.errors: dict[str, int] = defaultdict(int)
        self.gauges: dict[str, float] = {}
        self.cycles = 0
        self.latency_count = 0
        self.latency_sum = 0.0
        self.latency_buckets = [0] * len(_BUCKETS)

    def action(self, kind: str, outcome: str) -> None:
        with self._lock:
            self.actions[(kind, outcome)] += 1

    def error(self, where: str) -> None:
        with self._lock:
            self.errors[where] += 1

    def gauge(self, name: str, value: float) -> None:
        with self._lock:
            self.gauges[name] = value

    def decision(self, seconds: float) -> None:
        with self._lock:
            self.cycles += 1
            self.latency_count += 1
            self.latency_sum += seconds
            for i, bound in enumerate(_BUCKETS):
                if seconds <= bound:
                    self.latency_buckets[i] += 1

    def render(self) -> str:
        with self._lock:
            lines = ["# HELP slurmx_decision_seconds Time of one observe-decide-enforce cycle.",
                     "# TYPE slurmx_decision_seconds histogram"]
            for bound, count in zip(_BUCKETS, self.latency_buckets, strict=True):
                lines.append(f'slurmx_decision_seconds_bucket{{le="{bound}"}} {count}')
            lines += [f'slurmx_decision_seconds_bucket{{le="+Inf"}} {self.latency_count}',
                      f"slurmx_decision_seconds_sum {self.latency_sum:.6f}",
                      f"slurmx_decision_seconds_count {self.latency_count}",
                      "# HELP slurmx_actions_total Actions enforced, by type and outcome.",
                      "# TYPE slurmx_actions_total counter"]
            lines += [f'slurmx_actions_total{{type="{k}",outcome="{o}"}} {n}'
                      for (k, o), n in sorted(self.actions.items())]
            preempted = sum(n for (k, o), n in self.actions.items() if k == "preempt" and o == "ok")
            lines += ["# HELP slurmx_preemptions_total Grace signals sent.", "# TYPE slurmx_preemptions_total counter",
                      f"slurmx_preemptions_total {preempted}",
                      "# HELP slurmx_errors_total Failed cycles and actions, by where.",
                      "# TYPE slurmx_errors_total counter"]
            lines += [f'slurmx_errors_total{{where="{w}"}} {n}' for w, n in sorted(self.errors.items())]
            lines += ["# HELP slurmx_queue Groups by state in the latest snapshot.", "# TYPE slurmx_queue gauge"]
            lines += [f'slurmx_queue{{state="{k}"}} {v:g}' for k, v in sorted(self.gauges.items())]
            return "\n".join(lines) + "\n"


def serve_metrics(metrics: Metrics, port: int, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """Serve `/metrics` in a daemon thread; returns the server (its `server_port` is the bound port)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.rstrip("/") not in ("/metrics", ""):
                self.send_error(404)
                return
            body = metrics.render().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="slurmx-metrics", daemon=True).start()
    return server
