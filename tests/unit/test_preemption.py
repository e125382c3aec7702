"""The preemption protocol (slurmx.daemon.preemption) and `slurmx preempt`, without a cluster.

`FakeSlurm` is a tiny recording fake of the adapter: jobs whose state changes at scripted (fake) times, and a list
of the control calls it received. Its requeue behaves as Slurm was seen to behave on the real clusters: the
restart count goes up at once while the old state lingers, and requeueing a pending job counts one more restart
(so a second requeue is a real harm the protocol must avoid). A few tests run CliSlurm over ReplayTransport to
pin the exact Slurm commands.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from slurmx.cli.preempt import parse_grace, preempt_command
from slurmx.core.config import SiteConfig
from slurmx.core.model import Node, Partition, VariantState
from slurmx.core.resources import Resources
from slurmx.daemon import preemption as pre
from slurmx.daemon.preemption import PreemptionError, PreemptionTicket, Settlement
from slurmx.hooks._env import parse_intent
from slurmx.slurm.adapter import CliSlurm, JobUpdate, RetryPolicy
from slurmx.slurm.errors import InvalidJobError, SlurmCommandError, SlurmError
from slurmx.slurm.records import AccountingRecord, SlurmJob
from slurmx.slurm.transport import CommandResult, ReplayTransport

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "slurm"
HOOK_SH = REPO / "slurmx" / "hooks" / "hook.sh"
T0 = 1_800_000_000.0


ALICE = os.getuid()  # the job's user owns its group folder: the files these tests make are the test user's


def job(job_id: int = 7, state: VariantState = VariantState.RUNNING, restarts: int = 0,
        exit_code: int | None = 0, comment: str = "", state_text: str = "") -> SlurmJob:
    return SlurmJob(job_id=job_id, name="j@cpu", user="alice", user_id=ALICE, state=state,
                    state_text=state_text or state.value.upper(), reason="None", partition="cpu", qos="be",
                    comment=comment, nodes="c1", request=Resources(1, 100), allocated=Resources(1, 100),
                    priority=1, nice=0, held=state is VariantState.HELD, restart_count=restarts,
                    time_limit_s=None, submit_time=None, start_time=None, end_time=None, exit_code=exit_code)


@dataclass
class FakeSlurm:
    """A recording fake of the SlurmAdapter: `events` change a job at a (fake) time; `calls` records controls."""

    clock: FakeClock
    current: dict[int, SlurmJob] = field(default_factory=dict)
    events: list[tuple[float, int, dict[str, Any]]] = field(default_factory=list)
    calls: list[tuple[str, tuple[int, ...], str]] = field(default_factory=list)
    squeue_calls: int = 0
    fail_signal: Exception | None = None
    fail_requeue: Exception | None = None
    on_signal: Any = None

    def add(self, snapshot: SlurmJob) -> None:
        self.current[snapshot.job_id] = snapshot

    def at(self, when: float, job_id: int, **changes: Any) -> None:
        self.events.append((when, job_id, changes))

    def _advance(self) -> None:
        for when, job_id, changes in sorted(self.events, key=lambda e: e[0]):
            if when <= self.clock.now and job_id in self.current:
                self.current[job_id] = replace(self.current[job_id], **changes)
        self.events = [e for e in self.events if e[0] > self.clock.now]

    # the adapter protocol ------------------------------------------------------------------------------
    def version(self) -> str:
        return "24.11"

    def submit(self, script: str, options: Sequence[str]) -> int:
        raise AssertionError("not used")

    def make_private_folder(self, path: str, files: Mapping[str, str]) -> None:
        raise AssertionError("not used")

    def jobs(self, job_ids: Iterable[int] | None = None, user: str | None = None) -> list[SlurmJob]:
        self.squeue_calls += 1
        self._advance()
        wanted = set(job_ids) if job_ids is not None else set(self.current)
        return [j for i, j in self.current.items() if i in wanted]

    def nodes(self) -> list[Node]:
        return []

    def partitions(self, kinds: Mapping[str, str] | None = None) -> list[Partition]:
        return []

    def accounting(self, job_ids: Iterable[int] | None = None, since: str = "now-1day") -> list[AccountingRecord]:
        return []

    def hold(self, job_ids: Iterable[int]) -> None:
        self.calls.append(("hold", tuple(job_ids), ""))

    def release(self, job_ids: Iterable[int]) -> None:
        ids = tuple(job_ids)
        self.calls.append(("release", ids, ""))
        for i in ids:
            self.current[i] = replace(self.current[i], state=VariantState.PENDING, held=False)

    def requeue(self, job_ids: Iterable[int], hold: bool = False) -> None:
        ids = tuple(job_ids)
        self.calls.append(("requeuehold" if hold else "requeue", ids, ""))
        if self.fail_requeue is not None:
            raise self.fail_requeue
        for i in ids:  # as seen live: the count goes up at once, the old state lingers for a moment
            j = self.current[i]
            self.current[i] = replace(j, restart_count=j.restart_count + 1)
            self.at(self.clock.now + 2, i, state=VariantState.HELD if hold else VariantState.PENDING)

    def signal(self, job_ids: Iterable[int], signal: str, batch_only: bool = True) -> None:
        ids = tuple(job_ids)
        self.calls.append(("signal", ids, f"{signal}:{'batch' if batch_only else 'full'}"))
        if self.on_signal is not None:
            self.on_signal(ids)
        if self.fail_signal is not None:
            raise self.fail_signal

    def cancel(self, job_ids: Iterable[int]) -> None:
        self.calls.append(("cancel", tuple(job_ids), ""))

    def update(self, job_ids: Iterable[int], change: JobUpdate) -> None:
        raise AssertionError("not used")

    def update_each(self, changes: Sequence[tuple[int, JobUpdate]]) -> dict[int, SlurmError]:
        raise AssertionError("not used")

    def command_counts(self) -> Mapping[str, int]:
        return {}

    def controls(self) -> list[str]:
        return [c[0] for c in self.calls]


@dataclass
class FakeClock:
    now: float = T0
    slept: list[float] = field(default_factory=list)

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def slurm(clock: FakeClock) -> FakeSlurm:
    return FakeSlurm(clock)


def ticket(**changes: Any) -> PreemptionTicket:
    base = PreemptionTicket(job_id=7, signal="USR2", grace_s=30, t0=T0, deadline=T0 + 30, restart_count=0)
    return replace(base, **changes)


# ------------------------------------------------------------------------------------------------ begin


def test_begin_records_the_intent_before_signalling(slurm: FakeSlurm, tmp_path: Path) -> None:
    slurm.add(job(7))
    seen: list[str] = []
    slurm.on_signal = lambda ids: seen.append((tmp_path / "preempt-7").read_text())
    t = pre.begin(slurm, 7, 30, spool_dir=tmp_path, reason="te job 9\nneeds c1", now=T0 + 0.25)
    assert slurm.calls == [("signal", (7,), "USR2:batch")]
    assert seen == [f"preempt grace=30 deadline={int(T0) + 31} t0={T0 + 0.25:.3f} signal=USR2 restarts=0 "
                    "reason=te job 9 needs c1\n"]
    assert t.deadline == int(T0) + 31  # rounded up: the job gets at least its grace
    assert t.intent == tmp_path / "preempt-7" and t.restart_count == 0 and t.reason == "te job 9 needs c1"
    assert [p.name for p in tmp_path.iterdir()] == ["preempt-7"]  # no temp file left behind
    assert oct((tmp_path / "preempt-7").stat().st_mode & 0o777) == "0o644"


def test_the_job_side_hooks_read_the_same_deadline(slurm: FakeSlurm, tmp_path: Path) -> None:
    slurm.add(job(7, restarts=2))
    t = pre.begin(slurm, 7, 45, signal="SIGUSR2", spool_dir=tmp_path, reason="deadline=1 grace=2", now=T0)
    line = (tmp_path / "preempt-7").read_text().strip()
    assert t.signal == "USR2" and "restarts=2" in line
    assert parse_intent(line, signalled_at=T0 + 3) == t.deadline  # Python hook
    script = (f'source {HOOK_SH}; SLURMX_SPOOL_DIR={tmp_path} SLURM_JOB_ID=7 _slurmx_set_deadline; '
              'echo "$SLURMX_GRACE_DEADLINE"')
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30, check=True)
    assert float(out.stdout) == t.deadline  # bash hook


@pytest.mark.parametrize(("snapshot", "message"), [
    (job(7, VariantState.PENDING), "job 7: pending, not running: nothing to preempt"),
    (job(7, VariantState.COMPLETED), "job 7: completed, not running: nothing to preempt"),
    (None, "job 7: not in squeue (finished long ago, or never existed)"),
])
def test_begin_refuses_jobs_that_do_not_run(slurm: FakeSlurm, tmp_path: Path, snapshot: SlurmJob | None,
                                           message: str) -> None:
    if snapshot is not None:
        slurm.add(snapshot)
    with pytest.raises(PreemptionError) as info:
        pre.begin(slurm, 7, 30, spool_dir=tmp_path)
    assert str(info.value) == message
    assert slurm.calls == [] and list(tmp_path.iterdir()) == []


def test_a_job_that_ended_before_the_signal_is_left_alone(slurm: FakeSlurm, tmp_path: Path) -> None:
    slurm.add(job(7))
    slurm.fail_signal = InvalidJobError(["scancel"], 1, "scancel: error: Kill job error on job id 7: "
                                        "Job/step already completing or completed")
    with pytest.raises(PreemptionError, match=r"^job 7: ended before the signal reached it; left alone$"):
        pre.begin(slurm, 7, 30, spool_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []  # the intent is withdrawn


def test_an_intent_that_cannot_be_written_spares_no_job(slurm: FakeSlurm, tmp_path: Path) -> None:
    """The folder is the job user's: what he does to it never stops the signal (tests/unit/test_preempt_dodge.py)."""
    slurm.add(job(7))
    t = pre.begin(slurm, 7, 30, spool_dir=tmp_path / "missing", now=T0)
    assert t.intent is None and t.deadline == T0 + 30
    assert t.intent_error == (f"the intent file {tmp_path}/missing/preempt-7 could not be written (No such file or "
                              "directory); signalled anyway, its hook counts its own grace")
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)  # a group folder swapped for a symlink by its (job) owner
    t = pre.begin(slurm, 7, 30, spool_dir=tmp_path / "link", now=T0)
    assert t.intent is None and t.intent_error is not None and "could not be written" in t.intent_error
    assert slurm.controls() == ["signal", "signal"] and list(target.iterdir()) == []


