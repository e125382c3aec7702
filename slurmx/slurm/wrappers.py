"""Adapters that wrap another adapter: a base that forwards every call, and the counting one slurmxd uses (a dry
run's recording one is `recording.RecordingSlurm`).

They sit here, below everything that calls an adapter (the enforcer, the profiler, the lease layer), so a wrapper
is an adapter like any other and the layers above it only ever see `SlurmAdapter`. A wrapper overrides what it
changes and inherits the rest from `DelegatingSlurm`, so a method added to the adapter is forwarded in one place.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from slurmx.core.model import Node, Partition
from slurmx.core.ownership import FolderOwner
from slurmx.slurm.adapter import JobUpdate, SlurmAdapter
from slurmx.slurm.errors import SlurmError
from slurmx.slurm.records import AccountingRecord, SlurmJob

__all__ = ["CountingSlurm", "DelegatingSlurm"]


@dataclass
class DelegatingSlurm:
    """A `SlurmAdapter` passing every call to `inner` unchanged: the base of every wrapper."""

    inner: SlurmAdapter

    def version(self) -> str:
        return self.inner.version()

    def jobs(self, job_ids: Iterable[int] | None = None, user: str | None = None) -> list[SlurmJob]:
        return self.inner.jobs(job_ids, user)

    def nodes(self) -> list[Node]:
        return self.inner.nodes()

    def partitions(self, kinds: Mapping[str, str] | None = None) -> list[Partition]:
        return self.inner.partitions(kinds)

    def accounting(self, job_ids: Iterable[int] | None = None, since: str = "now-1day") -> list[AccountingRecord]:
        return self.inner.accounting(job_ids, since)

    def submit(self, script: str, options: Sequence[str]) -> int:
        return self.inner.submit(script, options)

    def hold(self, job_ids: Iterable[int]) -> None:
        self.inner.hold(job_ids)

    def release(self, job_ids: Iterable[int]) -> None:
        self.inner.release(job_ids)

    def requeue(self, job_ids: Iterable[int], hold: bool = False) -> None:
        self.inner.requeue(job_ids, hold)

    def signal(self, job_ids: Iterable[int], signal: str, batch_only: bool = True) -> None:
        self.inner.signal(job_ids, signal, batch_only)

    def cancel(self, job_ids: Iterable[int]) -> None:
        self.inner.cancel(job_ids)

    def update(self, job_ids: Iterable[int], change: JobUpdate) -> None:
        self.inner.update(job_ids, change)

    def update_each(self, changes: Sequence[tuple[int, JobUpdate]]) -> dict[int, SlurmError]:
        return self.inner.update_each(changes)

    def command_counts(self) -> Mapping[str, int]:
        return self.inner.command_counts()

    def make_private_folder(self, path: str, files: Mapping[str, str]) -> None:
        self.inner.make_private_folder(path, files)

    def folder_owners(self, paths: Sequence[str]) -> dict[str, FolderOwner | None]:
        return self.inner.folder_owners(paths)


@dataclass
class CountingSlurm(DelegatingSlurm):
    """Counts the calls that change Slurm (`changes`), so the daemon knows when its snapshot has aged."""

    changes: int = 0

    def submit(self, script: str, options: Sequence[str]) -> int:
        self.changes += 1
        return super().submit(script, options)

    def hold(self, job_ids: Iterable[int]) -> None:
        self.changes += 1
        super().hold(job_ids)

    def release(self, job_ids: Iterable[int]) -> None:
        self.changes += 1
        super().release(job_ids)

    def requeue(self, job_ids: Iterable[int], hold: bool = False) -> None:
        self.changes += 1
        super().requeue(job_ids, hold)

    def signal(self, job_ids: Iterable[int], signal: str, batch_only: bool = True) -> None:
        self.changes += 1
        super().signal(job_ids, signal, batch_only)

    def cancel(self, job_ids: Iterable[int]) -> None:
        self.changes += 1
        super().cancel(job_ids)

    def update(self, job_ids: Iterable[int], change: JobUpdate) -> None:
        self.changes += 1
        super().update(job_ids, change)

    def update_each(self, changes: Sequence[tuple[int, JobUpdate]]) -> dict[int, SlurmError]:
        self.changes += 1
        return super().update_each(changes)

    def renew(self, jobs: Iterable[SlurmJob], now: float, skip: Iterable[int] = ()) -> list[int]:
        """Renew due leases (`daemon.lease.LeasedSlurm`); a plain counting adapter holds no leases."""
        return []
