"""The dry run's adapter: reads reach Slurm, each change is recorded as a typed value and never reaches it."""

from __future__ import annotations

from pathlib import Path

from slurmx.core.arrays import task_key
from slurmx.slurm.adapter import JobUpdate
from slurmx.slurm.recording import (
    Cancelled,
    FileRemoved,
    FileWritten,
    FolderMade,
    Held,
    RecordingSlurm,
    Released,
    Requeued,
    Signalled,
    Submitted,
    Updated,
    UpdatedEach,
)
from tests.unit.test_daemon import FakeSlurm, job


def test_reads_pass_through_and_changes_are_recorded_in_order_never_made() -> None:
    inner = FakeSlurm([job(1, "a"), job(2, "a", "gpu")])
    slurm = RecordingSlurm(inner)  # type: ignore[arg-type]
    assert [j.job_id for j in slurm.jobs()] == [1, 2] and [n.name for n in slurm.nodes()] == ["c1", "g1"]
    slurm.update_each([(1, JobUpdate(nodelist="c1"))])
    slurm.release([1])
    slurm.hold([2])
    slurm.requeue([1], hold=True)
    slurm.signal([1], "USR2")
    slurm.cancel([2])
    slurm.update([1, 2], JobUpdate(cpus=2, mem_mb=700))
    slurm.make_private_folder("/spool/g", {"a.json": "{}"})
    assert slurm.submit("#!/bin/sh\n", ["--partition=cpu"]) == -1
    slurm.release([])  # names no job: CliSlurm sends nothing, so nothing is recorded
    slurm.update_each([])
    assert inner.calls == []  # nothing reached Slurm
    assert slurm.take() == [UpdatedEach(((1, JobUpdate(nodelist="c1")),)), Released((1,)), Held((2,)),
                            Requeued((1,), True), Signalled((1,), "USR2", True), Cancelled((2,)),
                            Updated((1, 2), JobUpdate(cpus=2, mem_mb=700)), FolderMade("/spool/g", ("a.json",)),
                            Submitted("#!/bin/sh\n", ("--partition=cpu",))]
    assert slurm.take() == []


def test_each_change_reads_as_the_command_it_stands_for() -> None:
    slurm = RecordingSlurm(FakeSlurm([]))  # type: ignore[arg-type]
    slurm.update([task_key(7, 3)], JobUpdate(cpus=2, mem_mb=700))
    slurm.update_each([(1, JobUpdate(nodelist="c1")), (2, JobUpdate(nodelist=""))])
    slurm.release([1, 2])
    slurm.requeue([5], hold=True)
    files = slurm.files()
    files.write(Path("/spool/g/preempt-5"), "preempt grace=10 deadline=1010\n")
    files.remove(Path("/spool/g/preempt-5"))
    assert [c.what() for c in slurm.calls] == [
        "update job 7_3: NumCPUs=2 MinMemoryNode=700", "update job 1: ReqNodeList=c1; job 2: ReqNodeList=",
        "release jobs 1,2", "requeuehold job 5",
        "write /spool/g/preempt-5: preempt grace=10 deadline=1010", "remove /spool/g/preempt-5"]
    assert isinstance(slurm.calls[4], FileWritten) and isinstance(slurm.calls[5], FileRemoved)


def test_the_lease_layer_above_sees_whether_the_records_are_fresh() -> None:
    class Fresh(FakeSlurm):
        fresh_records = True

    assert RecordingSlurm(Fresh([])).fresh_records is True  # type: ignore[arg-type]
    assert RecordingSlurm(FakeSlurm([])).fresh_records is False  # type: ignore[arg-type]
