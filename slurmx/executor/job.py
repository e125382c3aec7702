"""`Job`: one submitted function call, read back from its group folder and from Slurm.

A Job holds ids, never state: every question reads the outcome file or asks Slurm afresh, so a Job rebuilt from
its group id in another process (`Job.attach`) knows everything the submitting one did. What it reads back (the
outcome, which is a pickle, and the outputs) must be the caller's own: see `payload.read_outcome`.
"""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import threading
import time
import warnings
from collections.abc import Generator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from slurmx.core.arrays import index_of, job_text
from slurmx.core.config import SiteConfig, load_site_config
from slurmx.core.model import GroupState
from slurmx.core.spool import group_spool
from slurmx.core.userfiles import UntrustedFile, read_own_file
from slurmx.executor.jobside import outcome_name, output_name
from slurmx.executor.payload import caller_uid, read_outcome, read_own_output, task_folder
from slurmx.slurm import SlurmAdapter, adapter_from_config
from slurmx.submit.groups import GroupStatus, cancel_group, find_group, list_groups

__all__ = ["Job", "JobAPI", "JobError", "JobPaths", "RemoteTraceback", "job_state", "outcome_exception",
           "raise_outcome", "ran_variant"]

OUTPUT_CAP = 16 << 20  # bytes of stdout / stderr returned (the last ones): a log, not a data channel
RECORD_CAP = 1 << 20  # an executor record is a few hundred bytes


class JobError(Exception):
    """The job ended without a result (cancelled, killed, timed out), or its exception did not pickle."""


class RemoteTraceback(Exception):
    """The traceback of the exception as it was raised in the job, attached as the re-raised exception's cause."""

    def __str__(self) -> str:
        return "\n" + str(self.args[0]) if self.args else ""


def job_state(status: GroupStatus | None, outcome: dict[str, Any] | None) -> str:
    """COMPLETED / FAILED as the outcome says once there is one (Slurm may still show the job completing), else
    the group's state in Slurm's words (PENDING, RUNNING, FAILED, CANCELLED), UNKNOWN when Slurm knows none. Pure."""
    if outcome is not None:
        return "COMPLETED" if outcome["ok"] else "FAILED"
    if status is None:
        return "UNKNOWN"
    if status.state is GroupState.COMPLETED:
        return "FAILED"  # the script completed but the call wrote nothing: it did not run to its end
    return status.state.value.upper()


def ran_variant(status: GroupStatus | None, outcome: dict[str, Any] | None) -> tuple[str, int] | None:
    """(kind, job id) of the variant that ran the call: the outcome says so, else the one Slurm shows running
    or ended other than cancelled. Pure."""
    if outcome is not None and outcome.get("variant") and str(outcome.get("job_id", "")).isdigit():
        return str(outcome["variant"]), int(outcome["job_id"])
    if status is None:
        return None
    if status.running is not None:
        return status.running.kind, status.running.job_id
    ended = [v for v in status.variants if v.state.is_finished and v.state.value != "cancelled"]
    return (ended[0].kind, ended[0].job_id) if ended else None


def _ended(status: GroupStatus) -> str:
    """`it ended failed (cpu job 12: timeout)`: the group's state and, when one ran, its variant's own."""
    ran = ran_variant(status, None)
    variant = next((v for v in status.variants if ran is not None and v.job_id == ran[1]), None)
    detail = f" ({variant.kind} job {variant.job_id}: {variant.state.value})" if variant is not None else ""
    return f"it ended {status.state.value}{detail}"


def outcome_exception(outcome: dict[str, Any]) -> Exception | None:
    """The exception of an outcome (its remote traceback as its cause), or None when the call returned. Pure: the
    exception is built, not raised, so a call that raised TimeoutError is told apart from a wait that timed out."""
    if outcome["ok"]:
        return None
    remote = RemoteTraceback(outcome.get("traceback", ""))
    exc: BaseException | None = None
    if outcome.get("exception") is not None:
        try:
            exc = pickle.loads(outcome["exception"])  # the user's own job wrote it
        except Exception:
            exc = None
    if not isinstance(exc, Exception):  # SystemExit or KeyboardInterrupt would end the caller, not report
        exc = JobError(f"the job raised {outcome.get('type', 'an exception')}: {outcome.get('message', '')}")
    exc.__cause__ = remote
    return exc


def raise_outcome(outcome: dict[str, Any]) -> Any:
    """The value of an outcome, or its exception raised with the remote traceback as its cause."""
    exc = outcome_exception(outcome)
    if exc is not None:
        raise exc
    return outcome["value"]


def checked_rank(rank: object) -> int:
    """`task(rank)`'s argument, or ValueError: a rank is an integer >= 0."""
    if not isinstance(rank, int) or rank < 0:
        raise ValueError(f"task({rank!r}): a task rank is an integer >= 0")
    return rank


