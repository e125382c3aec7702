"""Shadow mode without Slurm: the record, the as-if-managed view, the shadow daemon over a fake Slurm, and the
report's comparison from a recorded store and recorded accounting."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import click
import pytest
from rich.console import Console

from slurmx.cli import main
from slurmx.cli.shadow_report import parse_since, render
from slurmx.core.actions import Plan, SetPriority, Start
from slurmx.core.model import ClusterView, Node, VariantState
from slurmx.core.resources import Resources
from slurmx.daemon.loop import AlreadyRunning, acquire_lock
from slurmx.daemon.shadow import LOCK_FILE, ShadowDaemon
from slurmx.daemon.shadow_report import compare
from slurmx.daemon.shadow_store import SeenGroup, ShadowDecision, ShadowStore, ShadowStoreError
from slurmx.daemon.shadow_view import as_if_managed
from slurmx.daemon.store import Store
from slurmx.policies.base import make_policy
from slurmx.slurm.records import AccountingRecord
from tests.unit.test_daemon import NODES, SITE, FakeSlurm, job

# ------------------------------------------------------------------------------------------------ the record


def _start(group: str, kind: str, t: float, job_id: int, nodes: tuple[str, ...] = ("c1",),
           outcome: str = "shadow") -> ShadowDecision:
    return ShadowDecision(t, 1, group, "Start", kind, job_id, nodes, "policy says so", outcome)


def test_the_report_refuses_a_missing_record_and_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ShadowStoreError, match=r"shadow\.sqlite: no shadow record here; run `slurmxd --shadow`"):
        ShadowStore(tmp_path / "shadow.sqlite", create=False)
    assert not (tmp_path / "shadow.sqlite").exists()  # reading never creates one


def test_the_first_would_be_start_is_the_first_shadowed_one_and_sightings_keep_their_first_time(
        tmp_path: Path) -> None:
    store = ShadowStore(tmp_path / "shadow.sqlite")
    store.see([SeenGroup("a", 10.0, 5.0, "alice", ("cpu", "gpu"))])
    store.see([SeenGroup("a", 20.0, 5.0, "alice", ("cpu", "gpu"))])
    store.record([_start("a", "gpu", 11.0, 2, outcome="refused"), _start("a", "cpu", 12.0, 1),
                  _start("a", "gpu", 13.0, 2)])
    store.close()
    again = ShadowStore(tmp_path / "shadow.sqlite", create=False)
    assert again.seen() == [SeenGroup("a", 10.0, 5.0, "alice", ("cpu", "gpu"))]
    assert again.first_starts()["a"] == _start("a", "cpu", 12.0, 1)
    assert [d.t for d in again.decisions(since=12.0)] == [12.0, 13.0]


# ------------------------------------------------------------------------------------------------ the view


def test_a_group_slurm_started_before_the_shadow_decided_waits_in_its_view_and_frees_its_node() -> None:
    node = Node("c1", ("cpu",), Resources(4, 8000), Resources(1, 500), "MIXED")
    running = replace(job(1, "new", state=VariantState.RUNNING, nodes="c1"), allocated=Resources(1, 500),
                      start_time=150, submit_time=120)
    loser = replace(job(2, "new", "gpu", state=VariantState.CANCELLED), start_time=130, end_time=130,
                    submit_time=120)  # cancelled while pending: never ran
    old = replace(job(3, "old", state=VariantState.RUNNING, nodes="c1"), submit_time=90, start_time=95)
    mine = replace(job(4, "mine", state=VariantState.PENDING), submit_time=125)
    jobs, nodes, marks = as_if_managed([running, loser, old, mine], [node],
                                       {"mine": _start("mine", "cpu", 140.0, 4)}, since=100.4)
    by_id = {j.job_id: j for j in jobs}
    assert by_id[1].state is by_id[2].state is VariantState.PENDING and by_id[1].nodes == ""
    assert by_id[1].start_time is None
    assert by_id[3] == old  # it ran before the shadow daemon started: as Slurm shows it
    assert nodes[0].allocated == Resources()
    assert marks["mine"].job_id == 4 and marks["mine"].nodes == ("c1",) and marks["mine"].released_at == 140.0


def test_a_group_submitted_in_the_shadow_daemons_first_second_is_its_own() -> None:
    started = replace(job(1, "g", state=VariantState.COMPLETED, nodes="c1"), submit_time=100, start_time=100,
                      end_time=104)
    jobs, _, _ = as_if_managed([started], NODES, {}, since=100.7)
    assert jobs[0].state is VariantState.PENDING


# ------------------------------------------------------------------------------------------------ the daemon


def test_the_shadow_daemon_acts_on_nothing_records_each_start_once_and_decides_groups_slurm_ran(
        tmp_path: Path) -> None:
    fake = FakeSlurm([replace(job(1, "a", state=VariantState.PENDING), submit_time=1001),
                      replace(job(2, "a", "gpu", state=VariantState.PENDING), submit_time=1001)])
    record = ShadowStore(tmp_path / "shadow.sqlite")
    clock = iter(float(t) for t in range(1002, 1100))
    daemon = ShadowDaemon(SITE, fake, Store(":memory:"), make_policy("fifo"),  # type: ignore[arg-type]
                          clock=lambda: next(clock), record=record, since=1000.0)
    report = daemon.cycle()
    assert [a.group_id for a in report.plan.of_type(Start)] == ["a"]
    daemon.cycle()  # the would-be start stands (shown running where it would be): not decided again
    fake.table[3] = replace(job(3, "b", state=VariantState.PENDING), submit_time=1003)
    fake.run(3, "c1")  # Slurm runs b before the shadow daemon saw it wait: it still decides b
    daemon.cycle()
    assert fake.calls == []
    starts = [(d.group_id, d.kind, d.nodes, d.outcome) for d in record.decisions() if d.action == "Start"]
    assert starts == [("a", "cpu", ("c1",), "shadow"), ("b", "cpu", ("c1",), "shadow")]
    assert {g.group_id for g in record.seen()} == {"a", "b"}
    assert not list(tmp_path.glob("slurmxd*"))


class _Prioritiser:
    """Raises one group's priority every cycle, to 7 from the third cycle on."""

    name = "prioritiser"

    def __init__(self) -> None:
        self.calls = 0

    def schedule(self, view: ClusterView, now: float) -> Plan:
        self.calls += 1
        return Plan((SetPriority("a", 5 if self.calls < 3 else 7, reason=f"call {self.calls}"),))


