"""Where the preemption protocol's intent files go: the job's group folder on this host, or a dry run's record.

`preemption.begin` writes `<group spool>/preempt-<jobid>` before it signals and `preemption.close` removes it when
the protocol is over; both take an `IntentFiles`, so a dry run hands them a recorder
(`slurm.recording.RecordedFiles`) and no file a job's hook reads is ever written or removed by a daemon that acts
on nothing.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path
from typing import Protocol

__all__ = ["LOCAL_FILES", "IntentFiles"]


class IntentFiles(Protocol):
    """Where intent files are written and removed: the job's folder on this host (`LOCAL_FILES`), or, in a dry
    run, a record of what would have been (`slurmx.slurm.recording.RecordedFiles`)."""

    def write(self, path: Path, text: str) -> None: ...
    def remove(self, path: Path) -> None: ...


class _LocalFiles:
    def write(self, path: Path, text: str) -> None:
        _write_intent(path, text)

    def remove(self, path: Path) -> None:
        _remove_intent(path)


LOCAL_FILES: IntentFiles = _LocalFiles()


def _write_intent(path: Path, text: str) -> None:
    """Atomically and durably (temp file, fsync, rename, fsync the folder) write the intent file.

    The spool folder is writable by the job's user while the daemon may run as root: the folder is opened with
    O_NOFOLLOW and both files relative to it with O_NOFOLLOW/O_EXCL, so a planted symlink cannot redirect the
    write. Nothing is created outside an existing folder. The temporary name is not guessable, so nothing can be
    planted there in advance.
    """
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    tmp = f".{path.name}.{os.getpid()}.{secrets.token_hex(8)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=folder)
        try:
            os.write(fd, text.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path.name, src_dir_fd=folder, dst_dir_fd=folder)
        os.fsync(folder)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=folder)
        raise
    finally:
        os.close(folder)


def _remove_intent(path: Path) -> None:
    try:
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.unlink(path.name, dir_fd=folder)
    finally:
        os.close(folder)
