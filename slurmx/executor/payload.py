"""What a function job carries into its group folder, and how its outcome is read back.

The folder is created owner-only by the submitting user before the first sbatch (`submit_group(files=)`), which
writes text only: the pickled call and the runtime (the job-side runner and cloudpickle, zipped) travel base64.
The runtime is shipped with every group so that a node needs nothing but a Python: of the same minor version when
the call carries code by value (bytecode), any Python 3 when everything in it is pickled by reference.
"""

from __future__ import annotations

import base64
import functools
import io
import os
import pickle
import re
import shlex
import sys
import zipfile
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import cloudpickle

from slurmx.core.userfiles import read_user_file
from slurmx.executor import jobside

__all__ = ["OUTCOME", "RUNTIME_MODULE", "carries_bytecode", "folder_files", "job_script", "pickle_call",
           "read_outcome"]

OUTCOME = jobside.OUTCOME
RUNTIME_MODULE = "_slurmx_call"
_CALL_B64 = "call.pkl.b64"
_RUNTIME_B64 = "executor.zip.b64"


def pickle_call(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> bytes:
    """cloudpickle of (fn, args, kwargs); raises TypeError naming what did not pickle."""
    try:
        data: bytes = cloudpickle.dumps((fn, tuple(args), dict(kwargs)))
    except Exception as exc:
        raise TypeError(f"cannot pickle the call to {getattr(fn, '__name__', fn)!r}: {exc}") from None
    return data


# What cloudpickle writes for code it pickles by value (functions, classes, code objects): bytecode, which only
# the same minor version of Python can run. A call without them holds references and data only.
_BY_VALUE_MARKS = (b"_make_function", b"_make_skeleton_class", b"_make_skeleton_enum", b"CodeType")


def carries_bytecode(call: bytes) -> bool:
    """Whether the pickled call holds code by value (conservative: a data string naming these counts too)."""
    return any(mark in call for mark in _BY_VALUE_MARKS)


@functools.cache
def _runtime_zip() -> str:
    """base64 of a zip holding `_slurmx_call.py` (jobside) and the cloudpickle package this process uses."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"{RUNTIME_MODULE}.py", resources.files("slurmx.executor").joinpath("jobside.py")
                         .read_text(encoding="utf-8"))
        package = Path(cloudpickle.__file__).parent
        for path in sorted(package.glob("*.py")):
            archive.writestr(f"cloudpickle/{path.name}", path.read_text(encoding="utf-8"))
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def folder_files(call: bytes) -> dict[str, str]:
    """The group folder's files (name -> text) for `submit_group(files=)`."""
    return {_CALL_B64: base64.b64encode(call).decode("ascii"), _RUNTIME_B64: _runtime_zip()}


def call_label(fn: Callable[..., Any]) -> str:
    """`module.qualname` of the function (or the callable's class): in the payload, so the `h=` tag slurmxd keys
    its runtime history on tells one function from another, and not one call's arguments from another's."""
    owner = fn if hasattr(fn, "__qualname__") else type(fn)
    label = f"{getattr(owner, '__module__', '?')}.{getattr(owner, '__qualname__', '?')}"
    return re.sub(r"[^\w.<>-]", "_", label)[:200]


def job_script(python: str, max_requeues: int, label: str = "", bytecode: bool = True) -> str:
    """The variant payload: unpack the call and the runtime (once per run, into the group folder), then run it.
    With `bytecode` (the call carries code by value) the node refuses to run it on another minor version."""
    pickled_by = f" --pickled-by {sys.version_info[0]}.{sys.version_info[1]}" if bytecode else ""
    return (
        "#!/bin/bash\n"
        f"# slurmx call: {label}\n"
        "set -eu\n"
        'd="$SLURMX_SPOOL_DIR"\n'
        f'base64 -d < "$d/{_CALL_B64}" > "$d/.call.$$" && mv -f "$d/.call.$$" "$d/{jobside.CALL}"\n'
        f'base64 -d < "$d/{_RUNTIME_B64}" > "$d/.zip.$$" && mv -f "$d/.zip.$$" "$d/executor.zip"\n'
        'export PYTHONPATH="$d/executor.zip${PYTHONPATH:+:$PYTHONPATH}"\n'
        f"exec {shlex.quote(python)} -m {RUNTIME_MODULE} --max-requeues {int(max_requeues)}{pickled_by}\n"
    )


class OutcomeError(Exception):
    """The outcome file is there but cannot be read or is not an outcome; the message says why."""


def read_outcome(folder: str | Path, max_bytes: int) -> dict[str, Any] | None:
    """The job's outcome, or None while there is none.

    The file lives in the user's own group folder: it is read only if that folder is writable by its owner alone,
    without following links, as a regular file of at most `max_bytes`.
    """
    path = Path(folder) / OUTCOME
    try:
        owner = os.lstat(folder).st_uid
        data = read_user_file(path, owner=owner, folder_owner=owner, max_bytes=max_bytes)
    except OSError as exc:
        if not os.path.lexists(path):
            return None  # not written yet
        raise OutcomeError(f"cannot read the outcome: {exc}") from None
    try:
        outcome = pickle.loads(data)  # the user's own file, written by their own job
    except Exception as exc:
        raise OutcomeError(f"{path}: not a readable outcome ({type(exc).__name__}: {exc})") from None
    if not isinstance(outcome, dict) or "ok" not in outcome:
        raise OutcomeError(f"{path}: not an outcome")
    return outcome