class JobPaths(NamedTuple):
    """Where a job's files are (submitit's `job.paths`): its folder, the outcome pickle, and the call's stdout and
    stderr (of its last run; None before one started)."""

    folder: Path
    result_pickle: Path
    stdout: Path | None
    stderr: Path | None


class JobAPI:
    """What every kind of job answers on top of its `wait()` and `done()`: the same calls, the same meaning."""

    poll: float

    def outcome(self) -> dict[str, Any] | None:
        raise NotImplementedError

    def standing(self) -> tuple[bool, str]:
        """(whether the job ended, its state in words: `running`, `it ended failed (...)`), asked afresh."""
        raise NotImplementedError

    def label(self) -> str:
        """How messages name the job: `group g-1a2b3c`, `local job j`."""
        raise NotImplementedError

    def wait(self, timeout: float | None = None) -> dict[str, Any]:
        """Block until the call has an outcome; JobError when the job ended without one, TimeoutError after
        `timeout` s."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            outcome = self.outcome()
            if outcome is not None:
                return outcome
            ended, said = self.standing()
            if ended:
                outcome = self.outcome()  # written just before the job ended
                if outcome is not None:
                    return outcome
                raise JobError(f"{self.label()} has no result: {said} (see job.stderr())")
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"{self.label()} still {said} after {timeout:.0f} s")
            time.sleep(self.poll)

    def done(self) -> bool:
        raise NotImplementedError

    def result(self, timeout: float | None = None) -> Any:
        """The call's return value; its exception re-raised (the remote traceback as its cause)."""
        return raise_outcome(self.wait(timeout))

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The exception the call raised (waiting for it), whatever its type, or None when it returned; the
        JobError of a job that ended without a result. Raises TimeoutError only when the wait times out."""
        try:
            outcome = self.wait(timeout)
        except JobError as exc:
            return exc
        return outcome_exception(outcome)

    def results(self, timeout: float | None = None) -> list[Any]:
        """Every task's return value in rank order (one for a one-task call); the first exception re-raised."""
        first = self.wait(timeout)
        tasks = int(first.get("tasks", 1) or 1)
        return [raise_outcome(first)] + [self.task(rank).result(timeout) for rank in range(1, tasks)]

    def task(self, rank: int) -> Any:
        """Task `rank` of the call: a job that runs one task has task 0 alone."""
        if rank != 0:
            raise ValueError(f"task({rank!r}): this job runs one task (rank 0)")
        return self

    def __await__(self) -> Generator[Any, None, Any]:
        return self._result_async().__await__()

    async def _result_async(self) -> Any:
        while not await asyncio.to_thread(self.done):
            await asyncio.sleep(self.poll)
        return await asyncio.to_thread(self.result)


def _read_record(path: Path) -> dict[str, Any] | None:
    """The executor's record of a group (`Executor(folder=)`), or None when there is none to trust.

    A record the caller does not own alone (another user's file or folder, a link, a FIFO) is not an error to stop
    on: the job ids come from Slurm instead, and a warning names the path and why.
    """
    try:
        raw = read_own_file(path, max_bytes=RECORD_CAP)
        data = json.loads(raw) if raw is not None else None
    except (UntrustedFile, ValueError) as exc:
        warnings.warn(f"{exc if isinstance(exc, UntrustedFile) else f'{path}: not JSON'}: not using this record, "
                      "asking Slurm", stacklevel=3)
        return None
    return data if isinstance(data, dict) else None


class _Listings:
    """squeue's groups, one listing per adapter and spool kept for a short while (the jobs of one `map` share it)."""

    def __init__(self) -> None:
        self._kept: dict[tuple[int, str], tuple[float, dict[str, GroupStatus]]] = {}
        self._lock = threading.Lock()

    def get(self, adapter: SlurmAdapter, spool_dir: str, max_age: float) -> dict[str, GroupStatus]:
        key = (id(adapter), spool_dir)
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None and time.monotonic() - kept[0] < max_age:
                return kept[1]
        listing = {g.group_id: g for g in list_groups(adapter, spool_dir=spool_dir)}
        now = time.monotonic()
        with self._lock:
            self._kept = {k: v for k, v in self._kept.items() if now - v[0] < max_age}  # none outlives its use
            self._kept[key] = (now, listing)
        return listing


_LISTINGS = _Listings()


