"""The preemption protocol (ARCHITECTURE.md, "Preemption protocol"), written once for slurmxd and `slurmx preempt`.

1. `begin`: write the intent file `<group spool>/preempt-<jobid>` (grace, deadline, t0) atomically and durably,
   *then* signal the batch shell. The job's hook reads the deadline from that file, so job and daemon agree on
   when the requeue comes; and a daemon that restarts mid-grace finds where it was (`read_intent`). The folder
   is the job user's: an intent that cannot be written there (a directory planted at its name, a full disk)
   never spares the job. It is signalled all the same, its hook counts its own grace, the caller keeps the
   deadline (slurmxd in its store) and the ticket says why (`intent_error`).
2. `settle`: a pure decision from one squeue snapshot — wait; leave alone (the job finished during grace);
   requeue now (the job left with the requeue exit code: no point idling until the deadline); requeue at the
   deadline (a job that ignores the signal goes all the same); or done (Slurm already shows it requeued).
3. `enforce`: `scontrol requeue`, or `requeuehold` then (optionally) `release` so the caller decides when the job
   returns. Never twice: Slurm happily requeues a pending job again and counts one more restart, so a requeue is
   only sent while the restart count is the one seen at `begin` and the ticket has not recorded a requeue.

Nothing here blocks except `preempt_many` / `preempt_and_wait`, the loop the admin command runs; the daemon
instead calls `advance` once per tick for each open ticket with the snapshot it already has.
"""

from __future__ import annotations

import math
import os
import re
import signal as signals
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import NamedTuple

from slurmx.core.arrays import job_text, task_key
from slurmx.core.config import SiteConfig
from slurmx.core.model import VariantState
from slurmx.core.spool import group_spool
from slurmx.core.userfiles import check_private_folder, read_user_file
from slurmx.daemon.intent_files import LOCAL_FILES, IntentFiles
from slurmx.slurm import SlurmAdapter, SlurmError
from slurmx.slurm.errors import InvalidJobError
from slurmx.slurm.records import SlurmJob

__all__ = [
    "Advanced",
    "Decision",
    "Ending",
    "PreemptionError",
    "PreemptionTicket",
    "Settlement",
    "advance",
    "begin",
    "close",
    "enforce",
    "group_spool_dir",
    "intent_line",
    "intent_path",
    "preempt_and_wait",
    "preempt_many",
    "read_intent",
    "settle",
]

REQUEUE_MODES = ("requeue", "requeuehold")
# How long past the deadline a job may stay COMPLETING before the blocking loop gives up on it.
SETTLE_TIMEOUT_S = 120.0
_FIELD = re.compile(r"(?:^|\s)([a-z_]+)=(\S*)")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class PreemptionError(Exception):
    """This job cannot be preempted (not running, gone, a bad grace); one line naming the job."""


class Settlement(StrEnum):
    """What to do about a signalled job, as `settle` sees it."""

    WAIT = "wait"  # still in its grace period
    FINISHED = "finished"  # ended on its own during grace (completed, or failed for its own reasons): leave alone
    REQUEUE_BY_JOB = "requeue-by-job"  # left with the requeue exit code: requeue it now
    REQUEUE_AT_DEADLINE = "requeue-at-deadline"  # still running at the deadline: requeue it anyway
    ALREADY_REQUEUED = "already-requeued"  # Slurm shows it back in the queue: nothing left to do
    GONE = "gone"  # squeue no longer knows it: nothing can be done

    @property
    def requeues(self) -> bool:
        return self in (Settlement.REQUEUE_BY_JOB, Settlement.REQUEUE_AT_DEADLINE)

    @property
    def done(self) -> bool:
        """The protocol is over for this job once the action (if any) is carried out."""
        return self is not Settlement.WAIT


@dataclass(frozen=True, slots=True)
class Decision:
    action: Settlement
    why: str  # one line, for logs and the admin command


@dataclass(frozen=True, slots=True)
class PreemptionTicket:
    """One preemption in flight: everything `settle` needs, as recorded (durably) by `begin`."""

    job_id: int
    signal: str
    grace_s: float
    t0: float  # when the signal was sent (epoch seconds)
    deadline: float  # t0 + grace, rounded up to a whole second: the job gets at least its grace
    restart_count: int  # Slurm's restart count at `begin`: a higher one means the job was requeued since
    requeue_exit_code: int = 99
    reason: str = ""
    intent: Path | None = None  # the intent file, removed by `close`
    requeued_at: float | None = None  # set by `enforce`, so a stale snapshot can never requeue twice
    intent_error: str | None = None  # why the intent file could not be written (the job was signalled anyway)

    def remaining(self, now: float) -> float:
        return self.deadline - now


