"""`slurmxd backup FILE` / `slurmxd restore FILE`: the state store copied out while slurmxd runs, and put back while
it does not.

A backup is one SQLite file: SQLite's online backup of the live store, read in one read transaction (so one
consistent moment, however busy the daemon is: in WAL mode a reader never blocks the writer), with a small header
table (`slurmx_backup`: the schema version, the release that last migrated the store, the release that took the
copy, when and from where). It is written beside FILE, checked (`PRAGMA integrity_check`) and only then given its
name, owner-only: a half-written or corrupt backup never carries the name.

A restore refuses while a slurmxd holds the state directory's lock (the same lock a second daemon would find), and
refuses a backup of a schema newer than this slurmx. It migrates an older backup in a staged copy first, so a
migration that fails leaves the live store as it was; the live store is then overwritten through SQLite's backup
API (one transaction, safe beside a reader such as `slurmx status`) and the store it replaced is kept beside it.
Neither ever migrates the live store itself: `slurmxd backup` run by a newly installed release before its first
start copies the old release's store as that release wrote it.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from slurmx import __version__
from slurmx.daemon.errors import DaemonError
from slurmx.daemon.loop import AlreadyRunning, acquire_lock
from slurmx.daemon.store import MIGRATIONS, Store, StoreError, open_query_only, read_schema
from slurmx.daemon.store_schema import has_table, schema_of

__all__ = ["HEADER_TABLE", "BackupError", "BackupInfo", "Restored", "backup", "read_backup", "restore"]

HEADER_TABLE = "slurmx_backup"  # a name no migration uses; dropped again by a restore
FORMAT = "1"
LOCK_FILE = "slurmxd.lock"  # slurmx.daemon.loop.acquire_lock's default: the one a running slurmxd holds
_STORE_TABLES = frozenset({"intents", "audit"})  # in every schema version: what makes a file a slurmxd store


class BackupError(DaemonError):
    """A backup or restore refused or failed; one line naming the file and the fix. Nothing was changed."""


@dataclass(frozen=True, slots=True)
class BackupInfo:
    """What a backup says of itself (a store copied by hand has no header: its fields are '')."""

    path: Path
    schema: int
    migrated_by: str  # the release that last migrated the store ('' before 0.2.0)
    taken_by: str  # the release that took the backup
    taken_at: str  # UTC, ISO 8601
    source: str
    intents: int
    audit: int

    def describe(self) -> str:
        by = f" by slurmx {self.taken_by}" if self.taken_by else ""
        when = f" taken {self.taken_at}{by}," if self.taken_at else " (a store copied by hand),"
        return f"{self.path}:{when} schema {self.schema}, {self.intents} open intent(s), {self.audit} audit entries"


def backup(store: Path, target: Path) -> BackupInfo:
    """Copy the live store at `store` to `target` (which must not exist) while slurmxd may be running."""
    if not store.is_file():
        raise BackupError(f"{store}: no slurmxd state store to back up; check daemon.state_dir (or --state-dir)")
    if target.exists() or target.is_symlink():
        raise BackupError(f"{target}: exists; a backup never overwrites a file: choose a new name")
    if not target.parent.is_dir():
        raise BackupError(f"{target.parent}: no such directory for the backup; create it or choose another path")
    staged = target.parent / f".{target.name}.partial-{os.getpid()}"
    try:
        with _new_file(staged) as copy:
            with _readonly(store) as live:
                live.backup(copy)  # all pages in one step: one read transaction, one consistent moment
            copy.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no -wal beside it
            _check_store(copy, store)
            copy.execute(f"CREATE TABLE {HEADER_TABLE} (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            schema, by = schema_of(copy)
            copy.executemany(f"INSERT INTO {HEADER_TABLE} (key, value) VALUES (?, ?)", [
                ("format", FORMAT), ("schema", str(schema)), ("migrated_by", by or ""),
                ("taken_by", __version__), ("taken_at", _utc(time.time())), ("source", str(store))])
            copy.commit()
            _integrity(copy, target)
        _name(staged, target)
    except sqlite3.Error as exc:
        raise BackupError(f"{store}: backup to {target} failed ({exc}); nothing was written") from None
    except FileExistsError:
        raise BackupError(f"{target}: exists; a backup never overwrites a file: choose a new name") from None
    except OSError as exc:
        raise BackupError(f"{target}: cannot write the backup ({exc.strerror or exc}); nothing was written: "
                          "choose a directory this user may write") from None
    finally:
        staged.unlink(missing_ok=True)
    return read_backup(target)


def _name(staged: Path, target: Path) -> None:
    """Give the checked copy its name, never over another file: a hard link fails if the name exists; a file system
    without hard links gets a rename after the check."""
    try:
        os.link(staged, target)
    except FileExistsError:
        raise
    except OSError:
        if target.exists() or target.is_symlink():
            raise FileExistsError(target) from None
        os.replace(staged, target)


def read_backup(path: Path) -> BackupInfo:
    """The header of a backup (or the schema of a store copied by hand), checked whole; BackupError if it is not
    a slurmxd store or is damaged."""
    if not path.is_file():
        raise BackupError(f"{path}: no such backup file")
    try:
        with _readonly(path) as db:
            _check_store(db, path)
            _integrity(db, path)
            header = dict(db.execute(f"SELECT key, value FROM {HEADER_TABLE}").fetchall()) \
                if has_table(db, HEADER_TABLE) else {}
            counts = [int(db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in ("intents", "audit")]
            schema, by = schema_of(db)  # the store's own word, as the copy holds it
    except sqlite3.Error as exc:
        raise BackupError(f"{path}: not a readable slurmxd backup ({exc}); take one with `slurmxd backup FILE`") \
            from None
    return BackupInfo(path, schema, by or header.get("migrated_by", ""), header.get("taken_by", ""),
                      header.get("taken_at", ""), header.get("source", ""), counts[0], counts[1])


@dataclass(frozen=True, slots=True)
class Restored:
    backup: BackupInfo
    store: Path
    schema: int  # the restored store's, after any migration
    replaced: Path | None  # the store it replaced, kept beside it


def restore(state_dir: Path, store: Path, source: Path) -> Restored:
    """Put the backup at `source` back as the live store at `store`, migrated to this slurmx's schema; refused
    while a slurmxd holds `state_dir`, or when the backup is newer than this slurmx."""
    info = read_backup(source)
    if info.schema > len(MIGRATIONS):
        by = info.migrated_by or info.taken_by
        raise BackupError(
            f"{source}: the backup is at schema {info.schema} (written by slurmx {by or 'a later release'}), newer "
            f"than this slurmx {__version__} (schema {len(MIGRATIONS)}); install slurmx-hpc>={by or 'that release'} "
            "and restore with it; nothing was changed")
    with _holding(state_dir, source):
        staged = state_dir / f".{store.name}.restore-{os.getpid()}"
        try:
            _stage(source, staged)
            replaced = _keep_aside(store) if store.exists() else None
            if replaced is None:
                os.close(os.open(store, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            with _readonly(staged) as migrated, contextlib.closing(sqlite3.connect(store, timeout=30.0)) as live:
                migrated.backup(live)  # one write transaction on the live file, WAL and all
            _own_like(store, state_dir)
            schema, _ = read_schema(store)
        except (sqlite3.Error, StoreError) as exc:
            raise BackupError(f"{source}: restore failed ({exc}); {store} is as it was") from None
        except OSError as exc:
            raise BackupError(f"{source}: restore failed ({exc.strerror or exc}); {store} is as it was: check "
                              f"that this user may write {state_dir}") from None
        finally:
            for leftover in (staged, Path(f"{staged}-wal"), Path(f"{staged}-shm")):
                leftover.unlink(missing_ok=True)
    return Restored(info, store, schema, replaced)


def _stage(source: Path, staged: Path) -> None:
    """The backup copied to `staged`, its header dropped and its schema migrated to this slurmx's."""
    with _new_file(staged) as copy:
        with _readonly(source) as backup_db:
            backup_db.backup(copy)
        copy.execute(f"DROP TABLE IF EXISTS {HEADER_TABLE}")
        copy.commit()
    Store(staged).close()  # the migrations, each in its own transaction, on the copy only


