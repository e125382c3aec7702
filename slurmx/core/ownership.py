"""Whose group is it: the one rule every reader of a group asks (slurmxd, `status`, `cancel`, `--dependency`, the
executor).

A comment is anyone's to write, and a job id says only when a job was submitted: bob can rewrite the comment of an
older job of his to carry alice's group tag. What a user cannot forge is the owner of a folder: `slurmx submit`
creates `<spool>/<group>` as the submitting user before the first sbatch, in a root-owned sticky spool root where
no one else can remove or replace it. So a group belongs to the uid that owns its folder; its jobs are that uid's
jobs carrying its tag, and a job of any other uid carrying it is foreign: set aside and reported, never counted.
A group whose folder is missing, or is not a plain folder (a link, a file), has no owner anyone can verify: none
of its jobs is counted.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from slurmx.core.arrays import folder_group
from slurmx.core.spool import spool_path

__all__ = ["FolderOwner", "OwnerLookup", "SpoolOwners", "folder_owner", "local_folder_owners", "members"]


@dataclass(frozen=True, slots=True)
class FolderOwner:
    """The owner of a group's folder: its uid, and its name where the reader knows it (`stat -c %U`)."""

    uid: int
    name: str = ""


OwnerLookup = Callable[[str], "FolderOwner | None"]  # group id -> the owner of its folder, None: no plain folder


class _Job(Protocol):
    @property
    def job_id(self) -> int: ...

    @property
    def user(self) -> str: ...


J = TypeVar("J", bound=_Job)


def _belongs(job: _Job, owner: FolderOwner) -> bool:
    """squeue records carry the UserId; sacct records only the user name (compared when the reader knows it)."""
    uid = getattr(job, "user_id", None)
    if isinstance(uid, int):
        return uid == owner.uid
    return bool(owner.name) and job.user == owner.name


def members(jobs: Iterable[J], owner: FolderOwner | None) -> tuple[list[J], list[J]]:
    """(the group's own jobs, the foreign ones carrying its tag); with no verifiable owner, none is its own."""
    own: list[J] = []
    foreign: list[J] = []
    for job in jobs:
        (own if owner is not None and _belongs(job, owner) else foreign).append(job)
    return own, foreign


def folder_owner(spool_dir: str, group_id: str) -> FolderOwner | None:
    """The owner of `<spool_dir>/<group_id>` as this host sees it, without following a link; None when it is missing
    or not a plain folder."""
    try:
        return _plain_folder_owner(spool_path(spool_dir, group_id))
    except ValueError:
        return None


def _plain_folder_owner(path: str) -> FolderOwner | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return FolderOwner(info.st_uid) if stat.S_ISDIR(info.st_mode) else None


class SpoolOwners:
    """slurmxd's lookup: `folder_owner` on the daemon's own view of the spool, remembered per group.

    An owner found stays the group's while squeue shows the group (only root can change a folder's owner; in a
    sticky spool root no one else can replace it); a missing folder is looked for again each cycle. `keep` drops
    the groups squeue no longer shows, so the memo is as large as the queue and no larger.
    """

    def __init__(self, spool_dir: str) -> None:
        self.spool_dir = spool_dir
        self._known: dict[str, FolderOwner] = {}

    def __call__(self, group_id: str) -> FolderOwner | None:
        owner = self._known.get(group_id)
        if owner is None:
            owner = folder_owner(self.spool_dir, group_id)
            if owner is not None:
                self._known[group_id] = owner
        return owner

    def keep(self, group_ids: Iterable[str]) -> None:
        """Forget the owners of groups not in `group_ids`; an index group keeps its array's (`core/arrays.py`)."""
        wanted = {folder_group(g) for g in group_ids}
        if len(wanted) < len(self._known):
            self._known = {g: o for g, o in self._known.items() if g in wanted}

    def __len__(self) -> int:
        return len(self._known)


def local_folder_owners(paths: Sequence[str]) -> dict[str, FolderOwner | None]:
    """`folder_owner` for each path on this host (an adapter whose submit host is this one)."""
    return {path: _plain_folder_owner(path) for path in paths}