def test_a_planted_symlink_at_the_intent_path_is_replaced_not_followed(slurm: FakeSlurm, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "preempt-7").symlink_to(victim)
    slurm.add(job(7))
    pre.begin(slurm, 7, 30, spool_dir=spool, now=T0)
    assert victim.read_text() == "precious\n"
    assert not (spool / "preempt-7").is_symlink()
    assert (spool / "preempt-7").read_text().startswith("preempt grace=30 ")


def test_begin_without_spool_signals_only(slurm: FakeSlurm) -> None:
    slurm.add(job(7))
    t = pre.begin(slurm, 7, 10, now=T0)
    assert t.intent is None and slurm.controls() == ["signal"]
    pre.close(t)  # nothing to remove: harmless


@pytest.mark.parametrize("grace", [-1.0, float("inf"), float("nan")])
def test_begin_rejects_a_bad_grace(slurm: FakeSlurm, grace: float) -> None:
    slurm.add(job(7))
    with pytest.raises(PreemptionError, match="grace must be a non-negative number"):
        pre.begin(slurm, 7, grace)


# ------------------------------------------------------------------------------------------------ settle

R, P, H, C, F, CG = (VariantState.RUNNING, VariantState.PENDING, VariantState.HELD, VariantState.COMPLETED,
                     VariantState.FAILED, VariantState.COMPLETING)


