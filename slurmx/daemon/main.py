"""`slurmxd`: start-up (site, privilege, coexistence and spool-root checks, lock, store, policy) and the loop or
one cycle.

`--once --dry-run` prints the plan the policy makes on the live cluster, the Slurm changes the daemon would make
for it (its recording adapter's record) and the audit it would write, and enforces nothing.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import click

from slurmx.core.config import SiteConfig
from slurmx.core.userfiles import local_spool_root_problem
from slurmx.daemon.checks import NotOperator, run_checks
from slurmx.daemon.drain import DRAIN_MARKER, drain, resume
from slurmx.daemon.endpoint import health_limit, serve_metrics
from slurmx.daemon.errors import DaemonError
from slurmx.daemon.loop import CycleReport, Daemon, Waker, acquire_lock, store_path
from slurmx.daemon.sdnotify import notifying
from slurmx.daemon.store import Store, StoreError, newer_store_problem
from slurmx.policies.base import make_policy
from slurmx.slurm import SlurmError, adapter_from_config
from slurmx.slurm.versions import shape_for

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


def _serve(daemon: Daemon, site: SiteConfig) -> ThreadingHTTPServer | None:
    """The metrics endpoint, or None when `daemon.metrics_port` is unset; a port it cannot bind is one line."""
    port, host = site.daemon.metrics_port, site.daemon.metrics_address
    if port is None:
        return None
    try:
        return serve_metrics(daemon.metrics, port, host, max_age_s=health_limit(site.daemon.interval_s))
    except PermissionError:
        raise DaemonError(f"daemon.metrics_port {port}: binding a port below 1024 needs root or "
                          "CAP_NET_BIND_SERVICE; choose a port of 1024 or more (e.g. 9810)") from None
    except OSError as exc:
        raise DaemonError(f"daemon.metrics_address/metrics_port: cannot listen on {_where(host, port)} "
                          f"({exc.strerror or exc}); free the port or choose another address or port") from None


def _where(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def run_daemon(site: SiteConfig, *, once: bool, dry_run: bool, check: bool = True,
               log_level: int | None = None) -> None:
    """`log_level` None: warnings only for `--once` (its plan is printed), else info."""
    configure_logging(site.daemon.log_format, log_level if log_level is not None else
                      logging.WARNING if once else logging.INFO)
    newer = newer_store_problem(store_path(site))  # a downgrade: refused before Slurm, the lock or the store
    if newer:
        raise StoreError(newer)
    adapter = adapter_from_config(site.transport)
    policy = make_policy(site.policy.name, site.policy.params, "policy")
    transport = getattr(adapter, "transport", None)
    restart_delay = 121
    if check:  # a Slurm too old is refused here, in one line, rather than every cycle
        _, newer = shape_for(adapter.version())
        if newer:
            log.warning("slurm: %s", newer, extra={"event": "version"})
        # The daemon reads and writes group folders on this host: a spool root another user owns, or one
        # without the sticky bit, lets a user swap the folders it trusts.
        spool = local_spool_root_problem(site.submit.spool_dir)
        if spool and not dry_run:
            raise DaemonError(spool)
        if spool:
            log.warning("spool: %s", spool, extra={"event": "spool"})
    if check and transport is not None:
        checked = run_checks(site, transport)
        restart_delay = checked.restart_delay_s
        if checked.problem and not dry_run:
            raise NotOperator(checked.problem)
        for line in checked.privileges:
            log.warning("privilege: %s", line, extra={"event": "privilege"})
        for warning in checked.coexistence:
            log.warning("coexistence: %s", warning, extra={"event": "coexistence"})
    state_dir = Path(site.daemon.state_dir)
    lock = None if dry_run else acquire_lock(state_dir)  # a dry run may watch beside the daemon that holds it
    path = store_path(site)
    store = Store(path if (not dry_run or path.exists()) else ":memory:")  # a dry run never creates the store
    daemon = Daemon(site, adapter, store, policy, dry_run=dry_run, restart_delay_s=restart_delay)
    if once:
        report = daemon.cycle()
        for line in _plan_lines(report):
            click.echo(line)
        for change in report.would:
            click.echo(f"  would {change.what()}")
        if dry_run and report.audit:
            click.echo("  the audit it would write (nothing of it was done):")
        for row in report.audit:
            click.echo(f"  {row[3]} {row[2] or '-'}: {row[4]}")
        return
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server = _serve(daemon, site)
    waker = Waker(site.daemon.socket) if site.daemon.socket is not None else None
    log.info("slurmxd started: policy %s, every %d s, store %s%s", site.policy.name, site.daemon.interval_s, path,
             f", metrics and /healthz on {_where(site.daemon.metrics_address, server.server_port)}" if server else "",
             extra={"event": "start"})
    try:
        notifying(lambda beat: daemon.run(stop, waker, beat), daemon)
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
    try:
        released = drain(state_dir, adapter_from_config(site.transport))
    except OSError as exc:  # the marker could not be written: nothing changed
        raise click.ClickException(f"{state_dir / DRAIN_MARKER}: drain marker not written ({exc.strerror or exc}); "
                                   "nothing changed: fix the state directory's permissions and run it again") from exc
    except SlurmError as exc:  # the marker is written first: say so, since the daemon already obeys it
        first = " ".join(str(exc).split())
        raise click.ClickException(
            f"drain marker written ({state_dir / DRAIN_MARKER}): a running slurmxd now decides nothing; but Slurm "
            f"did not answer ({first}), so no waiting managed variant was let go: their leases run out within "
            "daemon.lease, or run `slurmxd drain` again once Slurm answers") from exc
    click.echo(f"slurmxd: drained ({state_dir}): {len(released)} waiting managed variant(s) may start now; Slurm "
               "runs one per group. A running slurmxd now decides nothing; `slurmxd resume` undoes this.")
