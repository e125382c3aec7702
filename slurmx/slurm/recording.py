"""The adapter of a dry run: reads reach Slurm, every change is recorded as a typed value and never made.

A dry run (`slurmxd --dry-run`, `slurmxd --shadow`) drives the very enforcer and profiler the enforcing daemon
does; only its adapter is this one, so what it shows as "would do" is what the same code asked of Slurm, not a
second description of it kept beside the real path. A read (jobs, nodes, partitions, accounting, version, folder
owners, the transport for `sacctmgr show`) passes through to `inner`; a change (hold, release, requeue, signal,
cancel, update, submit, a folder made) is appended to `calls`. `files()` records the grace-intent files the
preemption protocol would write in a group's folder into the same list.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from slurmx.core.arrays import job_text
from slurmx.slurm.adapter import JobUpdate
from slurmx.slurm.errors import SlurmError
from slurmx.slurm.transport import Transport
from slurmx.slurm.wrappers import DelegatingSlurm

__all__ = ["Cancelled", "Change", "FileRemoved", "FileWritten", "FolderMade", "Held", "RecordedFiles",
           "RecordingSlurm", "Released", "Requeued", "Signalled", "Submitted", "Updated",
           "UpdatedEach"]


def _ids(job_ids: Iterable[int]) -> tuple[int, ...]:
    return tuple(int(j) for j in job_ids)


def _jobs(job_ids: Sequence[int]) -> str:
    return ("job " if len(job_ids) == 1 else "jobs ") + (",".join(job_text(j) for j in job_ids) or "none")


def _words(change: JobUpdate) -> str:
    """What `scontrol update` would be told: the assignments, and the node list the adapter sends on its own."""
    words = change.assignments() + ([f"ReqNodeList={change.nodelist}"] if change.nodelist is not None else [])
    return " ".join(words) or "nothing"


@dataclass(frozen=True, slots=True)
class Submitted:
    script: str
    options: tuple[str, ...]

    def what(self) -> str:
        return "submit a job with " + (" ".join(self.options) or "no options")


@dataclass(frozen=True, slots=True)
class Held:
    job_ids: tuple[int, ...]

    def what(self) -> str:
        return f"hold {_jobs(self.job_ids)}"


@dataclass(frozen=True, slots=True)
class Released:
    job_ids: tuple[int, ...]

    def what(self) -> str:
        return f"release {_jobs(self.job_ids)}"


@dataclass(frozen=True, slots=True)
class Requeued:
    job_ids: tuple[int, ...]
    hold: bool

    def what(self) -> str:
        return f"{'requeuehold' if self.hold else 'requeue'} {_jobs(self.job_ids)}"


@dataclass(frozen=True, slots=True)
class Signalled:
    job_ids: tuple[int, ...]
    signal: str
    batch_only: bool

    def what(self) -> str:
        return f"signal {_jobs(self.job_ids)} with {self.signal}" + (" (batch shell)" if self.batch_only else "")


@dataclass(frozen=True, slots=True)
class Cancelled:
    job_ids: tuple[int, ...]

    def what(self) -> str:
        return f"cancel {_jobs(self.job_ids)}"


@dataclass(frozen=True, slots=True)
class Updated:
    job_ids: tuple[int, ...]
    change: JobUpdate

    def what(self) -> str:
        return f"update {_jobs(self.job_ids)}: {_words(self.change)}"


@dataclass(frozen=True, slots=True)
class UpdatedEach:
    """One `update_each`: each job its own change, in one call."""

    changes: tuple[tuple[int, JobUpdate], ...]

    def what(self) -> str:
        return "update " + "; ".join(f"{_jobs([job_id])}: {_words(change)}" for job_id, change in self.changes)


@dataclass(frozen=True, slots=True)
class FolderMade:
    path: str
    files: tuple[str, ...]  # the names of the files written in it

    def what(self) -> str:
        return f"make the folder {self.path}" + (f" with {', '.join(self.files)}" if self.files else "")


@dataclass(frozen=True, slots=True)
class FileWritten:
    path: str
    text: str

    def what(self) -> str:
        return f"write {self.path}: {self.text.strip()}"


@dataclass(frozen=True, slots=True)
class FileRemoved:
    path: str

    def what(self) -> str:
        return f"remove {self.path}"


Change = Submitted | Held | Released | Requeued | Signalled | Cancelled | Updated | UpdatedEach | FolderMade | \
    FileWritten | FileRemoved


@dataclass
class RecordedFiles:
    """Where the preemption protocol writes and removes its intent files (`daemon.intent_files.IntentFiles`), in a dry
    run: each is recorded with the adapter's changes, none touches the folder."""

    calls: list[Change]

    def write(self, path: Path, text: str) -> None:
        self.calls.append(FileWritten(str(path), text))

    def remove(self, path: Path) -> None:
        self.calls.append(FileRemoved(str(path)))


@dataclass
class RecordingSlurm(DelegatingSlurm):
    """Reads pass to `inner`; each change lands in `calls`, in order, and `inner` never sees it. A call naming no
    job sends nothing to Slurm (`CliSlurm`) and is not recorded."""

    calls: list[Change] = field(default_factory=list)

    @property
    def transport(self) -> Transport | None:
        """The inner adapter's transport, for the reads that go around the adapter (`sacctmgr show qos`)."""
        transport: Transport | None = getattr(self.inner, "transport", None)
        return transport

    @property
    def fresh_records(self) -> bool:
        """Whether `inner` hands over records no one else holds (`CliSlurm.fresh_records`): the lease layer above
        then marks them in place, as it does over the adapter itself."""
        return getattr(self.inner, "fresh_records", False) is True

    def take(self) -> list[Change]:
        """The changes recorded since the last `take`, oldest first; the record starts empty again."""
        taken, self.calls[:] = list(self.calls), []
        return taken

    def files(self) -> RecordedFiles:
        return RecordedFiles(self.calls)

    def submit(self, script: str, options: Sequence[str]) -> int:
        """Recorded; no job exists, so the id is negative (the n-th submission of this dry run is -n)."""
        self.calls.append(Submitted(script, tuple(options)))
        return -sum(isinstance(c, Submitted) for c in self.calls)

    def hold(self, job_ids: Iterable[int]) -> None:
        if ids := _ids(job_ids):
            self.calls.append(Held(ids))

    def release(self, job_ids: Iterable[int]) -> None:
        if ids := _ids(job_ids):
            self.calls.append(Released(ids))

    def requeue(self, job_ids: Iterable[int], hold: bool = False) -> None:
        if ids := _ids(job_ids):
            self.calls.append(Requeued(ids, hold))

    def signal(self, job_ids: Iterable[int], signal: str, batch_only: bool = True) -> None:
        if ids := _ids(job_ids):
            self.calls.append(Signalled(ids, signal, batch_only))

    def cancel(self, job_ids: Iterable[int]) -> None:
        if ids := _ids(job_ids):
            self.calls.append(Cancelled(ids))

    def update(self, job_ids: Iterable[int], change: JobUpdate) -> None:
        if ids := _ids(job_ids):
            self.calls.append(Updated(ids, change))

    def update_each(self, changes: Sequence[tuple[int, JobUpdate]]) -> dict[int, SlurmError]:
        """Recorded as one call; none refused (Slurm never saw them)."""
        if changes:
            self.calls.append(UpdatedEach(tuple((int(job_id), change) for job_id, change in changes)))
        return {}

    def make_private_folder(self, path: str, files: Mapping[str, str]) -> None:
        self.calls.append(FolderMade(path, tuple(files)))