def _keep_aside(store: Path) -> Path:
    """The live store copied beside itself before it is overwritten (a restore of the wrong file is undone by
    restoring this one)."""
    aside = store.with_name(f"{store.name}.before-restore-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
    with _new_file(aside) as copy, contextlib.closing(sqlite3.connect(store, timeout=30.0)) as live:
        live.backup(copy)
        copy.execute("PRAGMA journal_mode=DELETE")
    _own_like(aside, store.parent)
    return aside


@contextlib.contextmanager
def _holding(state_dir: Path, source: Path) -> Iterator[None]:
    """The state directory's daemon lock, held for the restore: no slurmxd runs on it, and none starts meanwhile."""
    try:
        lock = acquire_lock(state_dir, LOCK_FILE, "slurmxd")
    except AlreadyRunning:
        pid = _lock_pid(state_dir / LOCK_FILE)
        raise BackupError(f"{state_dir}: slurmxd{f' (pid {pid})' if pid else ''} is running on this state "
                          f"directory; stop it (systemctl stop slurmxd), then `slurmxd restore {source}`; nothing "
                          "was changed") from None
    except OSError as exc:
        raise BackupError(f"{state_dir}: cannot take the daemon's lock ({exc.strerror or exc}); run the restore as "
                          "slurmxd's user; nothing was changed") from None
    try:
        yield
    finally:
        lock.close()


def _lock_pid(path: Path) -> str:
    with contextlib.suppress(OSError):
        text = path.read_text().strip()
        return text if text.isdigit() else ""
    return ""


@contextlib.contextmanager
def _new_file(path: Path) -> Iterator[sqlite3.Connection]:
    """A new SQLite file, owner-only from its first byte (the store holds every user's audit trail)."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    db = sqlite3.connect(path)
    try:
        yield db
    finally:
        db.close()


@contextlib.contextmanager
def _readonly(path: Path) -> Iterator[sqlite3.Connection]:
    db = open_query_only(path)
    try:
        yield db
    finally:
        db.close()


def _check_store(db: sqlite3.Connection, path: Path) -> None:
    missing = sorted(t for t in _STORE_TABLES if not has_table(db, t))
    if missing:
        raise BackupError(f"{path}: not a slurmxd state store (no {', '.join(missing)} table); nothing was changed")


def _integrity(db: sqlite3.Connection, path: Path) -> None:
    found = [str(r[0]) for r in db.execute("PRAGMA integrity_check").fetchall()]
    if found != ["ok"]:
        raise BackupError(f"{path}: damaged ({found[0]}); nothing was changed: use an earlier backup")


def _own_like(path: Path, folder: Path) -> None:
    """Root restoring for slurmxd's user: the file goes to whoever owns the state directory, or slurmxd could
    not open its own store."""
    if os.geteuid() == 0:
        owner = folder.stat()
        os.chown(path, owner.st_uid, owner.st_gid)


def _utc(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