@pytest.mark.parametrize(("snapshot", "now", "action"), [
    (job(7, R), T0 + 5, Settlement.WAIT),
    (job(7, R), T0 + 29.9, Settlement.WAIT),
    (job(7, R), T0 + 30, Settlement.REQUEUE_AT_DEADLINE),
    (job(7, VariantState.SUSPENDED), T0 + 31, Settlement.REQUEUE_AT_DEADLINE),
    (job(7, VariantState.UNKNOWN), T0 + 31, Settlement.REQUEUE_AT_DEADLINE),
    (job(7, CG, exit_code=99), T0 + 5, Settlement.WAIT),  # requeue refuses a completing job: wait for the end
    (job(7, CG), T0 + 300, Settlement.WAIT),
    (job(7, F, exit_code=99), T0 + 5, Settlement.REQUEUE_BY_JOB),  # checkpointed and left: requeue at once
    (job(7, F, exit_code=99), T0 + 500, Settlement.REQUEUE_BY_JOB),
    (job(7, F, exit_code=128 + 12), T0 + 5, Settlement.REQUEUE_BY_JOB),  # killed by the grace signal (USR2)
    (job(7, C, exit_code=0), T0 + 5, Settlement.FINISHED),
    (job(7, C, exit_code=0), T0 + 500, Settlement.FINISHED),
    (job(7, F, exit_code=3), T0 + 5, Settlement.FINISHED),  # its own failure: requeueing would only repeat it
    (job(7, F, exit_code=None), T0 + 5, Settlement.FINISHED),
    (job(7, VariantState.CANCELLED, exit_code=99), T0 + 5, Settlement.FINISHED),  # someone cancelled it
    (job(7, VariantState.TIMEOUT, exit_code=None), T0 + 5, Settlement.FINISHED),
    (job(7, P), T0 + 5, Settlement.ALREADY_REQUEUED),
    (job(7, H), T0 + 5, Settlement.ALREADY_REQUEUED),
    (job(7, F, restarts=1, exit_code=99), T0 + 5, Settlement.ALREADY_REQUEUED),  # new count, old state (seen live)
    (job(7, R, restarts=1), T0 + 500, Settlement.ALREADY_REQUEUED),  # requeued and running again
    (None, T0 + 5, Settlement.GONE),
])
def test_settle(snapshot: SlurmJob | None, now: float, action: Settlement) -> None:
    decision = pre.settle(ticket(), snapshot, now)
    assert decision.action is action


