"""A dry run is the enforcing daemon on a recording adapter and a scratch store: the same calls, none made.

One plan with every kind of step (a preemption with its intent file, a steered start, a priority, a cancel) and a
follow-up of the store's open intents and of a group whose variant runs, through a dry-run daemon and through an
enforcing one on a twin cluster: the dry run records exactly the calls the enforcing daemon makes, Slurm sees none,
no intent file is written, and the store's file keeps every byte.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import ClassVar

import pytest

from slurmx.core.actions import Cancel, Plan, Preempt, SetPriority, Start
from slurmx.core.model import ClusterView, VariantState
from slurmx.daemon import main
from slurmx.daemon.loop import Daemon
from slurmx.daemon.store import Store
from slurmx.slurm.recording import (
    Cancelled,
    Change,
    FileWritten,
    Held,
    Released,
    Requeued,
    Signalled,
    Updated,
    UpdatedEach,
)
from slurmx.slurm.records import SlurmJob
from tests.spool import SPOOL
from tests.unit.test_daemon import SITE, FakeSlurm, job

NOW = 1000.0


class Fixed:
    """A policy whose plan is given: the test's, whatever the view."""

    name: ClassVar[str] = "fixed"

    def __init__(self, plan: Plan) -> None:
        self.plan = plan

    def schedule(self, view: ClusterView, now: float) -> Plan:
        return self.plan


PLAN = Plan((Preempt("v", 10, beneficiary="a", reason="room for a"), Start("a", "gpu", nodes=("g1",)),
             SetPriority("b", 7), Cancel("c")))


def cluster() -> list[SlurmJob]:
    return [job(1, "v", state=VariantState.RUNNING, nodes="c1"), job(2, "a"), job(3, "a", "gpu"),
            job(4, "b", state=VariantState.PENDING), job(5, "c"),
            job(6, "r", "gpu", state=VariantState.RUNNING, nodes="g1"), job(7, "r")]


def seeded_store(path: Path) -> Store:
    """A store with history: an audit row, and b's start released long ago that has not started (timed out)."""
    store = Store(path)
    store.audit([(900.0, 1, "b", "decide", "start cpu (job 4)")])
    store.put_intent("start:b", "start", "b", "released", {"kind": "cpu", "job_id": 4, "nodes": [],
                                                            "siblings": [], "released_at": 900.0}, 900.0)
    return store


def as_fake_call(change: Change) -> tuple[str, tuple[int, ...]]:
    """A recorded change as `FakeSlurm` writes down the call it stands for."""
    if isinstance(change, Released):
        return "release", change.job_ids
    if isinstance(change, Held):
        return "hold", change.job_ids
    if isinstance(change, Cancelled):
        return "cancel", change.job_ids
    if isinstance(change, Signalled):
        return "signal", change.job_ids
    if isinstance(change, Requeued):
        return ("requeuehold" if change.hold else "requeue"), change.job_ids
    if isinstance(change, Updated):
        words = " ".join(change.change.assignments()) or f"nodelist={change.change.nodelist}"
        return f"update {words}", change.job_ids
    if isinstance(change, UpdatedEach):
        return (f"update_each {' '.join(f'{j}:{c.nodelist}' for j, c in change.changes)}",
                tuple(j for j, _ in change.changes))
    raise AssertionError(f"{change} is no call FakeSlurm knows")


def file_bytes(path: Path) -> dict[str, bytes]:
    """The store's file and its WAL beside it, byte for byte (the `-shm` index is shared memory, not content)."""
    return {p.name: p.read_bytes() for p in (path, path.with_name(path.name + "-wal")) if p.exists()}


def test_a_dry_run_records_the_enforcing_daemons_calls_and_makes_none(tmp_path: Path) -> None:
    path = tmp_path / "dry" / "slurmxd.sqlite"
    store = seeded_store(path)
    before = file_bytes(path)
    dry = FakeSlurm(cluster())
    report = Daemon(SITE, dry, store, Fixed(PLAN), dry_run=True, clock=lambda: NOW).cycle()  # type: ignore[arg-type]
    assert dry.calls == []  # Slurm saw no change
    assert not any((SPOOL / "v").glob("preempt-*"))  # nor did v's folder: the intent file is only recorded
    assert file_bytes(path) == before  # nor the store, to the byte
    assert [i.key for i in store.intents()] == ["start:b"] and len(store.history()) == 1
    written = [c for c in report.would if isinstance(c, FileWritten)]
    assert [Path(c.path).name for c in written] == ["preempt-1"] and "grace=10" in written[0].text
    assert {row[3] for row in report.audit} >= {"decide", "preempt", "release", "setpriority", "cancel", "timeout"}

    shutil.copytree(tmp_path / "dry", tmp_path / "real")
    real = FakeSlurm(cluster())
    Daemon(SITE, real, Store(tmp_path / "real" / "slurmxd.sqlite"), Fixed(PLAN),  # type: ignore[arg-type]
           clock=lambda: NOW).cycle()
    assert any((SPOOL / "v").glob("preempt-1"))  # the enforcing daemon writes it: the check above can fail
    recorded = [as_fake_call(c) for c in report.would if not isinstance(c, FileWritten)]
    assert recorded == [c for c in real.calls if c[1]]  # the same calls in the same order (none naming no job)
    assert {"signal", "release", "hold", "cancel"} <= {verb for verb, _ in recorded}


def test_each_dry_run_cycle_starts_from_the_store_as_it_is(tmp_path: Path) -> None:
    """What a cycle wrote to the scratch copy is gone at the next: a dry run decides again on the real store, as
    today's `--dry-run` loop did, and its record holds that cycle's changes alone."""
    store = Store(tmp_path / "s.sqlite")
    fake = FakeSlurm([job(1, "a"), job(2, "b")])
    daemon = Daemon(SITE, fake, store, Fixed(Plan((Start("a", "cpu"),))), dry_run=True,  # type: ignore[arg-type]
                    clock=lambda: NOW)
    first, second = daemon.cycle(), daemon.cycle()
    assert first.would == second.would == (Released((1,)),)
    assert store.intents() == [] and fake.calls == []


def test_once_dry_run_prints_the_plan_the_changes_it_would_make_and_the_audit_it_would_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeSlurm([job(1, "a"), job(2, "b")])
    monkeypatch.setattr(main, "adapter_from_config", lambda transport: fake)
    site = SITE.model_copy(update={"daemon": SITE.daemon.model_copy(update={"state_dir": tmp_path / "state"})})
    try:
        main.run_daemon(site, once=True, dry_run=True, check=False)
    finally:
        logging.getLogger("slurmxd").handlers.clear()  # the handler writes to this test's captured stderr
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("cycle 1: 2 pending") and [line.split()[:2] for line in lines[1:3]] == [
        ["Start", "a"], ["Start", "b"]]
    assert lines[3:6] == ["  would update job 1: ReqNodeList=c1; job 2: ReqNodeList=c1", "  would release jobs 1,2",
                          "  the audit it would write (nothing of it was done):"]
    assert "  release a: released job 1 steered to c1" in lines[6:]
    assert fake.calls == [] and not (tmp_path / "state").exists()  # no lock, no store: not even the folder
