"""`slurmxd backup FILE` and `slurmxd restore FILE`: the line each prints (the work is `slurmx.daemon.backup`)."""

from __future__ import annotations

from pathlib import Path

import click

from slurmx import __version__
from slurmx.core.config import SiteConfig
from slurmx.daemon.backup import BackupError, backup, restore
from slurmx.daemon.store import store_path

__all__ = ["run_store_command"]


def run_store_command(site: SiteConfig, command: str, file: str | None) -> None:
    """`backup` copies the live store to FILE (slurmxd may run); `restore` puts FILE back (slurmxd stopped)."""
    if not file:
        raise BackupError(f"slurmxd {command} needs a FILE: e.g. `slurmxd {command} "
                          "/var/backups/slurmxd-2026-11-29.sqlite`")
    target, store = Path(file), store_path(site)
    if command == "backup":
        info = backup(store, target)
        click.echo(f"slurmxd: backed up {store} (schema {info.schema}) to {info.describe()}; "
                   f"put it back with `slurmxd restore {target}`")
        return
    done = restore(Path(site.daemon.state_dir), store, target)
    migrated = f", migrated to schema {done.schema}" if done.schema != done.backup.schema else ""
    kept = f"; the store it replaced is kept as {done.replaced}" if done.replaced else ""
    click.echo(f"slurmxd: restored {store} from {done.backup.describe()}{migrated} (slurmx {__version__}){kept}; "
               "start slurmxd")