def test_a_checkpointed_job_slurm_requeued_by_requeue_exit_is_said_so_and_not_requeued_again() -> None:
    decision = pre.settle(ticket(), job(7, P, restarts=1, exit_code=99), T0 + 2)
    assert decision.action is Settlement.ALREADY_REQUEUED and not decision.action.requeues
    assert "Slurm requeued it (RequeueExit" in decision.why



def test_settle_uses_the_tickets_requeue_code_and_signal() -> None:
    t = ticket(requeue_exit_code=42, signal="TERM")
    assert pre.settle(t, job(7, F, exit_code=42), T0).action is Settlement.REQUEUE_BY_JOB
    assert pre.settle(t, job(7, F, exit_code=99), T0).action is Settlement.FINISHED
    assert pre.settle(t, job(7, F, exit_code=128 + 15), T0).action is Settlement.REQUEUE_BY_JOB


def test_settle_never_requeues_a_ticket_twice_even_on_a_stale_snapshot() -> None:
    done = ticket(requeued_at=T0 + 30)
    stale = job(7, R)  # taken before the requeue
    assert pre.settle(done, stale, T0 + 31).action is Settlement.ALREADY_REQUEUED


def test_settle_words() -> None:
    assert pre.settle(ticket(), job(7, R), T0 + 10).why == "running, 20 s of grace left"
    assert pre.settle(ticket(), job(7, R), T0 + 30).why == "still running at the deadline (30 s of grace)"
    assert pre.settle(ticket(), job(7, F, exit_code=99), T0).why == "checkpointed and exited for requeue (exit 99)"
    assert pre.settle(ticket(), job(7, C), T0).why == "completed during its grace period (exit 0)"
    assert pre.settle(ticket(), job(7, F, exit_code=None, state_text="FAILED"), T0).why == \
        "ended FAILED during its grace period (no exit code)"


# ------------------------------------------------------------------------------------------------ enforce


@pytest.mark.parametrize(("mode", "release", "calls"), [
    ("requeue", True, ["requeue"]),
    ("requeuehold", True, ["requeuehold", "release"]),
    ("requeuehold", False, ["requeuehold"]),
])
def test_enforce_modes(slurm: FakeSlurm, tmp_path: Path, mode: str, release: bool, calls: list[str]) -> None:
    slurm.add(job(7))
    t = pre.begin(slurm, 7, 30, spool_dir=tmp_path, now=T0)
    done = pre.enforce(slurm, t, mode=mode, release=release, now=T0 + 30)
    assert slurm.controls() == ["signal", *calls]
    assert done.requeued_at == T0 + 30
    assert not (tmp_path / "preempt-7").exists()  # closed: a later signal finds no stale deadline
    assert pre.enforce(slurm, done, mode=mode, release=release) is done
    assert slurm.controls() == ["signal", *calls]  # enforcing again sends nothing


def test_enforce_rejects_an_unknown_mode(slurm: FakeSlurm) -> None:
    with pytest.raises(ValueError, match="mode must be one of requeue, requeuehold"):
        pre.enforce(slurm, ticket(), mode="kill")


def test_a_lost_requeue_answer_is_checked_against_squeue(slurm: FakeSlurm) -> None:
    slurm.add(job(7, restarts=1))  # Slurm did requeue it; only the answer was lost
    slurm.fail_requeue = SlurmCommandError(["scontrol", "requeue", "7"], None, "timed out")
    assert pre.enforce(slurm, ticket(), now=T0).requeued_at == T0
    slurm.current[7] = job(7, restarts=0)  # ... and here it really failed
    with pytest.raises(SlurmCommandError):
        pre.enforce(slurm, ticket())


def test_advance_closes_the_ticket_when_the_job_finished(slurm: FakeSlurm, tmp_path: Path) -> None:
    slurm.add(job(7))
    t = pre.begin(slurm, 7, 30, spool_dir=tmp_path, now=T0)
    step = pre.advance(slurm, t, job(7, R), T0 + 1)
    assert step.decision.action is Settlement.WAIT and (tmp_path / "preempt-7").exists()
    step = pre.advance(slurm, step.ticket, job(7, C), T0 + 2)
    assert step.decision.action is Settlement.FINISHED and not (tmp_path / "preempt-7").exists()
    assert slurm.controls() == ["signal"]