def test_a_standing_decision_is_recorded_once_and_again_when_it_changes(tmp_path: Path) -> None:
    fake = FakeSlurm([replace(job(1, "a", state=VariantState.PENDING), submit_time=1001)])
    record = ShadowStore(tmp_path / "shadow.sqlite")
    daemon = ShadowDaemon(SITE, fake, Store(":memory:"), _Prioritiser(),  # type: ignore[arg-type]
                          clock=lambda: 1002.0, record=record, since=1000.0)
    for _ in range(4):
        daemon.cycle()
    assert [(d.action, d.cycle, d.reason) for d in record.decisions()] == [("SetPriority", 1, "call 1"),
                                                                          ("SetPriority", 3, "call 3")]
    assert fake.calls == []


def test_a_shadow_daemon_runs_beside_an_enforcing_one_but_not_beside_another_shadow(tmp_path: Path) -> None:
    enforcing = acquire_lock(tmp_path)
    shadow = acquire_lock(tmp_path, LOCK_FILE, "slurmxd --shadow")
    with pytest.raises(AlreadyRunning, match="another slurmxd --shadow is running"):
        acquire_lock(tmp_path, LOCK_FILE, "slurmxd --shadow")
    shadow.close()
    enforcing.close()


# ------------------------------------------------------------------------------------------------ the report


def _acct(job_id: int, group: str, kind: str, state: VariantState, start: int | None, end: int | None,
          est: float = 60) -> AccountingRecord:
    return AccountingRecord(job_id=job_id, name=f"{group}@{kind}", user="alice", state=state,
                            state_text=state.value.upper(), partition=kind, qos="be", nodes="c1" if start else "",
                            comment=f"slurmx:1:g={group},v={kind},c=be,e={est:g}", request=Resources(1, 500),
                            allocated=Resources(1, 500), submit_time=100, start_time=start, end_time=end,
                            elapsed_s=(end or 0) - (start or 0), exit_code=0, max_rss_mb=None, restart_count=0)


