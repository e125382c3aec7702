"""`slurmx status` and `slurmx cancel` of an array group (issue 32): `g` is every index, `g[i]` one index.

Each index i of the kind arrays tagged g is group g[i], owned by the owner of the folder `<spool>/g`; another
user's array carrying the tag is never listed nor cancelled as the group's.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurmx.core.arrays import index_group, task_key
from slurmx.core.model import GroupState, VariantState
from slurmx.core.ownership import FolderOwner, local_folder_owners
from slurmx.slurm.records import SlurmJob
from slurmx.submit.groups import cancel_array, cancel_group, find_group, find_groups
from tests.unit.test_profile_daemon import variant_job

CPU, GPU, BOBS = 80, 95, 77


def task(array_job_id: int, index: int, kind: str, state: VariantState = VariantState.PENDING,
         uid: int | None = None) -> SlurmJob:
    job = variant_job(task_key(array_job_id, index), "g", kind, "")
    return replace(job, state=state, array_job_id=array_job_id, array_task_id=index,
                   user_id=os.getuid() if uid is None else uid, held=False, reason="BeginTime")


class ArraySlurm:
    """squeue and sacct answers, folder owners read on this host, and what was cancelled."""

    def __init__(self, jobs: Iterable[SlurmJob], history: Iterable[SlurmJob] = ()) -> None:
        self.table, self.history = list(jobs), list(history)
        self.cancelled: list[int] = []
        self.accounting_reads = 0

    def jobs(self, job_ids: Iterable[int] | None = None, user: str | None = None) -> list[SlurmJob]:
        return [j for j in self.table if user is None or j.user == user]

    def accounting(self, since: str = "") -> list[SlurmJob]:
        self.accounting_reads += 1
        return self.history

    def folder_owners(self, paths: Sequence[str]) -> dict[str, FolderOwner | None]:
        return local_folder_owners(paths)

    def cancel(self, job_ids: Iterable[int]) -> None:
        self.cancelled += list(job_ids)


def _cluster(tmp_path: Path) -> ArraySlurm:
    (tmp_path / "g").mkdir(mode=0o700)
    live = [*(task(CPU, i, "cpu") for i in range(1, 4)), *(task(GPU, i, "gpu") for i in range(1, 4)),
            task(BOBS, 3, "gpu", uid=os.getuid() + 1)]  # another user's array with the tag
    live[1] = replace(live[1], state=VariantState.RUNNING)  # cpu index 2 runs
    done = [task(CPU, 0, "cpu", VariantState.COMPLETED), task(GPU, 0, "gpu", VariantState.CANCELLED)]
    return ArraySlurm(live, done)


def test_status_of_an_array_lists_each_index_from_squeue_then_accounting(tmp_path: Path) -> None:
    slurm = _cluster(tmp_path)
    groups = find_groups(slurm, "g", spool_dir=str(tmp_path))  # type: ignore[arg-type]
    assert [g.group_id for g in groups] == [index_group("g", i) for i in range(4)]
    assert [g.state for g in groups] == [GroupState.COMPLETED, GroupState.PENDING, GroupState.RUNNING,
                                         GroupState.PENDING]
    assert [v.job_id for v in groups[3].variants] == [task_key(CPU, 3), task_key(GPU, 3)]
    assert groups[3].foreign == (task_key(BOBS, 3),) and all(g.valid for g in groups)


def test_one_index_is_found_alone_and_its_cancel_names_that_index_alone(tmp_path: Path) -> None:
    slurm = _cluster(tmp_path)
    [group] = find_groups(slurm, "g[3]", spool_dir=str(tmp_path))  # type: ignore[arg-type]
    assert slurm.accounting_reads == 0  # squeue knew it
    assert find_group(slurm, "g[3]", spool_dir=str(tmp_path)) == group  # type: ignore[arg-type]
    assert cancel_group(slurm, group) == [task_key(CPU, 3), task_key(GPU, 3)]  # type: ignore[arg-type]
    assert find_groups(slurm, "g[9]", spool_dir=str(tmp_path)) == []  # type: ignore[arg-type]


def test_cancelling_the_array_cancels_the_owners_kind_arrays_whole_and_nobody_elses(tmp_path: Path) -> None:
    slurm = _cluster(tmp_path)
    groups = find_groups(slurm, "g", spool_dir=str(tmp_path))  # type: ignore[arg-type]
    assert cancel_array(slurm, groups) == [CPU, GPU] == slurm.cancelled  # type: ignore[arg-type]


def test_a_plain_group_named_like_an_arrays_index_stays_its_own(tmp_path: Path) -> None:
    slurm = _cluster(tmp_path)
    (tmp_path / "g_3").mkdir(mode=0o700)
    slurm.table.append(variant_job(12, "g_3", "cpu", ""))
    [plain] = find_groups(slurm, "g_3", spool_dir=str(tmp_path))  # type: ignore[arg-type]
    assert [v.job_id for v in plain.variants] == [12]
    assert len(find_groups(slurm, "g", spool_dir=str(tmp_path))) == 4  # type: ignore[arg-type]


def test_the_cli_cancels_an_array_by_its_kind_arrays_and_shows_tasks_as_a_i(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from slurmx.cli import app as cli_module

    slurm = _cluster(tmp_path)
    monkeypatch.setattr(cli_module.Context, "adapter", lambda self: slurm)
    monkeypatch.setattr(cli_module.Context, "site", lambda self: _Site(str(tmp_path)))
    monkeypatch.setattr(cli_module, "_daemon_decisions", lambda site: {})
    runner = CliRunner()
    shown = runner.invoke(cli_module.cli, ["status", "g[3]", "--json"])
    assert shown.exit_code == 0, shown.output
    assert '"job_id": "80_3"' in shown.output and '"job_id": "95_3"' in shown.output
    done = runner.invoke(cli_module.cli, ["cancel", "g"])
    assert done.exit_code == 0, done.output
    assert done.output.strip() == "Cancelled group g: jobs 80, 95" and slurm.cancelled == [CPU, GPU]


class _Submit:
    def __init__(self, spool_dir: str) -> None:
        self.spool_dir = spool_dir


class _Site:
    def __init__(self, spool_dir: str) -> None:
        self.submit = _Submit(spool_dir)