class Advanced(NamedTuple):
    """What `advance` did: the ticket after it, and the decision it acted on."""

    ticket: PreemptionTicket
    decision: Decision


@dataclass(frozen=True, slots=True)
class Ending:
    """How one job's preemption ended, for the admin command (one line each)."""

    job_id: int
    action: Settlement | None  # None: the preemption never started (see `error`)
    requeued: bool  # this preemption sent the requeue
    held: bool  # ... as `requeuehold`, left held
    waited_s: float  # from the signal to the decision
    why: str
    error: str | None = None
    note: str | None = None  # e.g. the intent file could not be written: the job's hook counted its own grace

    def line(self) -> str:
        if self.error is not None:
            return f"job {self.job_id}: {self.error}"
        what = "requeued"
        if self.requeued and self.held:
            what = "requeued and held (release it with `scontrol release`)"
        verdict = what if self.requeued else "left alone"
        if self.action is Settlement.ALREADY_REQUEUED:
            verdict = "nothing to do"
        return f"job {self.job_id}: {self.why} after {self.waited_s:.0f} s; {verdict}"


# ------------------------------------------------------------------------------------------------ intent file


def intent_path(spool_dir: str | os.PathLike[str], job_id: int) -> Path:
    """Where the job's hook looks for the daemon's intent: `$SLURMX_SPOOL_DIR/preempt-$SLURM_JOB_ID`, or
    `preempt-<A>_<i>` for task i of job array A (`core/arrays.py`: the hook names an array task's files so)."""
    return Path(spool_dir) / f"preempt-{job_text(int(job_id))}"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.3f}"


def intent_line(ticket: PreemptionTicket) -> str:
    """`preempt grace=<s> deadline=<epoch> t0=<epoch> signal=<SIG> restarts=<n> reason=<text>`.

    The hooks (`slurmx.hooks._env.parse_intent`, hook.sh) read `deadline=` (else `grace=`) from what precedes
    ` reason=`; the other fields are for `read_intent`. The reason is free text, so it comes last, on one line.
    """
    reason = " ".join(ticket.reason.split()) or "-"
    return (f"preempt grace={_number(ticket.grace_s)} deadline={_number(ticket.deadline)} t0={ticket.t0:.3f} "
            f"signal={ticket.signal} restarts={ticket.restart_count} reason={reason}\n")


def read_intent(path: str | os.PathLike[str], requeue_exit_code: int = 99) -> PreemptionTicket:
    """The ticket an intent file records (how a restarted daemon resumes a preemption in flight).

    Raises PreemptionError when the file is missing or not an intent written by `begin`.
    """
    file = Path(path)
    match = re.fullmatch(r"preempt-([0-9]{1,18})(?:_([0-9]{1,7}))?", file.name)
    if match is None:
        raise PreemptionError(f"{file}: not an intent file (expected preempt-<jobid>)")
    try:  # the folder is the job user's: no link, FIFO or huge file is followed (`userfiles`)
        line = read_user_file(file, max_bytes=4096).decode("utf-8", errors="replace").splitlines()[0]
    except (OSError, IndexError) as exc:
        raise PreemptionError(f"{file}: cannot read the intent: {exc or 'empty file'}") from None
    head, _, reason = line.partition(" reason=")
    fields = dict(_FIELD.findall(head))
    try:
        grace, deadline = float(fields["grace"]), float(fields["deadline"])
        t0 = float(fields.get("t0", deadline - grace))
        restarts = int(fields.get("restarts", "0"))
    except (KeyError, ValueError):
        raise PreemptionError(f"{file}: expected `preempt grace=<s> deadline=<epoch> ...`, got {line[:80]!r}") \
            from None
    if not head.startswith("preempt"):
        raise PreemptionError(f"{file}: expected a line starting with `preempt`, got {line[:80]!r}")
    try:
        job_id = int(match[1]) if match[2] is None else task_key(int(match[1]), int(match[2]))
    except ValueError as exc:
        raise PreemptionError(f"{file}: {exc}") from None
    return PreemptionTicket(job_id, fields.get("signal", "USR2"), grace, t0, deadline, restarts,
                            requeue_exit_code, "" if reason == "-" else reason, file)