def _recorded() -> tuple[list[SeenGroup], list[ShadowDecision], list[AccountingRecord]]:
    seen = [SeenGroup(g, 101.0, 100.0, "alice", ("cpu", "gpu")) for g in ("same", "other", "never", "prio")]
    decisions = [_start("same", "cpu", 110.0, 1), _start("other", "gpu", 104.0, 4, nodes=("g1",)),
                 ShadowDecision(105.0, 1, "prio", "SetPriority", "", None, (), "", "shadow")]
    accounting = [
        _acct(1, "same", "cpu", VariantState.COMPLETED, 102, 132),  # Slurm ran the kind the policy chose
        _acct(2, "same", "gpu", VariantState.CANCELLED, 102, 102),  # cancelled while pending
        _acct(3, "other", "cpu", VariantState.COMPLETED, 106, 146),
        _acct(4, "other", "gpu", VariantState.CANCELLED, 106, 108, est=20),  # the race loser ran two seconds
        _acct(5, "never", "cpu", VariantState.PENDING, None, None),
    ]
    return seen, decisions, accounting


def test_the_report_compares_each_would_be_start_with_the_variant_slurm_ran() -> None:
    report = compare(*_recorded())
    rows = {g.group_id: g for g in report.groups}
    same, other, never, prio = rows["same"], rows["other"], rows["never"], rows["prio"]
    assert (same.would, same.actual_kind, same.kind_differs) == ("start cpu on c1", "cpu", False)
    assert (same.wait_actual_s, same.wait_would_s, same.jct_actual_s) == (2.0, 10.0, 32.0)
    assert (same.jct_would_s, same.jct_basis, same.jct_change_s) == (40.0, "measured", 8.0)
    assert (other.would, other.actual_kind, other.kind_differs) == ("start gpu on g1", "cpu", True)
    assert (other.jct_would_s, other.jct_basis, other.jct_change_s) == (24.0, "tag estimate", -22.0)
    assert (never.would, never.actual_state, never.jct_change_s) == ("no decision (waited)", "pending", None)
    assert prio.would == "no start decided; setpriority" and prio.actual_state == "gone"
    s = report.summary
    assert (s.groups, s.would_started, s.ran, s.compared, s.kind_differs) == (4, 2, 2, 2, 1)
    assert (s.mean_wait_actual_s, s.mean_wait_would_s) == (4.0, 7.0)
    assert (s.mean_jct_actual_s, s.mean_jct_would_s, s.mean_jct_change_s) == (39.0, 32.0, -7.0)
    data = json.loads(json.dumps(report.to_json()))
    assert [g["group_id"] for g in data["groups"]] == ["same", "other", "never", "prio"]
    assert data["groups"][1]["kind_differs"] is True and "tag estimate" in data["jct_basis"]


def test_the_table_names_every_group_its_would_be_decision_and_the_estimate_basis() -> None:
    console = Console(record=True, width=220)
    render(compare(*_recorded(), notes=["accounting (sacct) unavailable"]), console)
    text = console.export_text()
    for line in ("same", "start cpu on c1", "other", "start gpu on g1", "never", "no decision (waited)",
                 "kind differs in 1 of the 2", "predicted JCT change: -7s", "estimated as: would-be JCT",
                 "note: accounting (sacct) unavailable"):
        assert line in text


# ------------------------------------------------------------------------------------------------ the command


def _slurmx(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["slurmx", *args])
    with pytest.raises(SystemExit) as exit_info:
        main()
    return int(exit_info.value.code or 0), capsys.readouterr().err


def test_shadow_report_without_a_record_or_with_an_empty_one_says_so_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _slurmx(monkeypatch, capsys, "shadow-report", "--state-dir", str(tmp_path))
    assert code == 1 and err.count("\n") == 1 and "no shadow record here" in err and "Traceback" not in err
    ShadowStore(tmp_path / "shadow.sqlite").close()
    code, err = _slurmx(monkeypatch, capsys, "shadow-report", "--state-dir", str(tmp_path))
    assert code == 1 and err.count("\n") == 1 and "holds no groups" in err
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "shadow.sqlite").write_text("not a database")
    code, err = _slurmx(monkeypatch, capsys, "shadow-report", "--state-dir", str(tmp_path / "junk"))
    assert code == 1 and err.count("\n") == 1 and "not a shadow record" in err


def test_since_reads_durations_iso_times_and_epochs_and_refuses_the_rest() -> None:
    assert parse_since("90m", 10_000.0) == 10_000.0 - 5400
    assert parse_since("1795670000", 0.0) == 1795670000.0
    assert parse_since("2026-11-26T06:00:00+00:00", 0.0) == 1795672800.0
    with pytest.raises(click.BadParameter, match="expected a duration ago"):
        parse_since("yesterday-ish", 0.0)


def test_a_record_that_cannot_be_created_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(ShadowStoreError, match=r"cannot open the shadow record .* must be writable by slurmxd"):
        ShadowStore(tmp_path / "file" / "shadow.sqlite")
