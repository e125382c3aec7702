"""Group folders for tests that drive slurmxd over a fake or model Slurm.

A group belongs to the uid that owns its spool folder (slurmx/core/ownership.py), which `slurmx submit` creates as
the submitting user before its first sbatch. A test that puts jobs straight into a fake Slurm plays that part here:
`make_group_folders` creates the folder of each tagged group that has none, owned by the uid of the group's
earliest job, as a real submission would have left it. Tests of forgeries create the rightful owner's folder
first (`make_folder`), so a later job of another uid does not make it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from slurmx.core.tag import readable_fields

__all__ = ["SPOOL", "clear_spool", "make_folder", "make_group_folders"]

SPOOL = Path(tempfile.mkdtemp(prefix="slurmx-test-spool-"))
os.chmod(SPOOL, 0o1777)  # as a site's spool root: every user writes, the sticky bit keeps folders their owner's


class _Job(Protocol):
    @property
    def job_id(self) -> int: ...

    @property
    def user_id(self) -> int: ...

    @property
    def comment(self) -> str: ...


def make_folder(spool: Path, group_id: str, uid: int) -> Path:
    """`<spool>/<group>` owned by `uid`, mode 0700 (needs root for another uid than the test's own)."""
    folder = spool / group_id
    folder.mkdir(mode=0o700, exist_ok=True)
    if folder.stat().st_uid != uid:
        os.chown(folder, uid, -1)
    return folder


def make_group_folders(spool: Path, jobs: Iterable[_Job]) -> None:
    """The folder of each tagged group that has none, as its earliest job's submitter created it."""
    first: dict[str, _Job] = {}
    for job in jobs:
        group = readable_fields(job.comment).get("g", "") if job.comment.startswith("slurmx:") else ""
        if group and "/" not in group and group not in (".", "..") and \
                (group not in first or job.job_id < first[group].job_id):
            first[group] = job
    for group, job in first.items():
        if not (spool / group).exists():
            make_folder(spool, group, job.user_id)


def clear_spool(spool: Path = SPOOL) -> None:
    for entry in spool.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