def test_advance_twice_requeues_once(slurm: FakeSlurm) -> None:
    slurm.add(job(7))
    t = pre.begin(slurm, 7, 30, now=T0)
    stale = job(7, R)
    first = pre.advance(slurm, t, stale, T0 + 30)
    second = pre.advance(slurm, first.ticket, stale, T0 + 31)  # same stale snapshot, same daemon
    third = pre.advance(slurm, t, slurm.jobs([7])[0], T0 + 32)  # an old ticket (daemon restarted), fresh squeue
    assert first.decision.action is Settlement.REQUEUE_AT_DEADLINE
    assert second.decision.action is Settlement.ALREADY_REQUEUED
    assert third.decision.action is Settlement.ALREADY_REQUEUED
    assert slurm.controls().count("requeue") == 1


# ------------------------------------------------------------------------------------------------ intent files


def test_read_intent_restores_the_ticket(slurm: FakeSlurm, tmp_path: Path) -> None:
    slurm.add(job(12, restarts=3))
    t = pre.begin(slurm, 12, 90, spool_dir=tmp_path, reason="fitgpp: te job 40", requeue_exit_code=77, now=T0)
    back = pre.read_intent(tmp_path / "preempt-12", requeue_exit_code=77)
    assert back == t


@pytest.mark.parametrize(("name", "text", "message"), [
    ("preempt-x", "preempt grace=1 deadline=2\n", "not an intent file"),
    ("preempt-3", "", "cannot read the intent"),
    ("preempt-3", "preempt grace=1\n", "expected `preempt grace=<s> deadline=<epoch> ...`"),
    ("preempt-3", "hello grace=1 deadline=2\n", "expected a line starting with `preempt`"),
])
def test_read_intent_rejects_other_files(tmp_path: Path, name: str, text: str, message: str) -> None:
    (tmp_path / name).write_text(text)
    with pytest.raises(PreemptionError, match=message):
        pre.read_intent(tmp_path / name)


def test_read_intent_of_a_minimal_line(tmp_path: Path) -> None:
    (tmp_path / "preempt-5").write_text(f"preempt grace=20 deadline={int(T0)} reason=-\n")
    t = pre.read_intent(tmp_path / "preempt-5")
    assert (t.job_id, t.grace_s, t.deadline, t.t0, t.restart_count, t.reason) == (5, 20, T0, T0 - 20, 0, "")


def site(tmp_path: Path, **preemption: Any) -> SiteConfig:
    return SiteConfig.model_validate({
        "cluster": {"name": "t", "slurm_version": "24.11"},
        "resources": {"cpu": {"partition": "cpu", "cpus": 1, "mem": "100M"}},
        "preemption": {"grace": "30s", **preemption},
        "submit": {"spool_dir": str(tmp_path / "spool")},
        "transport": {"kind": "local"},
    })


def test_group_spool_dir(tmp_path: Path) -> None:
    s = site(tmp_path)
    (tmp_path / "spool" / "train-abc123").mkdir(parents=True, mode=0o700)
    (tmp_path / "spool" / "link").symlink_to(tmp_path)
    (tmp_path / "spool" / "open").mkdir(mode=0o700)
    (tmp_path / "spool" / "open").chmod(0o777)
    tagged = job(7, comment="slurmx:g=train-abc123,v=cpu,c=be")
    assert pre.group_spool_dir(s, tagged) == tmp_path / "spool" / "train-abc123"
    assert pre.group_spool_dir(s, replace(tagged, user_id=ALICE + 1)) is None  # not this job's user's folder
    for comment in ("", "slurmx:g=gone-000000,v=cpu", "slurmx:g=../spool/train-abc123,v=cpu",
                    "slurmx:g=/etc,v=cpu", "slurmx:g=link,v=cpu", "slurmx:g=open,v=cpu"):
        assert pre.group_spool_dir(s, job(7, comment=comment)) is None, comment


# ------------------------------------------------------------------------------------------------ blocking loop


def test_a_job_that_checkpoints_is_requeued_as_soon_as_it_leaves(slurm: FakeSlurm, clock: FakeClock,
                                                                  tmp_path: Path) -> None:
    slurm.add(job(7))
    slurm.at(T0 + 4.5, 7, state=F, exit_code=99)
    outcome = pre.preempt_and_wait(slurm, 7, 30, spool_dir=tmp_path, clock=clock, sleep=clock.sleep)
    assert outcome.action is Settlement.REQUEUE_BY_JOB and outcome.requeued and not outcome.held
    assert clock.now - T0 == pytest.approx(5)  # not 30: no idling once the job is gone
    assert outcome.line() == "job 7: checkpointed and exited for requeue (exit 99) after 5 s; requeued"
    assert slurm.controls() == ["signal", "requeue"]
    assert list(tmp_path.iterdir()) == []


