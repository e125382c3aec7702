"""Reading files from places a user can write, as a daemon that may run as root.

A user controls every file in folders they can write: a planted FIFO blocks a plain `open()` forever, a symlink to
`/dev/zero` or a sparse 100 GB file exhausts memory, a symlink redirects the read to a file the user may not read.
So every such read here opens without following links and without blocking, accepts regular files only, checks
the owner when the caller knows who it must be, and reads at most a cap. A folder is opened the same way and the
file is opened relative to it, so no component of the path can be swapped for a link between check and use.

A user process reading back what its own jobs wrote (`read_own_file`) trusts neither the folder's owner nor the
file's: both must be the caller (euid) and writable by no one else, or a pickle another user planted would run as
the caller. The spool root every user creates group folders in must be root's and sticky (`spool_root_problem`),
or its owner could remove or replace any user's group folder.
"""

from __future__ import annotations

import errno
import os
import shlex
import stat
from pathlib import Path

__all__ = ["MAX_READ_BYTES", "SPOOL_ROOT_FIX", "OverCap", "UntrustedFile", "check_private_folder",
           "local_spool_root_problem", "missing_spool_root", "read_own_file", "read_user_file", "read_user_text",
           "spool_root_problem"]

MAX_READ_BYTES = 1 << 20  # 1 MiB: progress files, sample scripts and intents are a few KB
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC


class UntrustedFile(OSError):
    """A file or folder that is missing, not what it must be, or not its owner's; the message says which."""


class OverCap(UntrustedFile):
    """A file larger than the reader's cap (`read_own_file`): a size to raise, not a plant to report."""


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
        return _read_at_most(fd, target, max_bytes, grown_ok=False)
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


def _not_yours(path: str | Path, info: os.stat_result, me: int) -> str:
    """Why a folder or file is not the caller's alone ('' when it is)."""
    if info.st_uid != me:
        return f"{path} is owned by uid {info.st_uid}, not you ({me})"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} is writable by others (mode {stat.S_IMODE(info.st_mode):o})"
    return ""


def read_own_file(path: str | Path, *, max_bytes: int = MAX_READ_BYTES, tail: bool = False,
                  me: int | None = None) -> bytes | None:
    """The bytes of a file the caller wrote into a folder of their own; None when either is missing.

    `me`: the caller's uid (default this process's euid). Folder and file must both be owned by it and writable by
    no one else, the file regular, never a link (the folder is opened without following a link and the file
    relative to it). Over `max_bytes`: refused, or with `tail` its last `max_bytes` (a log that grew long). Raises
    UntrustedFile, one line naming the path and why.
    """
    target = Path(path)
    me = os.geteuid() if me is None else me
    try:
        dir_fd = os.open(target.parent, _DIR_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _refused(target.parent, exc) from None
    try:
        problem = _not_yours(target.parent, os.fstat(dir_fd), me)
        if problem:
            raise UntrustedFile(problem)
        try:
            fd = os.open(target.name, _OPEN_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _refused(target, exc) from None
    finally:
        os.close(dir_fd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UntrustedFile(f"{target}: not a regular file")
        problem = _not_yours(target, info, me)
        if problem:
            raise UntrustedFile(problem)
        if info.st_size > max_bytes:
            if not tail:
                raise OverCap(f"{target}: {info.st_size} bytes, over the {max_bytes}-byte cap")
            os.lseek(fd, info.st_size - max_bytes, os.SEEK_SET)
        return _read_at_most(fd, target, max_bytes, grown_ok=tail)
    finally:
        os.close(fd)


def _read_at_most(fd: int, path: Path, max_bytes: int, *, grown_ok: bool) -> bytes:
    """Up to `max_bytes` from `fd`; a file that grew past them while read is refused unless `grown_ok`."""
    chunks: list[bytes] = []
    left = max_bytes if grown_ok else max_bytes + 1  # one byte more tells a file that grew past the cap
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise OverCap(f"{path}: grew over the {max_bytes}-byte cap while read")
    return data


SPOOL_ROOT_FIX = "chown root:root {dir} && chmod 1777 {dir}"


def spool_root_problem(path: str, uid: int, mode: int) -> str:
    """'' when a spool root with this owner and `st_mode` (as lstat says) is safe; else one line: path, why, fix.

    Safe: a folder, not a link, owned by root, sticky. A spool root another user owns lets that user remove or
    swap anyone's group folder; without the sticky bit, any user can rename another's folder away and plant his.
    Pure, so the local check and the one over a transport (`stat` on the submit host) judge alike.
    """
    shown = shlex.quote(path)
    fix = SPOOL_ROOT_FIX.format(dir=shown)
    if stat.S_ISLNK(mode):
        return (f"spool root {path} is a symlink: set submit.spool_dir to the folder itself, then "
                f"{SPOOL_ROOT_FIX.format(dir='<that folder>')}")
    if not stat.S_ISDIR(mode):
        return f"spool root {path} is not a folder: remove it, then mkdir {shown} && {fix}"
    if uid != 0:
        return f"spool root {path} is owned by uid {uid}, not root: {fix}"
    if not mode & stat.S_ISVTX:
        return f"spool root {path} is not sticky (mode {stat.S_IMODE(mode):o}): {fix}"
    return ""


def missing_spool_root(path: str, why: str = "") -> str:
    """The one line for a spool root that is missing (`why` empty) or cannot be looked at (`why` says so)."""
    shown = shlex.quote(path)
    if not why:
        return f"spool root {path} does not exist: mkdir -p {shown} && {SPOOL_ROOT_FIX.format(dir=shown)}"
    return (f"spool root {path} cannot be looked at ({why}): it must be a folder owned by root with mode 1777 "
            f"({SPOOL_ROOT_FIX.format(dir=shown)})")


def local_spool_root_problem(path: str) -> str:
    """`spool_root_problem` of `path` on this host ('' when safe)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return missing_spool_root(path)
    except OSError as exc:
        return missing_spool_root(path, exc.strerror or str(exc))
    return spool_root_problem(path, info.st_uid, info.st_mode)