def close(ticket: PreemptionTicket, files: IntentFiles = LOCAL_FILES) -> None:
    """Remove the intent file once the protocol is over, so a later signal (e.g. Slurm's own time-limit warning)
    is not read against a stale deadline. Best effort: a missing file is fine (closing twice is harmless), and
    whatever the job's user put there since (a directory, a file that cannot be removed) is left, never raised."""
    if ticket.intent is not None:
        files.remove(ticket.intent)


# ------------------------------------------------------------------------------------------------ the protocol


def begin(adapter: SlurmAdapter, job_id: int, grace_s: float, *, signal: str = "USR2",
          spool_dir: str | os.PathLike[str] | None = None, reason: str = "", requeue_exit_code: int = 99,
          now: float | None = None, job: SlurmJob | None = None,
          files: IntentFiles = LOCAL_FILES) -> PreemptionTicket:
    """Record the intent, then send the grace signal to the batch shell; returns the ticket to settle.

    `job` is a fresh snapshot if the caller has one (else squeue is asked). `spool_dir` is the job's group spool
    folder (None: no intent file; the job's hook then falls back to its own SLURMX_GRACE_S). An intent file that
    cannot be written there is no reason to spare the job (its user controls the folder): it is signalled all the
    same, without the file, and the ticket's `intent_error` says why. Raises PreemptionError when the job is not
    running or ended before the signal.
    """
    if grace_s < 0 or not math.isfinite(grace_s):
        raise PreemptionError(f"job {job_id}: grace must be a non-negative number of seconds, got {grace_s!r}")
    if job is None:
        found = adapter.jobs([job_id])
        job = found[0] if found else None
    if job is None:
        raise PreemptionError(f"job {job_id}: not in squeue (finished long ago, or never existed)")
    if job.state is not VariantState.RUNNING:
        raise PreemptionError(f"job {job_id}: {job.state.value}, not running: nothing to preempt")
    t0 = time.time() if now is None else now
    sig = signal.strip().upper().removeprefix("SIG")
    ticket = PreemptionTicket(int(job_id), sig, float(grace_s), t0, float(math.ceil(t0 + grace_s)),
                              job.restart_count, requeue_exit_code, " ".join(reason.split()),
                              intent_path(spool_dir, job_id) if spool_dir is not None else None)
    if ticket.intent is not None:
        try:
            files.write(ticket.intent, intent_line(ticket))
        except OSError as exc:
            ticket = replace(ticket, intent=None, intent_error=(
                f"the intent file {ticket.intent} could not be written ({exc.strerror or exc}); signalled "
                "anyway, its hook counts its own grace"))
    try:
        adapter.signal([job_id], sig, batch_only=True)
    except InvalidJobError:
        close(ticket, files)
        raise PreemptionError(f"job {job_id}: ended before the signal reached it; left alone") from None
    except SlurmError:
        close(ticket, files)
        raise
    return ticket


def settle(ticket: PreemptionTicket, job: SlurmJob | None, now: float) -> Decision:
    """What to do about a signalled job, given its latest squeue snapshot (None: squeue does not show it).

    Pure: no Slurm call, no clock; the order of the checks is the protocol.
    """
    if ticket.requeued_at is not None:
        return Decision(Settlement.ALREADY_REQUEUED, "requeued by this preemption")
    if job is None:
        return Decision(Settlement.GONE, "no longer in squeue")
    if job.restart_count > ticket.restart_count:
        # Checked before the state: right after a requeue Slurm shows the new count with the old state.
        if job.exit_code == ticket.requeue_exit_code:  # the previous run's code: it checkpointed and exited
            return Decision(Settlement.ALREADY_REQUEUED, f"checkpointed and exited {job.exit_code}; Slurm requeued it "
                            f"(RequeueExit, restart {job.restart_count})")
        return Decision(Settlement.ALREADY_REQUEUED, f"already requeued (restart {job.restart_count})")
    state = job.state
    if state in (VariantState.PENDING, VariantState.HELD, VariantState.REQUEUED):
        return Decision(Settlement.ALREADY_REQUEUED, f"back in the queue ({job.state_text or state.value})")
    code = "no exit code" if job.exit_code is None else f"exit {job.exit_code}"
    if state.is_finished:
        if state is not VariantState.CANCELLED and job.exit_code is not None:
            if job.exit_code == ticket.requeue_exit_code:
                return Decision(Settlement.REQUEUE_BY_JOB, f"checkpointed and exited for requeue ({code})")
            if job.exit_code == 128 + _signal_number(ticket.signal):
                # The payload got the signal without handling it (bash reports that as 128 + N): it was
                # preempted, not finished, so it goes back to the queue.
                return Decision(Settlement.REQUEUE_BY_JOB, f"died of the grace signal ({code})")
        if state is VariantState.COMPLETED:
            return Decision(Settlement.FINISHED, f"completed during its grace period ({code})")
        return Decision(Settlement.FINISHED, f"ended {job.state_text or state.value} during its grace period ({code})")
    if state is VariantState.COMPLETING:
        return Decision(Settlement.WAIT, "completing")
    if now >= ticket.deadline:
        return Decision(Settlement.REQUEUE_AT_DEADLINE,
                        f"still {state.value} at the deadline ({_number(ticket.grace_s)} s of grace)")
    return Decision(Settlement.WAIT, f"{state.value}, {ticket.remaining(now):.0f} s of grace left")