def test_a_job_that_ignores_the_signal_is_requeued_at_the_deadline(slurm: FakeSlurm, clock: FakeClock) -> None:
    clock.now = T0 + 0.4
    slurm.add(job(7))
    outcome = pre.preempt_and_wait(slurm, 7, 30, poll=7, clock=clock, sleep=clock.sleep)
    assert outcome.action is Settlement.REQUEUE_AT_DEADLINE and outcome.requeued
    assert clock.now == T0 + 31  # the deadline (t0 + grace, rounded up), not a poll interval later
    assert max(clock.slept) <= 7
    assert outcome.line() == "job 7: still running at the deadline (30 s of grace) after 31 s; requeued"


def test_a_job_that_finishes_during_grace_is_left_alone(slurm: FakeSlurm, clock: FakeClock) -> None:
    slurm.add(job(7))
    slurm.at(T0 + 8, 7, state=C, exit_code=0)
    outcome = pre.preempt_and_wait(slurm, 7, 30, clock=clock, sleep=clock.sleep)
    assert outcome.action is Settlement.FINISHED and not outcome.requeued
    assert outcome.line() == "job 7: completed during its grace period (exit 0) after 8 s; left alone"
    assert slurm.controls() == ["signal"]


def test_hold_leaves_the_job_held(slurm: FakeSlurm, clock: FakeClock) -> None:
    slurm.add(job(7))
    outcome = pre.preempt_and_wait(slurm, 7, 3, mode="requeuehold", release=False, clock=clock, sleep=clock.sleep)
    assert outcome.requeued and outcome.held
    assert outcome.line().endswith("; requeued and held (release it with `scontrol release`)")
    assert slurm.controls() == ["signal", "requeuehold"]


def test_many_jobs_share_one_squeue_per_poll(slurm: FakeSlurm, clock: FakeClock) -> None:
    for i in (7, 8, 9):
        slurm.add(job(i))
    slurm.add(job(10, P))
    slurm.at(T0 + 3, 8, state=F, exit_code=99)
    slurm.at(T0 + 6, 9, state=C, exit_code=0)
    seen: list[int] = []
    outcomes = pre.preempt_many(slurm, [7, 8, 9, 10, 8], 10, clock=clock, sleep=clock.sleep,
                                on_outcome=lambda o: seen.append(o.job_id))
    assert [o.job_id for o in outcomes] == [7, 8, 9, 10]  # in the order given, duplicates dropped
    assert [o.action for o in outcomes] == [Settlement.REQUEUE_AT_DEADLINE, Settlement.REQUEUE_BY_JOB,
                                            Settlement.FINISHED, None]
    assert outcomes[3].error == "pending, not running: nothing to preempt"
    assert outcomes[3].line() == "job 10: pending, not running: nothing to preempt"
    assert seen == [10, 8, 9, 7]  # reported as soon as known
    assert slurm.squeue_calls == 1 + 11  # one snapshot to begin, then one per poll for all open jobs
    assert [c for c in slurm.calls if c[0] == "requeue"] == [("requeue", (8,), ""), ("requeue", (7,), "")]


def test_a_job_stuck_completing_is_given_up(slurm: FakeSlurm, clock: FakeClock) -> None:
    slurm.add(job(7))
    slurm.at(T0 + 1, 7, state=CG)
    outcome = pre.preempt_and_wait(slurm, 7, 5, poll=10, clock=clock, sleep=clock.sleep)
    assert outcome.action is None and not outcome.requeued
    assert outcome.error is not None and outcome.error.startswith("still completing 120 s after the deadline")


def test_slurm_errors_become_one_line_outcomes(slurm: FakeSlurm, clock: FakeClock) -> None:
    slurm.add(job(7))
    slurm.fail_requeue = SlurmCommandError(["scontrol", "requeue", "7"], 1,
                                           "scontrol: error: Requested operation is presently disabled")
    outcome = pre.preempt_and_wait(slurm, 7, 2, clock=clock, sleep=clock.sleep)
    assert outcome.error == ("scontrol requeue 7: exit 1: scontrol: error: Requested operation is presently "
                             "disabled")


# ------------------------------------------------------------------------------------------------ real commands


