"""`slurmxd`: start-up (site, privilege and coexistence checks, lock, store, policy) and the loop or one cycle.

`--once --dry-run` prints the plan the policy makes on the live cluster and enforces nothing.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import click

from slurmx.core.config import SiteConfig
from slurmx.daemon.checks import NotOperator, run_checks
from slurmx.daemon.drain import drain, resume
from slurmx.daemon.loop import CycleReport, Daemon, Waker, acquire_lock, store_path
from slurmx.daemon.metrics import serve_metrics
from slurmx.daemon.store import Store
from slurmx.policies.base import make_policy
from slurmx.slurm import adapter_from_config

__all__ = ["JsonFormatter", "configure_logging", "run_daemon", "run_drain"]

log = logging.getLogger("slurmxd")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, message, and the group/event/cycle a record carries."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {"t": round(record.created, 3), "level": record.levelname.lower(),
                                "msg": record.getMessage()}
        for key in ("group", "event", "cycle"):
            value = getattr(record, key, None)
            if value not in (None, ""):
                data[key] = value
        return json.dumps(data)


class _TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        group = getattr(record, "group", "")
        return f"{self.formatTime(record)} slurmxd {record.levelname} {group + ': ' if group else ''}" \
               f"{record.getMessage()}"


def configure_logging(fmt: str, level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else _TextFormatter())
    log.handlers[:] = [handler]
    log.setLevel(level)
    log.propagate = False


def _plan_lines(report: CycleReport) -> list[str]:
    lines = [f"cycle {report.cycle}: {report.pending} pending, {report.running} running, "
             f"{report.rejected} ignored; {len(report.plan)} action(s) in {report.seconds * 1000:.0f} ms"]
    lines += [f"  {type(a).__name__} {a.group_id} " + " ".join(
        f"{k}={v}" for k, v in _fields(a).items()) for a in report.plan]
    lines += [f"  note: {n}" for n in report.plan.notes]
    return lines


def _fields(action: object) -> dict[str, Any]:
    from dataclasses import fields

    out = {}
    for f in fields(action):  # type: ignore[arg-type]
        value = getattr(action, f.name)
        if f.name in ("group_id",) or value in (None, (), ""):
            continue
        out[f.name] = ",".join(value) if isinstance(value, tuple) else value
    return out


def run_daemon(site: SiteConfig, *, once: bool, dry_run: bool, check: bool = True,
               log_level: int | None = None) -> None:
    """`log_level` None: warnings only for `--once` (its plan is printed), else info."""
    configure_logging(site.daemon.log_format, log_level if log_level is not None else
                      logging.WARNING if once else logging.INFO)
    adapter = adapter_from_config(site.transport)
    policy = make_policy(site.policy.name, site.policy.params, "policy")
    transport = getattr(adapter, "transport", None)
    restart_delay = 121
    if check and transport is not None:
        problem, warnings, restart_delay = run_checks(site, transport)
        if problem and not dry_run:
            raise NotOperator(problem)
        for warning in warnings:
            log.warning("coexistence: %s", warning, extra={"event": "coexistence"})
    state_dir = Path(site.daemon.state_dir)
    lock = None if dry_run else acquire_lock(state_dir)
    path = store_path(site)
    store = Store(path if (not dry_run or path.exists()) else ":memory:")
    daemon = Daemon(site, adapter, store, policy, dry_run=dry_run, restart_delay_s=restart_delay)
    if once:
        report = daemon.cycle()
        for line in _plan_lines(report):
            click.echo(line)
        for row in report.audit:
            click.echo(f"  {row[3]} {row[2] or '-'}: {row[4]}")
        return
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server = serve_metrics(daemon.metrics, site.daemon.metrics_port) if site.daemon.metrics_port is not None \
        else None
    waker = Waker(site.daemon.socket) if site.daemon.socket is not None else None
    log.info("slurmxd started: policy %s, every %d s, store %s%s", site.policy.name, site.daemon.interval_s, path,
             f", metrics on 127.0.0.1:{server.server_port}" if server else "", extra={"event": "start"})
    try:
        daemon.run(stop, waker)
    finally:
        if waker is not None:
            waker.close()
        if server is not None:
            server.shutdown()
        store.close()
        if lock is not None:
            lock.close()
        log.info("slurmxd stopped at %s", time.strftime("%H:%M:%S"), extra={"event": "stop"})


def run_drain(site: SiteConfig, command: str) -> None:
    """`slurmxd drain`: stop deciding and let Slurm run every managed group now; `slurmxd resume`: take them back."""
    state_dir = Path(site.daemon.state_dir)
    if command == "resume":
        was = resume(state_dir)
        click.echo(f"slurmxd: resumed ({state_dir}); the next cycle takes every waiting managed variant back"
                   if was else f"slurmxd: {state_dir} was not drained; nothing to resume")
        return
    released = drain(state_dir, adapter_from_config(site.transport))
    click.echo(f"slurmxd: drained ({state_dir}): {len(released)} waiting managed variant(s) may start now; Slurm "
               "runs one per group. A running slurmxd now decides nothing; `slurmxd resume` undoes this.")