def enforce(adapter: SlurmAdapter, ticket: PreemptionTicket, *, mode: str = "requeue",
            release: bool = True, now: float | None = None, files: IntentFiles = LOCAL_FILES) -> PreemptionTicket:
    """Requeue the job (`requeue`, or `requeuehold` and then `release` unless `release=False`); returns the ticket
    marked requeued and closes it. A ticket already marked requeued is returned unchanged: no second requeue.

    `scontrol requeue` is not retried by the adapter; if it fails, squeue decides: a job that shows a higher
    restart count was requeued after all (the answer was lost), anything else re-raises.
    """
    if mode not in REQUEUE_MODES:
        raise ValueError(f"mode must be one of {', '.join(REQUEUE_MODES)}, got {mode!r}")
    if ticket.requeued_at is not None:
        return ticket
    hold = mode == "requeuehold"
    try:
        adapter.requeue([ticket.job_id], hold=hold)
    except SlurmError:
        found = adapter.jobs([ticket.job_id])
        if not (found and found[0].restart_count > ticket.restart_count):
            raise
    if hold and release:
        adapter.release([ticket.job_id])
    close(ticket, files)
    return replace(ticket, requeued_at=time.time() if now is None else now)


def advance(adapter: SlurmAdapter, ticket: PreemptionTicket, job: SlurmJob | None, now: float, *,
            mode: str = "requeue", release: bool = True, files: IntentFiles = LOCAL_FILES) -> Advanced:
    """One tick of the protocol for one job: settle on the snapshot, requeue if that is the decision, close the
    ticket when it is over. What the daemon calls each round for every open ticket."""
    decision = settle(ticket, job, now)
    if decision.action.requeues:
        ticket = enforce(adapter, ticket, mode=mode, release=release, now=now, files=files)
    elif decision.action.done:
        close(ticket, files)
    return Advanced(ticket, decision)


# ------------------------------------------------------------------------------------------------ blocking form


