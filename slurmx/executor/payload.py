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
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import cloudpickle

from slurmx.core.userfiles import OverCap, UntrustedFile, read_own_file
from slurmx.executor import jobside, sequence
from slurmx.slurm.errors import SlurmError
from slurmx.slurm.transport import LocalTransport

__all__ = ["LOCAL_MODULE", "OUTCOME", "RUNTIME_MODULE", "NotYours", "OutcomeError", "array_files", "caller_uid",
           "carries_bytecode", "folder_files", "job_script", "pickle_call", "read_outcome", "read_own_output",
           "runtime_zip", "task_folder"]

OUTCOME = jobside.OUTCOME
# The nodes have the job side but not slurmx: the executor's own helpers travel by value (bytecode).
cloudpickle.register_pickle_by_value(sequence)
RUNTIME_MODULE = "_slurmx_call"
LOCAL_MODULE = "_slurmx_local"
_CALL_B64 = "call.pkl.b64"
_CALLS_B64 = "calls.zip.b64"
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
def runtime_zip(local: bool = False) -> bytes:
    """A zip holding `_slurmx_call.py` (jobside), the cloudpickle package this process uses and, for the local
    executor, its supervisor `_slurmx_local.py` (localside)."""
    modules = {RUNTIME_MODULE: "jobside.py", **({LOCAL_MODULE: "localside.py"} if local else {})}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for module, source in modules.items():
            archive.writestr(f"{module}.py", resources.files("slurmx.executor").joinpath(source)
                             .read_text(encoding="utf-8"))
        package = Path(cloudpickle.__file__).parent
        for path in sorted(package.glob("*.py")):
            archive.writestr(f"cloudpickle/{path.name}", path.read_text(encoding="utf-8"))
    return buffer.getvalue()


@functools.cache
def _runtime_zip() -> str:
    return base64.b64encode(runtime_zip()).decode("ascii")


def folder_files(call: bytes) -> dict[str, str]:
    """The group folder's files (name -> text) for `submit_group(files=)`."""
    return {_CALL_B64: base64.b64encode(call).decode("ascii"), _RUNTIME_B64: _runtime_zip()}