def test_the_slurm_commands_sent(tmp_path: Path) -> None:
    """Through CliSlurm: the recorded 24.11 squeue (job 7 runs), then the signal and the requeue as sent."""
    squeue = (FIXTURES / "24.11" / "squeue.json").read_text()
    data = json.loads(squeue)
    failed = json.loads(squeue)
    for j in failed["jobs"]:
        if j["job_id"] == 7:
            j["job_state"] = ["FAILED"]
            j["exit_code"] = {"status": ["ERROR"], "return_code": {"set": True, "infinite": False, "number": 99}}
    answers: dict[tuple[str, ...], CommandResult | list[CommandResult]] = {
        ("squeue",): [CommandResult((), 0, json.dumps(data), ""), CommandResult((), 0, json.dumps(failed), "")],
        ("scancel",): CommandResult((), 0, "", ""),
        ("scontrol",): CommandResult((), 0, "", ""),
    }
    transport = ReplayTransport(answers)
    adapter = CliSlurm(transport, RetryPolicy(retries=0))
    clock = FakeClock()
    outcome = pre.preempt_and_wait(adapter, 7, 60, mode="requeuehold", clock=clock, sleep=clock.sleep)
    assert outcome.action is Settlement.REQUEUE_BY_JOB
    sent = [argv for argv, _ in transport.calls if argv[0] != "squeue"]
    assert sent == [("scancel", "--signal=USR2", "--batch", "7"), ("scontrol", "requeuehold", "7"),
                    ("scontrol", "release", "7")]


# ------------------------------------------------------------------------------------------------ the command


@dataclass
class FakeContext:
    """Stands in for slurmx.cli.context.Context: the site config and the (fake) adapter."""

    config: SiteConfig
    fake: FakeSlurm

    def site(self) -> SiteConfig:
        return self.config

    def adapter(self) -> FakeSlurm:
        return self.fake


def run(ctx: FakeContext, *args: str) -> Any:
    return CliRunner().invoke(preempt_command, list(args), obj=ctx, catch_exceptions=False)


@pytest.fixture
def fast(monkeypatch: pytest.MonkeyPatch, clock: FakeClock) -> FakeClock:
    """The command's loop on the fake clock: no real waiting."""
    original = pre.preempt_many

    def patched(*args: Any, **kwargs: Any) -> Any:
        return original(*args, **{**kwargs, "clock": clock, "sleep": clock.sleep})

    monkeypatch.setattr("slurmx.cli.preempt.preempt_many", patched)
    return clock


def test_command_uses_the_sites_defaults(slurm: FakeSlurm, fast: FakeClock, tmp_path: Path) -> None:
    slurm.add(job(7, comment="slurmx:g=g-1,v=cpu,c=be"))
    (tmp_path / "spool" / "g-1").mkdir(parents=True)
    intents: list[str] = []
    slurm.on_signal = lambda ids: intents.append((tmp_path / "spool" / "g-1" / "preempt-7").read_text())
    result = run(FakeContext(site(tmp_path, signal="TERM", requeue_exit_code=42), slurm), "7")
    assert result.exit_code == 0, result.output
    assert result.output == "job 7: still running at the deadline (30 s of grace) after 30 s; requeued\n"
    assert slurm.calls[0] == ("signal", (7,), "TERM:batch")
    assert intents[0].startswith("preempt grace=30 ") and "reason=slurmx preempt (admin)" in intents[0]


def test_command_grants_each_job_its_own_grace_as_slurmxd_does(slurm: FakeSlurm, fast: FakeClock,
                                                               tmp_path: Path) -> None:
    """One grace protocol: without --grace a job gets its spec's grace (the tag's gr=, clamped), else the site's."""
    slurm.add(job(7, comment="slurmx:1:g=g-1,v=cpu,c=be,gr=45"))
    slurm.add(job(8, comment="slurmx:1:g=g-2,v=cpu,c=be,gr=99999999"))
    slurm.add(job(9))
    result = run(FakeContext(site(tmp_path), slurm), "7", "8", "9")
    assert result.exit_code == 0, result.output
    limit = site(tmp_path).preemption.max_grace_s
    assert "job 7: still running at the deadline (45 s of grace)" in result.output
    assert f"job 8: still running at the deadline ({limit} s of grace)" in result.output
    assert "job 9: still running at the deadline (30 s of grace)" in result.output


def test_command_options(slurm: FakeSlurm, fast: FakeClock, tmp_path: Path) -> None:
    slurm.add(job(7))
    slurm.at(T0 + 2, 7, state=F, exit_code=99)
    result = run(FakeContext(site(tmp_path), slurm), "7", "--grace", "2m", "--signal", "sigusr1", "--hold")
    assert result.exit_code == 0, result.output
    assert result.output == ("job 7: checkpointed and exited for requeue (exit 99) after 2 s; requeued and held "
                             "(release it with `scontrol release`)\n")
    assert slurm.calls == [("signal", (7,), "USR1:batch"), ("requeuehold", (7,), "")]