def preempt_many(adapter: SlurmAdapter, job_ids: Sequence[int], grace_s: float, *, signal: str = "USR2",
                 spool_for: Callable[[SlurmJob], Path | None] | None = None, reason: str = "",
                 requeue_exit_code: int = 99, mode: str = "requeue", release: bool = True, poll: float = 1.0,
                 on_outcome: Callable[[Ending], None] | None = None,
                 clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep,
                 grace_for: Callable[[SlurmJob], float] | None = None) -> list[Ending]:
    """Preempt several jobs at once and wait until each is requeued or left alone; one Ending per job, in order.

    All jobs are signalled first, then one squeue per poll serves them all; the sleep is cut short at the next
    deadline so a job is requeued on time, not up to `poll` late. Per-job failures become Outcomes with `error`
    set; `on_outcome` sees each Ending as soon as it is known. `grace_for` gives a job its own grace period
    (what slurmxd grants it); `grace_s` then serves only a job squeue no longer shows.
    """
    if mode not in REQUEUE_MODES:
        raise ValueError(f"mode must be one of {', '.join(REQUEUE_MODES)}, got {mode!r}")
    ids = list(dict.fromkeys(int(j) for j in job_ids))
    outcomes: dict[int, Ending] = {}

    def finish(outcome: Ending) -> None:
        outcomes[outcome.job_id] = outcome
        if on_outcome is not None:
            on_outcome(outcome)

    snapshot = _by_id(adapter.jobs(ids))
    open_tickets: dict[int, PreemptionTicket] = {}
    for job_id in ids:
        job = snapshot.get(job_id)
        try:
            running = job is not None and job.state is VariantState.RUNNING
            spool = spool_for(job) if (spool_for is not None and job is not None and running) else None
            grace = grace_for(job) if grace_for is not None and job is not None else grace_s
            open_tickets[job_id] = begin(adapter, job_id, grace, signal=signal, spool_dir=spool, reason=reason,
                                         requeue_exit_code=requeue_exit_code, now=clock(), job=job)
        except (PreemptionError, SlurmError) as exc:
            finish(Ending(job_id, None, False, False, 0.0, "", error=_text(exc, job_id)))
    while open_tickets:
        now = clock()
        next_deadline = min(t.deadline for t in open_tickets.values())
        snapshot = _by_id(adapter.jobs(list(open_tickets)))
        for job_id, ticket in list(open_tickets.items()):
            try:
                step = advance(adapter, ticket, snapshot.get(job_id), now, mode=mode, release=release)
            except SlurmError as exc:
                del open_tickets[job_id]
                finish(Ending(job_id, None, False, False, now - ticket.t0, "", error=_text(exc, job_id),
                               note=ticket.intent_error))
                continue
            if step.decision.action.done:
                del open_tickets[job_id]
                finish(Ending(job_id, step.decision.action, step.ticket.requeued_at is not None,
                               step.ticket.requeued_at is not None and mode == "requeuehold" and not release,
                               now - ticket.t0, step.decision.why, note=ticket.intent_error))
            elif now - ticket.deadline > SETTLE_TIMEOUT_S:
                del open_tickets[job_id]
                close(ticket)
                finish(Ending(job_id, None, False, False, now - ticket.t0, "",
                               error=f"still {step.decision.why} {SETTLE_TIMEOUT_S:.0f} s after the deadline; "
                                     "not requeued", note=ticket.intent_error))
        if open_tickets:
            until_deadline = next_deadline - clock()
            sleep(max(0.05, min(poll, until_deadline)) if until_deadline > 0 else poll)
    return [outcomes[j] for j in ids]


def preempt_and_wait(adapter: SlurmAdapter, job_id: int, grace_s: float, *, signal: str = "USR2",
                     spool_dir: str | os.PathLike[str] | None = None, reason: str = "", requeue_exit_code: int = 99,
                     mode: str = "requeue", release: bool = True, poll: float = 1.0,
                     clock: Callable[[], float] = time.time,
                     sleep: Callable[[float], None] = time.sleep) -> Ending:
    """Preempt one job and block until it is requeued or left alone (see `preempt_many`)."""
    spool = Path(spool_dir) if spool_dir is not None else None
    [outcome] = preempt_many(adapter, [job_id], grace_s, signal=signal, spool_for=lambda _job: spool,
                             reason=reason, requeue_exit_code=requeue_exit_code, mode=mode, release=release,
                             poll=poll, clock=clock, sleep=sleep)
    return outcome


def group_spool_dir(site: SiteConfig, job: SlurmJob) -> Path | None:
    """The group spool folder (`SLURMX_SPOOL_DIR` inside the job) of a job slurmx submitted, from its comment
    tag, if that folder exists here and is the job's user's alone; None for other jobs, or when this host does
    not see the shared spool.

    Never created here: `slurmx submit` creates it as its user. The tag is user-controlled: a group name that is
    not a plain file name is ignored, and a folder that is a link, another user's or writable by others (a plant)
    is never written to: the job's hook then falls back to its own grace period.
    """
    group = job.slurmx_tags.get("g", "")
    if not _SAFE_NAME.match(group):
        return None
    folder = Path(group_spool(site, group))
    try:
        os.close(check_private_folder(folder, job.user_id))
    except OSError:
        return None
    return folder


def _signal_number(name: str) -> int:
    """`USR2` -> 12; a number as it is; -1000 for a name this platform does not know (matches no exit code)."""
    if name.isdigit():
        return int(name)
    try:
        return int(signals.Signals[f"SIG{name.upper().removeprefix('SIG')}"])
    except KeyError:
        return -1000


def _by_id(jobs: Iterable[SlurmJob]) -> Mapping[int, SlurmJob]:
    return {j.job_id: j for j in jobs}


def _text(exc: Exception, job_id: int) -> str:
    text = " ".join(str(exc).split())
    prefix = f"job {job_id}: "
    return text.removeprefix(prefix)
