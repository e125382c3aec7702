"""Reading files from places a user can write, as a daemon that may run as root.

A user controls every file in folders they can write: a planted FIFO blocks a plain `open()` forever, a symlink to
`/dev/zero` or a sparse 100 GB file exhausts memory, a symlink redirects the read to a file the user may not read.
So every such read here opens without following links and without blocking, accepts regular files only, checks
the owner when the caller knows who it must be, and reads at most a cap. A folder is opened the same way and the
file is opened relative to it, so no component of the path can be swapped for a link between check and use.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

__all__ = ["MAX_READ_BYTES", "UntrustedFile", "check_private_folder", "read_user_file", "read_user_text"]

MAX_READ_BYTES = 1 << 20  # 1 MiB: progress files, sample scripts and intents are a few KB
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC


class UntrustedFile(OSError):
    """A file or folder that is missing, not what it must be, or not its owner's; the message says which."""


def _owner_problem(path: str | Path, info: os.stat_result, owner: int | None) -> str:
    if owner is not None and info.st_uid != owner:
        return f"{path}: owned by uid {info.st_uid}, not {owner}"
    return ""


def _refused(path: str | Path, exc: OSError) -> UntrustedFile:
    """An open that failed, as one line: O_NOFOLLOW answers ELOOP when the last part of the path is a link."""
    return UntrustedFile(f"{path}: {'a symlink' if exc.errno == errno.ELOOP else (exc.strerror or str(exc))}")


def check_private_folder(path: str | Path, owner: int | None) -> int:
    """Open `path` as a folder that only `owner` can write (no link, no group/other write) -> its fd.

    The caller closes the fd. Raises UntrustedFile naming the problem.
    """
    try:
        fd = os.open(path, _DIR_FLAGS)
    except OSError as exc:
        raise _refused(path, exc) from None
    info = os.fstat(fd)
    problem = _owner_problem(path, info, owner)
    if not problem and info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        problem = f"{path}: writable by others (mode {stat.S_IMODE(info.st_mode):o})"
    if problem:
        os.close(fd)
        raise UntrustedFile(problem)
    return fd


def read_user_file(path: str | Path, *, owner: int | None = None, folder_owner: int | None = None,
                   max_bytes: int = MAX_READ_BYTES) -> bytes:
    """The bytes of a regular file a user may have planted: no link followed, never blocks, at most `max_bytes`.

    `owner`: the uid the file must belong to. `folder_owner`: also require the folder to be that uid's alone
    (the file is then opened relative to the checked folder). Raises UntrustedFile for a missing file, a link, a
    FIFO/device/socket/folder, a wrong owner or a file over the cap.
    """
    target = Path(path)
    dir_fd = check_private_folder(target.parent, folder_owner) if folder_owner is not None else None
    try:
        try:
            fd = os.open(target.name if dir_fd is not None else target, _OPEN_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            raise _refused(target, exc) from None
    finally:
        if dir_fd is not None:
            os.close(dir_fd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UntrustedFile(f"{target}: not a regular file")
        problem = _owner_problem(target, info, owner)
        if problem:
            raise UntrustedFile(problem)
        if info.st_size > max_bytes:
            raise UntrustedFile(f"{target}: {info.st_size} bytes, over the {max_bytes}-byte cap")
        chunks: list[bytes] = []
        left = max_bytes + 1  # one byte more tells a file that grew past the cap after fstat
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > max_bytes:
            raise UntrustedFile(f"{target}: grew over the {max_bytes}-byte cap while read")
        return data
    finally:
        os.close(fd)


def read_user_text(path: str | Path, *, owner: int | None = None, folder_owner: int | None = None,
                   max_bytes: int = MAX_READ_BYTES) -> str | None:
    """`read_user_file` as UTF-8 text (invalid bytes replaced), or None for any problem: for callers to whom a
    missing and a hostile file mean the same (no reading)."""
    try:
        return read_user_file(path, owner=owner, folder_owner=folder_owner, max_bytes=max_bytes) \
            .decode("utf-8", errors="replace")
    except OSError:
        return None
