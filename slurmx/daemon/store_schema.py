"""The state store's schema: its migrations, one per version, and its version read from a store file without
writing to it (what a downgrade is refused by, and what `slurmxd backup` and `restore` check).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from slurmx import __version__

__all__ = ["META_SINCE", "MIGRATIONS", "has_table", "newer_line", "newer_store_problem", "open_query_only",
           "read_schema", "schema_of"]

# One script per schema version; never edit a released one, append a new one.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE intents (
        key TEXT PRIMARY KEY,          -- 'start:<group>' or 'preempt:<job id>': one open intent per target
        kind TEXT NOT NULL,            -- start | preempt
        group_id TEXT NOT NULL,
        step TEXT NOT NULL,            -- how far the action got (see enforce_start.py, enforce_grace.py)
        data TEXT NOT NULL,            -- JSON: job ids, nodes, deadline ...
        created REAL NOT NULL,
        updated REAL NOT NULL
    );
    CREATE TABLE groups (
        group_id TEXT PRIMARY KEY,
        first_seen REAL NOT NULL,
        submit_time REAL NOT NULL,     -- the original submission; Slurm resets it at requeue
        preemptions INTEGER NOT NULL DEFAULT 0,
        last_requeue REAL
    );
    CREATE TABLE audit (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        t REAL NOT NULL,
        cycle INTEGER NOT NULL,
        group_id TEXT NOT NULL,        -- '' for daemon-wide events
        event TEXT NOT NULL,           -- decide | start | release | cancel | preempt | requeue | ignore ...
        detail TEXT NOT NULL           -- one line for a person
    );
    CREATE INDEX audit_group ON audit (group_id, id);
    """,
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    """,
    """
    CREATE TABLE samples (
        sample_id TEXT PRIMARY KEY,    -- '<group>.<kind>.<index>' (slurmx.profile.sampling.SampleRequest)
        group_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        steps INTEGER NOT NULL,
        job_id INTEGER,                -- NULL until sbatch answered (intent written before it)
        state TEXT NOT NULL,           -- submitting | submitted | cutting | done | cut | failed
        created REAL NOT NULL,
        started REAL,
        seconds REAL,                  -- wall time (done) or time run before the cut
        step_seconds REAL,
        steps_done INTEGER NOT NULL DEFAULT 0,
        updated REAL NOT NULL
    );
    CREATE INDEX samples_group ON samples (group_id);
    CREATE TABLE estimates (
        group_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        seconds REAL NOT NULL,
        source TEXT NOT NULL,          -- declared | sample | history | progress
        uncertainty REAL NOT NULL,     -- relative 1-sigma
        lower_bound INTEGER NOT NULL,
        detail TEXT NOT NULL,
        updated REAL NOT NULL,
        PRIMARY KEY (group_id, kind)
    );
    """,
    """
    ALTER TABLE samples ADD COLUMN points TEXT NOT NULL DEFAULT '';  -- a CPU search's 'cpus:rate;...' (w= field)
    """,
    # Facts keyed by group id alone outlived their owner: a group id reused (by anyone) inherited the original
    # submit time (a jump in the FIFO queue) and the preemption count (immunity under a preemption cap). Facts
    # are now the facts of one group of one owner, found by its job ids, and dropped when it closes. Facts of
    # groups in flight at the upgrade start again from what Slurm shows.
    """
    DROP TABLE groups;
    CREATE TABLE group_facts (
        group_id TEXT NOT NULL,
        owner_uid INTEGER NOT NULL,    -- the uid owning the group's spool folder (core/ownership.py)
        first_job INTEGER NOT NULL,    -- the owner's earliest job of the group when first seen
        job_ids TEXT NOT NULL,         -- 'id,id,...': every job of the group seen while it was open
        first_seen REAL NOT NULL,
        submit_time REAL NOT NULL,     -- the original submission; Slurm resets it at requeue
        preemptions INTEGER NOT NULL DEFAULT 0,
        last_requeue REAL,
        PRIMARY KEY (group_id, owner_uid, first_job)
    );
    """,
    # The node lists a job's user asked for (`-w`, `-x`), as first seen before slurmxd ever steered it: squeue
    # shows slurmxd's own steering once it did, and a requeued job keeps it. Dropped when the group closes.
    """
    CREATE TABLE user_nodes (
        job_id INTEGER PRIMARY KEY,
        group_id TEXT NOT NULL,
        required TEXT NOT NULL,        -- ReqNodeList as the user gave it ('' none)
        excluded TEXT NOT NULL         -- ExcNodeList
    );
    CREATE INDEX user_nodes_group ON user_nodes (group_id);
    """,
    # 0.2.0 changes no table: the number alone is the point. 0.1.0 (schema 6) refuses a store past its own schema
    # before it writes anything, and cannot know what a later release's intents and facts mean, so a store 0.2.0
    # opened is refused by 0.1.0 instead of being half understood (docs/upgrade.md). From here on the store also
    # names the release that last migrated it (meta 'migrated_by'), which the refusal of a later release names.
    """
    SELECT 1;
    """,
)

META_SINCE = 2  # the schema version that made the meta table


def open_query_only(path: Path) -> sqlite3.Connection:
    """An existing SQLite file opened to read only: no migration, no journal mode change, never created.

    Not SQLite's `mode=ro`: a read-only connection to a WAL store cannot remove the -wal and -shm files it makes,
    and left behind by root beside a stopped daemon's store they would keep slurmxd's own user out of it. A
    read-write connection refusing writes (`query_only`) removes them as the last one out, as slurmxd does."""
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=rw", uri=True, timeout=30.0)
    db.execute("PRAGMA query_only=1")
    return db


def read_schema(path: Path) -> tuple[int, str | None]:
    """(schema version, release that last migrated it or None) of a store file (`open_query_only`). Raises
    sqlite3.Error for what is not SQLite."""
    db = open_query_only(path)
    try:
        return schema_of(db)
    finally:
        db.close()


def schema_of(db: sqlite3.Connection) -> tuple[int, str | None]:
    """(schema version, release that last migrated it or None) of an open store (a copy's too)."""
    version = int(db.execute("PRAGMA user_version").fetchone()[0])
    by: str | None = None
    if has_table(db, "meta"):
        row = db.execute("SELECT value FROM meta WHERE key='migrated_by'").fetchone()
        by = str(row[0]) if row else None
    return version, by


def has_table(db: sqlite3.Connection, name: str) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)).fetchone() is not None


def newer_store_problem(path: Path) -> str:
    """'' when this slurmx can open the store at `path`; else the one line refusing a store of a later release.
    Read-only: a downgrade is refused before anything is touched (docs/upgrade.md)."""
    if not path.is_file():
        return ""
    try:
        version, by = read_schema(path)
    except sqlite3.Error:
        return ""  # not readable as SQLite: opening it says why, as before
    return newer_line(path, version, by) if version > len(MIGRATIONS) else ""


def newer_line(path: Path, version: int, by: str | None) -> str:
    made = f"slurmx {by}" if by else "a later slurmx"
    install = f"slurmx-hpc>={by}" if by else "the slurmx-hpc release that wrote it"
    return (f"{path}: schema version {version} is newer than this slurmx {__version__} (schema {len(MIGRATIONS)}): "
            f"it was written by {made}; install {install}, or put back the store backed up before the upgrade "
            "(docs/upgrade.md, Downgrade)")
