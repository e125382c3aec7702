"""`slurmxd backup` / `slurmxd restore`: a consistent copy while the store is written, a restore refused while a
daemon holds the state directory or when the backup is newer, an older backup migrated, the replaced store kept."""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurmx import __version__, cli
from slurmx.daemon.backup import HEADER_TABLE, BackupError, backup, read_backup, restore
from slurmx.daemon.loop import acquire_lock
from slurmx.daemon.main import run_daemon
from slurmx.daemon.store import MIGRATIONS, Store, StoreError
from tests.unit.test_daemon import SITE

OLD_SCHEMA = 6  # 0.1.0's (tests/fixtures/releases)


def old_store(path: Path, schema: int = OLD_SCHEMA) -> None:
    """A store as a release of `schema` left it: its migrations only, with an intent, a fact and an audit line."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    for number in range(schema):
        db.executescript(f"BEGIN;\n{MIGRATIONS[number]}\nPRAGMA user_version = {number + 1};\nCOMMIT;")
    db.execute("INSERT INTO intents VALUES ('preempt:7', 'preempt', 'g1', 'signalled', '{\"deadline\": 130.0}', "
               "100.0, 100.0)")
    db.execute("INSERT INTO group_facts VALUES ('g1', 1000, 7, '7,8', 90.0, 80.0, 1, NULL)")
    db.execute("INSERT INTO audit (t, cycle, group_id, event, detail) VALUES (100.0, 3, 'g1', 'preempt', 'x')")
    db.close()


def live_store(state: Path) -> Store:
    store = Store(state / "slurmxd.sqlite")
    store.put_intent("start:g2", "start", "g2", "releasing", {"job": 11}, now=5.0)
    store.audit([(5.0, 1, "g2", "decide", "cpu")])
    return store


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_backup_is_one_checked_owner_only_file_that_says_what_it_holds(tmp_path: Path) -> None:
    store = live_store(tmp_path / "state")
    info = backup(store.path, tmp_path / "b.sqlite")
    assert (info.schema, info.migrated_by, info.taken_by, info.source) == \
        (len(MIGRATIONS), __version__, __version__, str(store.path))
    assert (info.intents, info.audit) == (1, 1)
    assert (tmp_path / "b.sqlite").stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.sqlite", "state"]  # no -wal, no partial file
    db = sqlite3.connect(tmp_path / "b.sqlite")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert dict(db.execute(f"SELECT key, value FROM {HEADER_TABLE}"))["schema"] == str(len(MIGRATIONS))


def test_backup_never_overwrites_and_names_what_is_missing(tmp_path: Path) -> None:
    store = live_store(tmp_path / "state")
    (tmp_path / "b.sqlite").write_text("precious\n")
    with pytest.raises(BackupError, match="exists; a backup never overwrites a file"):
        backup(store.path, tmp_path / "b.sqlite")
    assert (tmp_path / "b.sqlite").read_text() == "precious\n"
    with pytest.raises(BackupError, match="no such directory for the backup"):
        backup(store.path, tmp_path / "nowhere" / "b.sqlite")
    with pytest.raises(BackupError, match=r"no slurmxd state store to back up; check daemon\.state_dir"):
        backup(tmp_path / "other" / "slurmxd.sqlite", tmp_path / "c.sqlite")
    assert not (tmp_path / "c.sqlite").exists()


def test_a_backup_taken_while_the_store_is_written_is_one_consistent_moment(tmp_path: Path) -> None:
    """A writer commits pairs of intents in one transaction each; every backup holds both of a pair or neither."""
    store = live_store(tmp_path / "state")
    store.drop_intent("start:g2")
    stop = threading.Event()

    def write() -> None:
        writer = Store(store.path)
        i = 0
        while not stop.is_set():
            writer.put_intents([(f"start:a{i}", "start", f"a{i}", "s", {"pad": "x" * 2000}),
                                (f"start:b{i}", "start", f"b{i}", "s", {"pad": "y" * 2000})])
            i += 1
        writer.close()

    thread = threading.Thread(target=write)
    thread.start()
    try:
        seen = []
        for n in range(8):
            backup(store.path, tmp_path / f"b{n}.sqlite")
            keys = {k for (k,) in sqlite3.connect(tmp_path / f"b{n}.sqlite").execute("SELECT key FROM intents")}
            seen.append(len(keys))
            assert {k.replace("start:a", "start:b") for k in keys} == {k for k in keys if k.startswith("start:b")}
    finally:
        stop.set()
        thread.join()
    assert seen[-1] > 0, "the writer never got a transaction in"


def test_backup_copies_an_older_store_as_it_is_without_migrating_it(tmp_path: Path) -> None:
    """A newly installed release backing up the old release's store before its first start changes nothing."""
    (tmp_path / "state").mkdir()
    path = tmp_path / "state" / "slurmxd.sqlite"
    old_store(path)
    before = digest(path)
    info = backup(path, tmp_path / "b.sqlite")
    assert (info.schema, info.migrated_by, info.taken_by) == (OLD_SCHEMA, "", __version__)
    assert digest(path) == before
    # No -wal or -shm left beside a stopped daemon's store (made by root, they would lock slurmxd's user out).
    assert sorted(os.listdir(path.parent)) == ["slurmxd.sqlite"]
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == OLD_SCHEMA


