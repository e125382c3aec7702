"""The daemon's own state in an embedded SQLite database (WAL): never jobs — Slurm is the truth for those.

What lives here: intents of multi-step actions (written *before* the first Slurm call, so a daemon killed at any
instruction finds them on restart and finishes or rolls back), per-group facts Slurm forgets or resets (the
original submit time, how often a group was preempted), and the audit log every decision and action lands in
(what `slurmx explain` and `slurmx status` read). The schema is versioned with `PRAGMA user_version`; each
migration (`store_schema.MIGRATIONS`) runs once, in order, inside one transaction.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slurmx import __version__
from slurmx.daemon.errors import DaemonError
from slurmx.daemon.store_schema import (
    META_SINCE,
    MIGRATIONS,
    newer_line,
    newer_store_problem,
    open_query_only,
    read_schema,
)

if TYPE_CHECKING:
    from slurmx.core.config import SiteConfig

__all__ = ["MIGRATIONS", "AuditEntry", "EstimateRow", "GroupFact", "Intent", "SampleRow", "ScratchStore", "Store",
           "StoreError", "newer_store_problem", "open_query_only", "read_schema", "store_path"]

MAX_FACT_JOBS = 64  # job ids remembered per group (variants and their resubmissions; the newest kept)


def store_path(site: SiteConfig) -> Path:
    """The site's store file. Here, not in the daemon loop: `slurmx status` and `explain` read it on a lean install,
    which has no prometheus_client for the loop's metrics."""
    return Path(site.daemon.state_dir) / "slurmxd.sqlite"


class StoreError(DaemonError):
    """The state store cannot be opened or is newer than this slurmx; one line naming the file."""


@dataclass(frozen=True, slots=True)
class Intent:
    key: str
    kind: str
    group_id: str
    step: str
    data: Mapping[str, Any]
    created: float
    updated: float


@dataclass(frozen=True, slots=True)
class GroupFact:
    """What the daemon remembers of one open group of one owner that Slurm forgets (a requeue resets the submit
    time) or never knew (how often slurmxd preempted it)."""

    group_id: str
    owner_uid: int
    first_job: int
    job_ids: frozenset[int]
    submit_time: float
    preemptions: int = 0
    last_requeue: float | None = None

    def matches(self, owner_uid: int, job_ids: Iterable[int]) -> bool:
        """The same group: the same owner, and a job seen before (a reused group id has only new jobs)."""
        return owner_uid == self.owner_uid and not self.job_ids.isdisjoint(job_ids)


@dataclass(frozen=True, slots=True)
class AuditEntry:
    t: float
    cycle: int
    group_id: str
    event: str
    detail: str


@dataclass(frozen=True, slots=True)
class SampleRow:
    """One profiling sample run the daemon submitted (or is about to: `job_id` None, state `submitting`)."""

    sample_id: str
    group_id: str
    kind: str
    steps: int
    job_id: int | None
    state: str
    created: float
    started: float | None = None
    seconds: float | None = None
    step_seconds: float | None = None
    steps_done: int = 0
    points: str = ""  # a sensitivity sample's measured `cpus:steps/s;...` (slurmx.hooks.search.format_points)


@dataclass(frozen=True, slots=True)
class EstimateRow:
    """A variant's current run-time estimate, where it came from and how sure it is (`slurmx explain`)."""

    group_id: str
    kind: str
    seconds: float
    source: str
    uncertainty: float
    lower_bound: bool
    detail: str
    updated: float