def test_command_site_requeuehold_mode_releases(slurm: FakeSlurm, fast: FakeClock, tmp_path: Path) -> None:
    slurm.add(job(7))
    result = run(FakeContext(site(tmp_path, mode="requeuehold"), slurm), "7", "--grace", "5")
    assert result.exit_code == 0, result.output
    assert slurm.controls() == ["signal", "requeuehold", "release"]


def test_command_one_line_per_job_and_errors(slurm: FakeSlurm, fast: FakeClock, tmp_path: Path) -> None:
    slurm.add(job(7))
    slurm.add(job(8, C))
    slurm.add(job(9, comment="slurmx:g=elsewhere-1,v=cpu,c=be"))
    slurm.at(T0 + 1, 7, state=C)
    result = CliRunner().invoke(preempt_command, ["7", "8", "9", "--grace", "3"],
                                                obj=FakeContext(site(tmp_path), slurm))
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "job 7: completed during its grace period (exit 0) after 1 s; left alone",
        "job 9: still running at the deadline (3 s of grace) after 3 s; requeued",
    ]
    assert result.stderr.splitlines() == [
        "slurmx preempt: job 8: completed, not running: nothing to preempt",
        "slurmx preempt: note: job 9: the group spool of elsewhere-1 is not visible here; no intent file, the "
        "job's hook counts its own grace",
    ]


def test_command_status_under_slurmxs_own_runner(slurm: FakeSlurm, fast: FakeClock, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """`slurmx` runs its group with standalone_mode=False (slurmx.cli.app._run): a failed job must still mean status 1,
    with no line beyond the job's own."""
    from slurmx.cli.app import _run

    slurm.add(job(8, P))

    @click.group()
    @click.pass_context
    def group(ctx: click.Context) -> None:
        ctx.obj = FakeContext(site(tmp_path), slurm)

    group.add_command(preempt_command)
    monkeypatch.setattr("sys.argv", ["slurmx", "preempt", "8"])
    with pytest.raises(SystemExit) as info:
        _run(group, "slurmx")
    assert info.value.code == 1
    assert capsys.readouterr().err == "slurmx preempt: job 8: pending, not running: nothing to preempt\n"


@pytest.mark.parametrize(("args", "message"), [
    (["x"], "'x' is not a valid integer"),
    ([], "Missing argument 'JOB [JOB...]'"),
    (["7", "--grace", "soon"], "expected a duration like 90s"),
    (["7", "--signal", "NOPE"], "expected a signal name such as USR2, got 'NOPE'"),
])
def test_command_usage_errors(slurm: FakeSlurm, tmp_path: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(preempt_command, args, obj=FakeContext(site(tmp_path), slurm))
    assert result.exit_code == 2 and message in result.output


def test_command_turns_slurm_errors_into_one_line(tmp_path: Path) -> None:
    class Broken(FakeContext):
        def adapter(self) -> FakeSlurm:
            raise SlurmCommandError(["squeue", "--json"], 1, "squeue: error: Invalid user\nmore")

    result = CliRunner().invoke(preempt_command, ["7"], obj=Broken(site(tmp_path), FakeSlurm(FakeClock())))
    assert result.exit_code == 1
    assert result.output == "Error: squeue --json: exit 1: squeue: error: Invalid user more\n"


def test_command_reads_its_own_site_option(tmp_path: Path) -> None:
    """--site given to the command itself (or no slurmx group around it) loads that file."""
    path = tmp_path / "site.yaml"
    path.write_text("cluster: {name: t}\nresources: {cpu: {partition: cpu}}\npreemption: {signal: KILL}\n")
    result = CliRunner().invoke(preempt_command, ["7", "--site", str(path)])
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {path}: ")
    assert len(result.output.splitlines()) == 1


@pytest.mark.parametrize(("text", "seconds"), [("60", 60), ("2.5", 2.5), ("90s", 90), ("2m", 120), ("1:30", 90)])
def test_parse_grace(text: str, seconds: float) -> None:
    assert parse_grace(text) == seconds


def test_parse_grace_rejects_nonsense() -> None:
    with pytest.raises(click.BadParameter):
        parse_grace("-5")


def test_module_does_not_import_slurmx_cli_at_import_time() -> None:
    """slurmx.cli.app imports this command to register it: the command module never imports the group back."""
    code = ("import sys; import slurmx.cli.preempt; import slurmx.daemon.preemption; "
            "print('slurmx.cli.app' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True,
                         cwd=REPO)
    assert out.stdout.strip() == "False"