def test_restore_migrates_an_older_backup_and_keeps_the_store_it_replaced(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    old_store(tmp_path / "old.sqlite")
    taken = backup(tmp_path / "old.sqlite", tmp_path / "b.sqlite")
    current = live_store(state)
    current.close()
    done = restore(state, state / "slurmxd.sqlite", tmp_path / "b.sqlite")
    assert (done.backup.schema, done.schema) == (OLD_SCHEMA, len(MIGRATIONS)) and done.backup == taken
    store = Store(state / "slurmxd.sqlite")
    assert [(i.key, i.step, dict(i.data)) for i in store.intents()] == \
        [("preempt:7", "signalled", {"deadline": 130.0})]
    assert store.get_meta("migrated_by") == __version__
    [fact] = store.group_facts()["g1"]
    assert (fact.job_ids, fact.submit_time, fact.preemptions) == (frozenset({7, 8}), 80.0, 1)
    tables = {n for (n,) in store._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert HEADER_TABLE not in tables
    assert done.replaced is not None and done.replaced.stat().st_mode & 0o777 == 0o600
    assert [i.key for i in Store(done.replaced).intents()] == ["start:g2"]
    assert sorted(p.name for p in state.iterdir() if p.name.startswith(".")) == []  # no staged copy left


def test_restore_reaches_a_reader_that_has_the_store_open(tmp_path: Path) -> None:
    """`slurmx status` may hold the store open: SQLite's backup API writes in place, so it reads the restored one."""
    state = tmp_path / "state"
    reader = live_store(state)
    other = Store(tmp_path / "other.sqlite")
    other.put_intent("start:g9", "start", "g9", "releasing", {}, now=1.0)
    other.close()
    backup(tmp_path / "other.sqlite", tmp_path / "b.sqlite")
    restore(state, reader.path, tmp_path / "b.sqlite")
    assert [i.key for i in reader.intents()] == ["start:g9"]


def _hold_lock_in_child(state: Path) -> subprocess.Popen[str]:
    """A slurmxd's lock on `state`, taken by another process (as a running daemon holds it)."""
    child = subprocess.Popen([sys.executable, "-c", "import sys; from pathlib import Path; "
                              "from slurmx.daemon.loop import acquire_lock; lock = acquire_lock(Path(sys.argv[1])); "
                              "print('locked', flush=True); sys.stdin.read()", str(state)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline() == "locked\n"
    return child


def test_restore_refuses_while_a_daemon_holds_the_state_directory(tmp_path: Path) -> None:
    state = tmp_path / "state"
    live_store(state).close()
    backup(state / "slurmxd.sqlite", tmp_path / "b.sqlite")
    Store(state / "slurmxd.sqlite").put_intent("start:g3", "start", "g3", "releasing", {}, now=9.0)
    before = digest(state / "slurmxd.sqlite")
    child = _hold_lock_in_child(state)
    try:
        with pytest.raises(BackupError) as refused:
            restore(state, state / "slurmxd.sqlite", tmp_path / "b.sqlite")
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)
    line = str(refused.value)
    assert line == (f"{state}: slurmxd (pid {child.pid}) is running on this state directory; stop it (systemctl "
                    f"stop slurmxd), then `slurmxd restore {tmp_path / 'b.sqlite'}`; nothing was changed")
    assert digest(state / "slurmxd.sqlite") == before
    assert not [p for p in state.iterdir() if "restore" in p.name]


def test_restore_refuses_a_backup_newer_than_this_slurmx_naming_both(tmp_path: Path) -> None:
    state = tmp_path / "state"
    live_store(state).close()
    backup(state / "slurmxd.sqlite", tmp_path / "b.sqlite")
    db = sqlite3.connect(tmp_path / "b.sqlite", isolation_level=None)
    db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    db.execute("UPDATE meta SET value='9.1.0' WHERE key='migrated_by'")
    db.close()
    before = digest(state / "slurmxd.sqlite")
    with pytest.raises(BackupError) as refused:
        restore(state, state / "slurmxd.sqlite", tmp_path / "b.sqlite")
    line = str(refused.value)
    assert "\n" not in line and f"schema {len(MIGRATIONS) + 1} (written by slurmx 9.1.0)" in line
    assert f"newer than this slurmx {__version__} (schema {len(MIGRATIONS)})" in line
    assert "install slurmx-hpc>=9.1.0 and restore with it" in line
    assert digest(state / "slurmxd.sqlite") == before


@pytest.mark.parametrize("content", [b"not sqlite at all\n" * 100, b""])
def test_restore_refuses_what_is_not_a_slurmxd_store(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "b.sqlite").write_bytes(content)
    state = tmp_path / "state"
    live_store(state).close()
    with pytest.raises(BackupError, match=r"b\.sqlite: not a"):
        restore(state, state / "slurmxd.sqlite", tmp_path / "b.sqlite")
    sqlite3.connect(tmp_path / "c.sqlite").execute("CREATE TABLE t (x)")
    with pytest.raises(BackupError, match=r"not a slurmxd state store \(no audit, intents table\)"):
        read_backup(tmp_path / "c.sqlite")


def test_restore_into_an_empty_state_directory_makes_an_owner_only_store(tmp_path: Path) -> None:
    live_store(tmp_path / "first").close()
    backup(tmp_path / "first" / "slurmxd.sqlite", tmp_path / "b.sqlite")
    state = tmp_path / "fresh"
    done = restore(state, state / "slurmxd.sqlite", tmp_path / "b.sqlite")
    assert done.replaced is None and (state / "slurmxd.sqlite").stat().st_mode & 0o777 == 0o600
    assert [i.key for i in Store(state / "slurmxd.sqlite").intents()] == ["start:g2"]


# ------------------------------------------------------------------------------------------------ downgrade


def _newer(path: Path, by: str = "0.9.0") -> None:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    db.execute("UPDATE meta SET value=? WHERE key='migrated_by'", (by,))
    db.execute("PRAGMA journal_mode=DELETE")  # a later release's choice; opening it must not turn it back to WAL
    db.close()


def test_a_newer_store_is_refused_in_one_line_before_anything_is_written(tmp_path: Path) -> None:
    path = tmp_path / "slurmxd.sqlite"
    live_store(tmp_path).close()
    _newer(path)
    before = digest(path)
    with pytest.raises(StoreError) as refused:
        Store(path)
    assert str(refused.value) == (
        f"{path}: schema version {len(MIGRATIONS) + 1} is newer than this slurmx {__version__} (schema "
        f"{len(MIGRATIONS)}): it was written by slurmx 0.9.0; install slurmx-hpc>=0.9.0, or put back the store "
        "backed up before the upgrade (docs/upgrade.md, Downgrade)")
    assert digest(path) == before
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_refusing_a_newer_store_in_wal_mode_leaves_no_file_beside_it(tmp_path: Path) -> None:
    path = tmp_path / "slurmxd.sqlite"
    live_store(tmp_path).close()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    db.close()
    before = digest(path)
    with pytest.raises(StoreError, match="written by slurmx " + re.escape(__version__)):
        Store(path)
    assert sorted(os.listdir(tmp_path)) == ["slurmxd.sqlite"] and digest(path) == before


def test_slurmxd_refuses_a_newer_store_before_slurm_the_lock_or_the_spool(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    state = tmp_path / "state"
    live_store(state).close()
    _newer(state / "slurmxd.sqlite")
    before = sorted(os.listdir(state))

    def no_slurm(*_: Any) -> Any:
        raise AssertionError("slurmxd asked Slurm before refusing the store")

    monkeypatch.setattr("slurmx.daemon.main.adapter_from_config", no_slurm)
    site = SITE.model_copy(update={"daemon": SITE.daemon.model_copy(update={"state_dir": state})})
    with pytest.raises(StoreError, match="is newer than this slurmx"):
        run_daemon(site, once=False, dry_run=False)
    assert sorted(os.listdir(state)) == before  # not even the lock file


# ------------------------------------------------------------------------------------------------ command line


def _slurmxd(args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
             capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    monkeypatch.setattr("slurmx.core.config.load_site_config", lambda path: SITE)
    monkeypatch.setattr("sys.argv", ["slurmxd", "--site", str(tmp_path / "s.yaml"), "--state-dir",
                                     str(tmp_path / "state"), *args])
    code = 0
    try:
        cli.daemon_main()
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_commands_print_one_line_each(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    live_store(tmp_path / "state").close()
    target = tmp_path / "b.sqlite"
    code, out, err = _slurmxd(["backup", str(target)], tmp_path, monkeypatch, capsys)
    assert (code, err) == (0, "") and out.count("\n") == 1
    assert out.startswith(f"slurmxd: backed up {tmp_path / 'state' / 'slurmxd.sqlite'} (schema {len(MIGRATIONS)}) "
                          f"to {target}: taken ") and out.endswith(f"`slurmxd restore {target}`\n")
    code, out, err = _slurmxd(["restore", str(target)], tmp_path, monkeypatch, capsys)
    assert (code, err) == (0, "") and out.count("\n") == 1 and "the store it replaced is kept as" in out
    code, out, err = _slurmxd(["backup", str(target)], tmp_path, monkeypatch, capsys)
    assert (code, out) == (1, "") and err == f"slurmxd: {target}: exists; a backup never overwrites a file: " \
        "choose a new name\n"
    code, out, err = _slurmxd(["restore"], tmp_path, monkeypatch, capsys)
    assert code == 1 and err.startswith("slurmxd: slurmxd restore needs a FILE") and err.count("\n") == 1
    code, out, err = _slurmxd(["drain", str(target)], tmp_path, monkeypatch, capsys)
    assert code == 1 and err == f"slurmxd: unexpected argument '{target}': only backup and restore take a FILE\n"


def test_restore_while_a_daemon_runs_is_one_line_on_stderr(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    live_store(tmp_path / "state").close()
    backup(tmp_path / "state" / "slurmxd.sqlite", tmp_path / "b.sqlite")
    lock = acquire_lock(tmp_path / "state")  # this process is the daemon; the command opens the lock anew
    try:
        code, out, err = _slurmxd(["restore", str(tmp_path / "b.sqlite")], tmp_path, monkeypatch, capsys)
    finally:
        lock.close()
    assert (code, out) == (1, "") and err.count("\n") == 1
    assert err.startswith(f"slurmxd: {tmp_path / 'state'}: slurmxd (pid {os.getpid()}) is running")


# ------------------------------------------------------------------------------------------------ round trip

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(intents=st.dictionaries(_TEXT, st.tuples(_TEXT, st.dictionaries(_TEXT, st.integers() | _TEXT, max_size=3)),
                               max_size=8),
       audit=st.lists(st.tuples(st.floats(0, 2e9), st.integers(0, 2**40), _TEXT, _TEXT, _TEXT), max_size=12))
def test_backup_then_restore_gives_back_the_same_store(tmp_path_factory: pytest.TempPathFactory,
                                                       intents: dict[str, tuple[str, dict[str, Any]]],
                                                       audit: list[tuple[float, int, str, str, str]]) -> None:
    """Whatever users' groups put in the store (their ids, names and details are theirs to choose)."""
    folder = tmp_path_factory.mktemp("roundtrip")
    store = Store(folder / "state" / "slurmxd.sqlite")
    for key, (group, data) in intents.items():
        store.put_intent(key, "start", group, "releasing", data, now=1.0)
    store.audit(audit)
    before = list(store._db.iterdump())
    store.close()
    backup(folder / "state" / "slurmxd.sqlite", folder / "b.sqlite")
    done = restore(folder / "fresh", folder / "fresh" / "slurmxd.sqlite", folder / "b.sqlite")
    restored = sqlite3.connect(done.store)
    assert list(restored.iterdump()) == before
    assert restored.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