class Store:
    """One SQLite file; every write commits before it returns (the intent must be on disk before Slurm acts)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            if str(path) != ":memory:":
                # A store of a later release is refused before anything is written to it or beside it.
                problem = newer_store_problem(self.path)
                if problem:
                    raise StoreError(problem)
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(path), isolation_level=None, timeout=30.0, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._migrate()
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"{path}: cannot open the slurmxd state store: {exc}; check daemon.state_dir") \
                from None
        self._facts: dict[str, list[GroupFact]] | None = None  # the group_facts table, read once (group_facts)
        self._user_nodes: dict[int, tuple[str, str]] | None = None  # the user_nodes table, read once

    # ------------------------------------------------------------------------------------------ schema

    @property
    def version(self) -> int:
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    def _migrate(self) -> None:
        current = self.version
        if current > len(MIGRATIONS):  # made newer between the check in __init__ and here
            self._db.close()
            raise StoreError(newer_line(self.path, current, None))
        for number in range(current, len(MIGRATIONS)):
            # One script, one transaction: the schema change and its version number land together or not at all,
            # with the release that made it (from the meta table's own migration on).
            stamp = "" if number + 1 < META_SINCE else \
                f"INSERT OR REPLACE INTO meta (key, value) VALUES ('migrated_by', {_sql_text(__version__)});\n"
            try:
                self._db.executescript(f"BEGIN IMMEDIATE;\n{MIGRATIONS[number]}\n{stamp}PRAGMA user_version = "
                                       f"{number + 1};\nCOMMIT;")
            except sqlite3.OperationalError:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                if self.version > number:
                    continue  # another process opening the same new store (slurmxd and a tool) migrated it first
                raise

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        if self._db.in_transaction:  # a cycle the watchdog interrupted between BEGIN and the guard below
            self._db.execute("ROLLBACK")
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def close(self) -> None:
        self._db.close()

    # ------------------------------------------------------------------------------------------ intents

    def put_intent(self, key: str, kind: str, group_id: str, step: str, data: Mapping[str, Any],
                   now: float | None = None) -> Intent:
        """Create or advance an intent (same key: step and data replaced, creation time kept)."""
        t = time.time() if now is None else now
        text = json.dumps(dict(data), sort_keys=True)
        self._db.execute(
            "INSERT INTO intents (key, kind, group_id, step, data, created, updated) VALUES (?,?,?,?,?,?,?) "
            "ON CONFLICT(key) DO UPDATE SET step=excluded.step, data=excluded.data, updated=excluded.updated",
            (key, kind, group_id, step, text, t, t))
        found = self.intent(key)
        assert found is not None
        return found

    def put_intents(self, rows: Sequence[tuple[str, str, str, str, Mapping[str, Any]]],
                    now: float | None = None) -> None:
        """`put_intent` for many (key, kind, group, step, data) rows in one transaction: one fsync for a batch."""
        if not rows:
            return
        t = time.time() if now is None else now
        with self._transaction():
            self._db.executemany(
                "INSERT INTO intents (key, kind, group_id, step, data, created, updated) VALUES (?,?,?,?,?,?,?) "
                "ON CONFLICT(key) DO UPDATE SET step=excluded.step, data=excluded.data, updated=excluded.updated",
                [(key, kind, group, step, json.dumps(dict(data), sort_keys=True), t, t)
                 for key, kind, group, step, data in rows])

    def intent(self, key: str) -> Intent | None:
        row = self._db.execute("SELECT key, kind, group_id, step, data, created, updated FROM intents WHERE key=?",
                               (key,)).fetchone()
        return _intent(row) if row else None

    def intents(self, kind: str | None = None) -> list[Intent]:
        sql = "SELECT key, kind, group_id, step, data, created, updated FROM intents"
        rows = self._db.execute(sql + " WHERE kind=? ORDER BY created, key", (kind,)) if kind else \
            self._db.execute(sql + " ORDER BY created, key")
        return [_intent(r) for r in rows]

    def drop_intent(self, key: str) -> None:
        self._db.execute("DELETE FROM intents WHERE key=?", (key,))

    # ------------------------------------------------------------------------------------------ groups

    def remember_groups(self, facts: Iterable[GroupFact], now: float) -> None:
        """Record groups seen for the first time, or new job ids of known ones (one transaction for the lot)."""
        facts = list(facts)
        rows = [(f.group_id, f.owner_uid, f.first_job, _ids_text(f.job_ids), now, f.submit_time) for f in facts]
        if not rows:
            return
        with self._transaction():
            self._db.executemany("INSERT INTO group_facts (group_id, owner_uid, first_job, job_ids, first_seen, "
                                 "submit_time) VALUES (?,?,?,?,?,?) ON CONFLICT (group_id, owner_uid, first_job) "
                                 "DO UPDATE SET job_ids=excluded.job_ids", rows)
        mirror = self._fact_mirror()
        for fact, row in zip(facts, rows, strict=True):
            # The ids as the table holds them: the newest MAX_FACT_JOBS (all of them, but for a group resubmitted
            # that often), without a round trip through their text for every one of 100,000 new groups.
            ids = fact.job_ids if len(fact.job_ids) <= MAX_FACT_JOBS else frozenset(_parse_ids(row[3]))
            known = mirror.get(fact.group_id)
            if known is None:  # the usual case: a group seen for the first time
                new = fact if ids is fact.job_ids and not fact.preemptions and fact.last_requeue is None else \
                    GroupFact(fact.group_id, fact.owner_uid, fact.first_job, ids, fact.submit_time)
                mirror[fact.group_id] = [new]
                continue
            for i, old in enumerate(known):
                if (old.owner_uid, old.first_job) == (fact.owner_uid, fact.first_job):
                    known[i] = replace(old, job_ids=ids)
                    break
            else:
                known.append(GroupFact(fact.group_id, fact.owner_uid, fact.first_job, ids, fact.submit_time))

    def group_facts(self) -> Mapping[str, list[GroupFact]]:
        """group id -> the facts of the open groups of that id (one, unless a stale one awaits `close_groups`).

        Read from the table once per daemon life, then kept beside it (this daemon is the store's only writer, by
        its lock): slurmxd asks twice a cycle, and at 100,000 groups reading the table back cost a tenth of a
        second each time. Read-only for the caller."""
        return self._fact_mirror()

    def _fact_mirror(self) -> dict[str, list[GroupFact]]:
        if self._facts is None:
            facts: dict[str, list[GroupFact]] = {}
            for g, uid, first, ids, t, n, r in self._db.execute(
                    "SELECT group_id, owner_uid, first_job, job_ids, submit_time, preemptions, last_requeue "
                    "FROM group_facts"):
                facts.setdefault(g, []).append(GroupFact(g, int(uid), int(first), frozenset(_parse_ids(ids)),
                                                         float(t), int(n), r))
            self._facts = facts
        return self._facts

    def count_preemption(self, group_id: str, now: float) -> None:
        self._db.execute("UPDATE group_facts SET preemptions = preemptions + 1, last_requeue=? WHERE group_id=?",
                         (now, group_id))
        mirror = self._fact_mirror()
        if group_id in mirror:
            mirror[group_id] = [replace(f, preemptions=f.preemptions + 1, last_requeue=now) for f in mirror[group_id]]

    def close_groups(self, facts: Iterable[GroupFact]) -> None:
        """Drop the facts of groups that closed (no active job left, or gone from squeue), and the node lists their
        users asked for: a group id used again starts afresh."""
        rows = [(f.group_id, f.owner_uid, f.first_job) for f in facts]
        if not rows:
            return
        with self._transaction():
            self._db.executemany("DELETE FROM group_facts WHERE group_id=? AND owner_uid=? AND first_job=?", rows)
            self._db.executemany("DELETE FROM user_nodes WHERE group_id=?", [(r[0],) for r in rows])
        self._user_nodes = None
        mirror = self._fact_mirror()
        for group_id, uid, first in rows:
            kept = [f for f in mirror.get(group_id, ()) if (f.owner_uid, f.first_job) != (uid, first)]
            if kept:
                mirror[group_id] = kept
            else:
                mirror.pop(group_id, None)

    def user_nodes(self, seen: Iterable[tuple[int, str, str, str]]) -> dict[int, tuple[str, str]]:
        """job id -> (required, excluded) as its user asked: `seen` (job id, group, required, excluded, as squeue
        shows them now) is recorded for jobs met for the first time, and every job's first record is returned."""
        if self._user_nodes is None:
            self._user_nodes = {int(j): (r, x) for j, r, x in
                                self._db.execute("SELECT job_id, required, excluded FROM user_nodes")}
        fresh = [row for row in seen if row[0] not in self._user_nodes]
        if fresh:
            with self._transaction():
                self._db.executemany("INSERT OR IGNORE INTO user_nodes (job_id, group_id, required, excluded) "
                                     "VALUES (?,?,?,?)", fresh)
            for job_id, _, required, excluded in fresh:
                self._user_nodes[job_id] = (required, excluded)
        return self._user_nodes

    # ------------------------------------------------------------------------------------------ audit

    def audit(self, entries: Iterable[tuple[float, int, str, str, str]]) -> None:
        """Append (t, cycle, group, event, detail) rows in one transaction."""
        rows = list(entries)
        if rows:
            with self._transaction():
                self._db.executemany("INSERT INTO audit (t, cycle, group_id, event, detail) VALUES (?,?,?,?,?)",
                                     rows)

    def prune_audit(self, older_than: float | None, keep_rows: int | None) -> int:
        """Delete audit entries from before `older_than`, then all but the newest `keep_rows`; returns how many
        went. None skips a limit. The log would otherwise grow by every decision for the daemon's whole life."""
        removed = 0
        with self._transaction():
            if older_than is not None:
                removed += self._db.execute("DELETE FROM audit WHERE t < ?", (older_than,)).rowcount
            if keep_rows is not None:
                removed += self._db.execute(
                    "DELETE FROM audit WHERE id <= (SELECT id FROM audit ORDER BY id DESC LIMIT 1 OFFSET ?)",
                    (keep_rows,)).rowcount
        return removed

    def history(self, group_id: str | None = None, limit: int = 200) -> list[AuditEntry]:
        """Audit entries, oldest first (the last `limit` of them)."""
        if group_id is None:
            rows = self._db.execute("SELECT t, cycle, group_id, event, detail FROM audit ORDER BY id DESC LIMIT ?",
                                    (limit,)).fetchall()
        else:
            rows = self._db.execute("SELECT t, cycle, group_id, event, detail FROM audit WHERE group_id=? "
                                    "ORDER BY id DESC LIMIT ?", (group_id, limit)).fetchall()
        return [AuditEntry(float(t), int(c), g, e, d) for t, c, g, e, d in reversed(rows)]

    def last_decisions(self) -> dict[str, AuditEntry]:
        """The latest audit entry of each group (what `slurmx status` shows beside Slurm's view)."""
        rows = self._db.execute(
            "SELECT t, cycle, group_id, event, detail FROM audit WHERE id IN "
            "(SELECT MAX(id) FROM audit WHERE group_id != '' GROUP BY group_id)")
        return {g: AuditEntry(float(t), int(c), g, e, d) for t, c, g, e, d in rows}

    # ------------------------------------------------------------------------------------------ profiling

    def put_sample(self, row: SampleRow, now: float) -> None:
        """Create or replace a sample row; commits before returning (the intent precedes the sbatch)."""
        self._db.execute(
            "INSERT INTO samples (sample_id, group_id, kind, steps, job_id, state, created, started, seconds, "
            "step_seconds, steps_done, points, updated) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(sample_id) "
            "DO UPDATE SET job_id=excluded.job_id, state=excluded.state, started=excluded.started, "
            "seconds=excluded.seconds, step_seconds=excluded.step_seconds, steps_done=excluded.steps_done, "
            "points=excluded.points, updated=excluded.updated",
            (row.sample_id, row.group_id, row.kind, row.steps, row.job_id, row.state, row.created, row.started,
             row.seconds, row.step_seconds, row.steps_done, row.points, now))

    def samples(self, group_id: str | None = None) -> dict[str, SampleRow]:
        """Sample id -> row, of one group or of all."""
        sql = ("SELECT sample_id, group_id, kind, steps, job_id, state, created, started, seconds, step_seconds, "
               "steps_done, points FROM samples")
        rows = self._db.execute(sql + " WHERE group_id=?", (group_id,)) if group_id is not None else \
            self._db.execute(sql)
        return {r[0]: SampleRow(r[0], r[1], r[2], int(r[3]), None if r[4] is None else int(r[4]), r[5],
                                float(r[6]), r[7], r[8], r[9], int(r[10]), r[11]) for r in rows}

    def put_estimates(self, rows: Sequence[EstimateRow]) -> None:
        if rows:
            with self._transaction():
                self._db.executemany(
                    "INSERT INTO estimates (group_id, kind, seconds, source, uncertainty, lower_bound, detail, "
                    "updated) VALUES (?,?,?,?,?,?,?,?) ON CONFLICT(group_id, kind) DO UPDATE SET "
                    "seconds=excluded.seconds, source=excluded.source, uncertainty=excluded.uncertainty, "
                    "lower_bound=excluded.lower_bound, detail=excluded.detail, updated=excluded.updated",
                    [(r.group_id, r.kind, r.seconds, r.source, r.uncertainty, int(r.lower_bound), r.detail,
                      r.updated) for r in rows])

    def estimates(self, group_id: str) -> list[EstimateRow]:
        rows = self._db.execute("SELECT group_id, kind, seconds, source, uncertainty, lower_bound, detail, updated "
                                "FROM estimates WHERE group_id=? ORDER BY kind", (group_id,))
        return [EstimateRow(g, k, float(s), src, float(u), bool(lb), d, float(t)) for g, k, s, src, u, lb, d, t
                in rows]

    def forget_profiles(self, group_ids: Iterable[str]) -> None:
        """Drop the samples and estimates of groups that are gone (the audit log keeps their story)."""
        ids = [(g,) for g in group_ids]
        if ids:
            with self._transaction():
                self._db.executemany("DELETE FROM samples WHERE group_id=?", ids)
                self._db.executemany("DELETE FROM estimates WHERE group_id=?", ids)

    # ------------------------------------------------------------------------------------------ meta

    def get_meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return str(row[0]) if row else None

    def set_meta(self, key: str, value: str) -> None:
        self._db.execute("INSERT INTO meta (key, value) VALUES (?,?) "
                         "ON CONFLICT(key) DO UPDATE SET value=excluded.value", (key, value))



class ScratchStore(Store):
    """An in-memory copy of `source` (sqlite's backup API) that a dry run reads and writes in its place.

    Why a copy and not a flag: a dry run runs the enforcing daemon's very code, which writes intents, samples,
    facts and the audit as it goes; here they land in memory and `source` is never written. `reload` copies
    `source` again, so each dry-run cycle starts from the store as it is, as if the cycles before had not run.
    """

    def __init__(self, source: Store) -> None:
        super().__init__(":memory:")
        self.source = source
        self.reload()

    def reload(self) -> None:
        self.source._db.backup(self._db)
        self._facts = self._user_nodes = None  # the mirrors of the tables just replaced

def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _ids_text(ids: Iterable[int]) -> str:
    return ",".join(map(str, sorted(ids)[-MAX_FACT_JOBS:]))


def _parse_ids(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.isdigit()]


def _intent(row: tuple[Any, ...]) -> Intent:
    key, kind, group_id, step, data, created, updated = row
    return Intent(key, kind, group_id, step, json.loads(data), float(created), float(updated))
