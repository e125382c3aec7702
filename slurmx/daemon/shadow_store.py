"""The shadow daemon's record: every group it saw and every decision it would have taken, in its own SQLite file.

Its own file (`shadow.sqlite` in the state directory), never the enforcing daemon's store: a shadow daemon runs
beside an enforcing one or none, and must leave the enforcer's intents and audit log exactly as they are.
`slurmx shadow-report` reads it back and compares it with what Slurm did.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from slurmx.daemon.errors import DaemonError

__all__ = ["SHADOW_FILE", "SeenGroup", "ShadowDecision", "ShadowStore", "ShadowStoreError", "shadow_path"]

SHADOW_FILE = "shadow.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS seen (
    group_id TEXT PRIMARY KEY,
    first_seen REAL NOT NULL,
    submit_time REAL NOT NULL,     -- the group's earliest variant submission, as squeue showed it
    user TEXT NOT NULL,
    kinds TEXT NOT NULL            -- JSON: the variant kinds the group offered
);
CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    t REAL NOT NULL,
    cycle INTEGER NOT NULL,
    group_id TEXT NOT NULL,
    action TEXT NOT NULL,          -- Start | Preempt | Resize | SetPriority | Hold | Release | Cancel
    kind TEXT NOT NULL,            -- the variant a Start would run ('' for other actions)
    job_id INTEGER,                -- that variant's Slurm job
    nodes TEXT NOT NULL,           -- JSON list: where a Start would have put it
    reason TEXT NOT NULL,
    outcome TEXT NOT NULL          -- shadow (would have been done) | refused | failed (never repeated)
);
CREATE INDEX IF NOT EXISTS decisions_group ON decisions (group_id, id);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


class ShadowStoreError(DaemonError):
    """No shadow record to read, or one this slurmx cannot read; the message says where and what to do."""


def shadow_path(state_dir: str | Path) -> Path:
    return Path(state_dir) / SHADOW_FILE


@dataclass(frozen=True, slots=True)
class SeenGroup:
    group_id: str
    first_seen: float
    submit_time: float
    user: str
    kinds: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ShadowDecision:
    t: float
    cycle: int
    group_id: str
    action: str
    kind: str
    job_id: int | None
    nodes: tuple[str, ...]
    reason: str
    outcome: str


class ShadowStore:
    """`create=False` (the report) refuses a missing file instead of making an empty one."""

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        self.path = Path(path)
        if not create and not self.path.is_file():
            raise ShadowStoreError(f"{self.path}: no shadow record here; run `slurmxd --shadow` on this state "
                                   "directory first (or pass --state-dir)")
        try:
            if create:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path))
            if create:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.executescript(_SCHEMA)
            else:
                self._db.execute("SELECT 1 FROM seen LIMIT 1").fetchall()
                self._db.execute("SELECT 1 FROM decisions LIMIT 1").fetchall()
        except (sqlite3.Error, OSError) as exc:
            if create:
                raise ShadowStoreError(f"{self.path}: cannot open the shadow record ({exc}); the state directory "
                                       "must be writable by slurmxd (daemon.state_dir or --state-dir)") from None
            raise ShadowStoreError(f"{self.path}: not a shadow record slurmx can read ({exc}); point --state-dir "
                                   "at the shadow daemon's state directory") from None

    def close(self) -> None:
        self._db.close()

    def see(self, groups: Iterable[SeenGroup]) -> None:
        """Remember groups the first time they are seen (later sightings change nothing)."""
        rows = [(g.group_id, g.first_seen, g.submit_time, g.user, json.dumps(list(g.kinds))) for g in groups]
        if rows:
            with self._db:
                self._db.executemany("INSERT OR IGNORE INTO seen VALUES (?, ?, ?, ?, ?)", rows)

    def record(self, decisions: Sequence[ShadowDecision]) -> None:
        if decisions:
            with self._db:
                self._db.executemany(
                    "INSERT INTO decisions (t, cycle, group_id, action, kind, job_id, nodes, reason, outcome) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(d.t, d.cycle, d.group_id, d.action, d.kind, d.job_id, json.dumps(list(d.nodes)), d.reason,
                      d.outcome) for d in decisions])

    def seen(self, since: float | None = None) -> list[SeenGroup]:
        rows = self._db.execute("SELECT group_id, first_seen, submit_time, user, kinds FROM seen "
                                "WHERE first_seen >= ? ORDER BY submit_time, group_id",
                                (since if since is not None else float("-inf"),)).fetchall()
        return [SeenGroup(g, float(f), float(s), u, tuple(json.loads(k))) for g, f, s, u, k in rows]

    def decisions(self, since: float | None = None) -> list[ShadowDecision]:
        rows = self._db.execute("SELECT t, cycle, group_id, action, kind, job_id, nodes, reason, outcome "
                                "FROM decisions WHERE t >= ? ORDER BY id",
                                (since if since is not None else float("-inf"),)).fetchall()
        return [ShadowDecision(float(t), int(c), g, a, k, None if j is None else int(j), tuple(json.loads(n)), r, o)
                for t, c, g, a, k, j, n, r, o in rows]

    def first_starts(self) -> dict[str, ShadowDecision]:
        """group -> its first would-be Start (the shadow's counterfactual: where and when the group would run)."""
        rows = self._db.execute(
            "SELECT t, cycle, group_id, action, kind, job_id, nodes, reason, outcome FROM decisions "
            "WHERE id IN (SELECT MIN(id) FROM decisions WHERE action = 'Start' AND outcome = 'shadow' "
            "GROUP BY group_id)").fetchall()
        return {g: ShadowDecision(float(t), int(c), g, a, k, None if j is None else int(j), tuple(json.loads(n)),
                                  r, o) for t, c, g, a, k, j, n, r, o in rows}

    def get_meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self._db:
            self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))