@dataclass
class Job(JobAPI):
    """A function call submitted as one group; `result()` waits for it."""

    group_id: str
    site: SiteConfig = field(repr=False)
    adapter: SlurmAdapter = field(repr=False)
    variants: tuple[tuple[str, int], ...] = ()
    max_result_bytes: int = 256 << 20
    poll: float = 2.0
    rank: int = 0  # the task of a multi-task call this job reads (`task(i)`); 0 is the call's own result
    _me: int | None = field(default=None, init=False, repr=False, compare=False)  # caller_uid(), asked once

    @classmethod
    def attach(cls, group_id: str, site: SiteConfig | str | Path | None = None, *,
               adapter: SlurmAdapter | None = None, folder: str | Path | None = None) -> Job:
        """The job of group `group_id`, from any process: from the executor's record in `folder` when there is
        one, else from Slurm (which keeps finished jobs in accounting)."""
        if site is None:
            site = os.environ.get("SLURMX_SITE", "/etc/slurmx/site.yaml")
        site_config = site if isinstance(site, SiteConfig) else load_site_config(site)
        slurm = adapter or adapter_from_config(site_config.transport)
        job = cls(group_id, site_config, slurm)
        data = _read_record(Path(folder) / f"{group_id}.json") if folder is not None else None
        if data is not None:
            job.variants = tuple((str(k), int(v)) for k, v in data.get("variants", []))
            job.max_result_bytes = int(data.get("max_result_bytes", job.max_result_bytes))
        else:
            status = job.status()
            if status is None:
                raise LookupError(f"Slurm knows no group {group_id}")
            job.variants = tuple((v.kind, v.job_id) for v in status.variants)
        return job

    # ---------------------------------------------------------------------------------------------- reading
    @property
    def folder(self) -> str:
        """The call's folder: the group's, or for task i of a function array (`g[i]`) the array's `task-i`."""
        found = index_of(self.group_id)
        if found is None:
            return group_spool(self.site, self.group_id)
        return str(task_folder(group_spool(self.site, found[0]), found[1]))

    @property
    def job_ids(self) -> list[int]:
        return [job_id for _, job_id in self.variants]

    def status(self) -> GroupStatus | None:
        """The group as squeue shows it, from one listing shared by this process's jobs for `poll / 2` seconds (so
        `as_completed` over 1,000 jobs of a `map` asks squeue once a round, not 1,000 times); accounting when
        squeue has forgotten it."""
        listing = _LISTINGS.get(self.adapter, self.site.submit.spool_dir, self.poll / 2)
        found = listing.get(self.group_id)
        if found is not None:
            return found
        return find_group(self.adapter, self.group_id, since="now-7days", spool_dir=self.site.submit.spool_dir)

    @property
    def me(self) -> int:
        """The uid the group folder and what is read from it must belong to: the caller's (`caller_uid`)."""
        if self._me is None:
            self._me = caller_uid(self.adapter)
        return self._me

    def outcome(self) -> dict[str, Any] | None:
        return read_outcome(self.folder, self.max_result_bytes, self.me, outcome_name(self.rank))

    def task(self, rank: int) -> Job:
        """Task `rank` of a multi-task call (`nodes=`, `tasks_per_node=`), as a job of its own: its result,
        exception and output."""
        return replace(self, rank=checked_rank(rank))

    @property
    def state(self) -> str:
        outcome = self.outcome()
        return job_state(None if outcome is not None else self.status(), outcome)

    @property
    def variant(self) -> str | None:
        """The resource kind that ran (or runs) the call; None while none has started."""
        ran = ran_variant(*self._both())
        return ran[0] if ran else None

    def done(self) -> bool:
        outcome = self.outcome()
        if outcome is not None:
            return True
        status = self.status()
        return status is None or status.finished

    @property
    def paths(self) -> JobPaths:
        folder = Path(self.folder)
        ran = ran_variant(*self._both())
        out, err = ((folder / output_name(job_text(ran[1]), self.rank, "out"),
                     folder / output_name(job_text(ran[1]), self.rank, "err"))
                    if ran is not None else (None, None))
        return JobPaths(folder, folder / outcome_name(self.rank), out, err)

    def stdout(self) -> str | None:
        """What the call printed (every run of it, across requeues; the last 16 MiB of more), or None before it
        started. NotYours when the group folder or the file is not the caller's alone."""
        return self._output("out")

    def stderr(self) -> str | None:
        return self._output("err")

    def _output(self, suffix: str) -> str | None:
        ran = ran_variant(*self._both())
        if ran is None:
            return None
        return read_own_output(Path(self.folder) / output_name(job_text(ran[1]), self.rank, suffix), OUTPUT_CAP,
                               self.me)

    def _both(self) -> tuple[GroupStatus | None, dict[str, Any] | None]:
        outcome = self.outcome()
        return (self.status() if outcome is None or not outcome.get("job_id") else None), outcome

    # ---------------------------------------------------------------------------------------------- waiting
    def standing(self) -> tuple[bool, str]:
        status = self.status()
        if status is None:
            return True, "Slurm knows none of its jobs"
        return (True, _ended(status)) if status.finished else (False, status.state.value)

    def label(self) -> str:
        return f"group {self.group_id}"

    def cancel(self) -> list[int]:
        status = self.status()
        return cancel_group(self.adapter, status) if status is not None else []