def array_files(calls: Sequence[bytes]) -> dict[str, str]:
    """The array group's folder files: every task's call in one zip (`<index>.pkl`, index = position), so that
    1,000 calls are one file written, not 1,000; each task takes its own out of it (`jobside.task_call`)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for index, call in enumerate(calls):
            archive.writestr(f"{index}.pkl", call)
    return {_CALLS_B64: base64.b64encode(buffer.getvalue()).decode("ascii"), _RUNTIME_B64: _runtime_zip()}


def task_folder(group_folder: str | Path, index: int) -> Path:
    """Where array task `index` of a function array keeps its call, outcome and output."""
    return Path(group_folder) / f"task-{int(index)}"


def call_label(fn: Callable[..., Any]) -> str:
    """`module.qualname` of the function (or the callable's class): in the payload, so the `h=` tag slurmxd keys
    its runtime history on tells one function from another, and not one call's arguments from another's."""
    owner = fn if hasattr(fn, "__qualname__") else type(fn)
    label = f"{getattr(owner, '__module__', '?')}.{getattr(owner, '__qualname__', '?')}"
    return re.sub(r"[^\w.<>-]", "_", label)[:200]


def job_script(python: str, max_requeues: int, label: str = "", bytecode: bool = True,
               setup: tuple[str, ...] = (), array: bool = False) -> str:
    """The variant payload: unpack the call and the runtime (once per run, into the group folder), then run it.
    With `bytecode` (the call carries code by value) the node refuses to run it on another minor version.
    `setup` lines run first, as submitit runs them (a failing line does not stop the job; `source` works).
    `array`: a task of a function array (`array_files`), which runs in its own `task-<index>` folder the call
    its index names."""
    pickled_by = f" --pickled-by {sys.version_info[0]}.{sys.version_info[1]}" if bytecode else ""
    lines = "".join(f"{line}\n" for line in setup)
    if array:
        unpack = (f'base64 -d < "$d/{_CALLS_B64}" > "$d/.calls.$$" && mv -f "$d/.calls.$$" "$d/calls.zip"\n'
                  'f="$d/task-$SLURM_ARRAY_TASK_ID"\n'
                  'mkdir -p -m 700 "$f"\n')
        where = ' --folder "$f" --calls "$d/calls.zip" --index "$SLURM_ARRAY_TASK_ID"'
    else:
        unpack = f'base64 -d < "$d/{_CALL_B64}" > "$d/.call.$$" && mv -f "$d/.call.$$" "$d/{jobside.CALL}"\n'
        where = ""
    return (
        "#!/bin/bash\n"
        f"# slurmx call: {label}\n"
        + (f"# setup\n{lines}# end of setup\n" if setup else "")
        + "set -eu\n"
        'd="$SLURMX_SPOOL_DIR"\n'
        + unpack
        + f'base64 -d < "$d/{_RUNTIME_B64}" > "$d/.zip.$$" && mv -f "$d/.zip.$$" "$d/executor.zip"\n'
        'export PYTHONPATH="$d/executor.zip${PYTHONPATH:+:$PYTHONPATH}"\n'
        # More than one task or node: srun starts the call in each task (SLURM_PROCID is its rank) and forwards
        # the grace signal to them; decided here so that a kind's own `nodes:` override counts too.
        'launch=()\n'
        'if [ "${SLURM_NTASKS:-1}" -gt 1 ] || [ "${SLURM_JOB_NUM_NODES:-1}" -gt 1 ]; then launch=(srun); fi\n'
        f'exec ${{launch[@]+"${{launch[@]}}"}} {shlex.quote(python)} -m {RUNTIME_MODULE} '
        f"--max-requeues {int(max_requeues)}{pickled_by}{where}\n"
    )


class OutcomeError(Exception):
    """The outcome file is there but cannot be read or is not an outcome; the message says why."""


class NotYours(OutcomeError):
    """The group folder, or a file in it, is not the caller's alone: nothing in it was read or unpickled.

    Why the caller and not the folder's owner: a group id is anyone's to name, and a folder another user made
    (or swapped in, under a spool root that is not root's) would hand that user's pickle to the caller to run.
    """


def caller_uid(adapter: object) -> int:
    """The uid the caller acts as on the cluster, which made its group folders: this process's euid, or, when the
    caller reaches Slurm as another user (`docker exec -u`, SSH as a cluster account), that user (`id -u` there).

    Never the folder's owner: that is what another user controls. NotYours when the remote side cannot say.
    """
    transport = getattr(adapter, "transport", None)
    if transport is None or isinstance(transport, LocalTransport):
        return os.geteuid()
    try:
        result = transport.run(["id", "-u"], timeout=30.0)
    except SlurmError as exc:
        said = str(exc)
    else:
        said = result.stdout.strip()
        if result.returncode == 0 and said.isascii() and said.isdigit():
            return int(said)
        said = result.stderr.strip() or said or f"exit {result.returncode}"
    raise NotYours(f"cannot tell which user {transport.describe()} runs as (`id -u`: {' '.join(said.split())[:200]}): "
                   "not reading the group folder")


def read_outcome(folder: str | Path, max_bytes: int, me: int | None = None, name: str = OUTCOME) \
        -> dict[str, Any] | None:
    """The job's outcome, or None while there is none (no folder or no outcome file yet).

    Read only when the folder and the file are both the caller's (`me`, default this process's euid) and writable
    by no one else, the file regular, not a link and at most `max_bytes` (`max_result_bytes`): anything else
    raises NotYours, one line naming the path and why, and nothing is unpickled.
    """
    path = Path(folder) / name
    try:
        data = read_own_file(path, max_bytes=max_bytes, me=me)
    except OverCap as exc:
        raise OutcomeError(f"{exc}: raise it with Executor.update_parameters(max_result_bytes=...) before submitting, "
                           "or job.max_result_bytes = ... before reading") from None
    except UntrustedFile as exc:
        raise NotYours(f"{exc}: not reading its result") from None
    except OSError as exc:
        raise OutcomeError(f"cannot read the outcome {path}: {exc}") from None
    if data is None:
        return None  # not written yet
    try:
        outcome = pickle.loads(data)  # the caller's own file, in the caller's own folder
    except Exception as exc:
        raise OutcomeError(f"{path}: not a readable outcome ({type(exc).__name__}: {exc})") from None
    if not isinstance(outcome, dict) or "ok" not in outcome:
        raise OutcomeError(f"{path}: not an outcome")
    return outcome


def read_own_output(path: str | Path, max_bytes: int, me: int | None = None) -> str | None:
    """What a call printed (its last `max_bytes` when it printed more), under the same rule as `read_outcome`;
    None while the file is not there."""
    try:
        data = read_own_file(path, max_bytes=max_bytes, tail=True, me=me)
    except UntrustedFile as exc:
        raise NotYours(f"{exc}: not reading its output") from None
    return None if data is None else data.decode("utf-8", errors="replace")
