"""The job side of `Executor.submit`: load the pickled call, run it, write its outcome; checkpoint on the grace signal.

Runs on a compute node as `python -m _slurmx_call` from the group folder's `executor.zip` (this file and cloudpickle),
beside the `slurmx.hooks` copy every job script ships: standard library, cloudpickle and `slurmx.hooks._env` only,
Python >= 3.9. Everything it reads and writes is in the group folder the job script checked is its own (0700).

The grace signal comes from slurmxd (which writes an intent file first, then requeues at the deadline) or from
Slurm's own `--signal` before the time limit (nobody requeues then): so without an intent the job requeues itself,
as long as it has been restarted fewer than `--max-requeues` times.
"""

from __future__ import annotations

import argparse
import os
import pickle
import signal
import stat
import subprocess
import sys
import time
import traceback
import zipfile
from pathlib import Path
from types import FrameType
from typing import Any

CALL = "call.pkl"          # (fn, args, kwargs), written at submit time
RESUME = "resume.pkl"      # (fn, args, kwargs) that a checkpoint returned, for the run after the requeue
OUTCOME = "outcome.pkl"    # {"ok": ..., "value" | "exception", "traceback", ...}, written once at the end


def outcome_name(rank: int) -> str:
    """The outcome file of task `rank` of a multi-task call: task 0's is OUTCOME, as for a one-task call."""
    return OUTCOME if rank == 0 else f"outcome-{rank}.pkl"


def output_name(job: str, rank: int, suffix: str) -> str:
    """The file task `rank` of job `job` (`SLURM_JOB_ID`, or `local-<pid>` off Slurm) prints to: task 0's is the
    call's own, `fn-<job>.<suffix>`."""
    return f"fn-{job}.{suffix}" if rank == 0 else f"fn-{job}.{rank}.{suffix}"


def task_rank() -> int:
    """This task's global rank (SLURM_PROCID, which srun sets per task); 0 in a one-task job."""
    raw = os.environ.get("SLURM_PROCID", "0").strip()
    return int(raw) if raw.isdigit() else 0
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class Preempted(BaseException):
    """Raised in the main thread by the grace handler, to unwind the function after its checkpoint was saved."""


def write_private(folder: Path, name: str, data: bytes) -> None:
    """Write `name` whole or not at all (temp file, fsync, rename), owner-only."""
    tmp = folder / f".{name}.{os.getpid()}.tmp"
    fd = os.open(tmp, _FLAGS, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, folder / name)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_own(folder: Path, name: str) -> bytes | None:
    """A file of our own folder, or None when missing; a link or a non-regular file is refused."""
    try:
        fd = os.open(folder / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OSError(f"{folder / name}: not a regular file")
        return f.read()


def task_call(folder: Path, calls: Path, index: int) -> None:
    """A function array's task: put call `index` of the array's `calls` zip into the task's own folder, once (a
    requeued task keeps its call and its checkpoint)."""
    if read_own(folder, CALL) is not None:
        return
    fd = os.open(calls, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f, zipfile.ZipFile(f) as archive:
        write_private(folder, CALL, archive.read(f"{index}.pkl"))


def checkpoint_method(fn: Any) -> Any:
    """The function's checkpoint: submitit's `__submitit_checkpoint__` when it has one (submitit looks there
    first), else its `checkpoint` method; None when it has neither."""
    for name in ("__submitit_checkpoint__", "checkpoint"):
        method = getattr(fn, name, None)
        if callable(method):
            return method
    return None


def as_call(returned: Any, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, tuple[Any, ...],
                                                                                          dict[str, Any]]:
    """What `checkpoint()` returned, as the call to resume with: None -> the same call; a callable -> it, with the
    same arguments; `(fn, args, kwargs)` (e.g. `slurmx.executor.Resume`) -> exactly that; an object with
    `function`, `args` and `kwargs` (submitit's `DelayedSubmission`, read by shape, without importing submitit)
    -> `function(*args, **kwargs)`, which is what submitit calls after its requeue."""
    if returned is None:
        return fn, args, kwargs
    if isinstance(returned, tuple) and len(returned) == 3 and callable(returned[0]):
        return returned[0], tuple(returned[1]), dict(returned[2])
    if callable(returned):
        return returned, args, kwargs
    delayed = (getattr(returned, "function", None), getattr(returned, "args", None), getattr(returned, "kwargs", None))
    if callable(delayed[0]) and isinstance(delayed[1], (tuple, list)) and isinstance(delayed[2], dict):
        return delayed[0], tuple(delayed[1]), dict(delayed[2])
    raise TypeError(f"checkpoint() returned {type(returned).__name__}: expected None, a callable, (fn, args, kwargs) "
                    "or an object with function, args and kwargs (submitit's DelayedSubmission)")


def outcome_ok(value: Any) -> dict[str, Any]:
    return {"ok": True, "value": value, **_where()}


def outcome_error(exc: BaseException) -> dict[str, Any]:
    """The exception itself when it pickles (so the caller can catch its type), always its text and traceback."""
    import cloudpickle

    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    try:
        pickled: bytes | None = cloudpickle.dumps(exc)
        pickle.loads(pickled or b"")
    except Exception:
        pickled = None
    return {"ok": False, "exception": pickled, "type": type(exc).__name__, "message": str(exc)[:4000],
            "traceback": text[-64000:], **_where()}


def _where() -> dict[str, Any]:
    return {"variant": os.environ.get("SLURMX_VARIANT", ""), "job_id": os.environ.get("SLURM_JOB_ID", ""),
            "restarts": int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0), "rank": task_rank(),
            "tasks": int(os.environ.get("SLURM_NTASKS", "1") or 1) if "SLURM_PROCID" in os.environ else 1}


def _redirect(folder: Path) -> None:
    """The function's stdout and stderr (and its subprocesses') go to files of their own, appended across
    requeues, so `Job.stdout()` shows what it printed and not the job script's lines."""
    job = os.environ.get("SLURM_JOB_ID", f"local-{os.getpid()}")
    rank = task_rank()
    for fd, suffix in ((1, "out"), (2, "err")):
        target = os.open(folder / output_name(job, rank, suffix),
                         os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        (sys.stdout if fd == 1 else sys.stderr).flush()
        os.dup2(target, fd)
        os.close(target)


class _Grace:
    """The grace handler: save what `checkpoint()` returns, then unwind; or, past the requeue cap, keep running."""

    def __init__(self, folder: Path, call: tuple[Any, tuple[Any, ...], dict[str, Any]], max_requeues: int,
                 restarts: int, intent: Path | None) -> None:
        self.folder, self.call, self.max_requeues = folder, call, max_requeues
        self.restarts, self.intent, self.fired = restarts, intent, False

    def daemon_requeues(self) -> bool:
        return self.intent is not None and self.intent.is_file()

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.fired:
            return
        self.fired = True
        if not self.daemon_requeues() and self.restarts >= self.max_requeues:
            print(f"slurmx: grace signal after {self.restarts} requeue(s), the cap (max_requeues): no checkpoint, "
                  "running on until the time limit", file=sys.stderr)
            return
        if task_rank() != 0:
            raise Preempted  # task 0 saves the call's state; the others unwind with it
        import cloudpickle

        fn, args, kwargs = self.call
        try:
            resumed = as_call(checkpoint_method(fn)(*args, **kwargs), fn, args, kwargs)
            write_private(self.folder, RESUME, cloudpickle.dumps(resumed))
        except Exception:
            # The last saved call (or the first) is still there: a requeue that repeats work beats a failed job.
            traceback.print_exc()
            print("slurmx: checkpoint() failed; requeueing with the last saved call", file=sys.stderr)
        raise Preempted


def slurm_self() -> str:
    """How Slurm's commands name this job alone: `A_i` in a task of a slurmx array, which its script says in
    `SLURMX_JOB_KEY` (`<job id>=A_i`); else `SLURM_JOB_ID`. The task that starts last keeps the array's job id as
    its SLURM_JOB_ID, and `scontrol requeue <array job id>` requeues every task of the array, finished ones too."""
    job = os.environ.get("SLURM_JOB_ID", "").strip()
    said, _, key = os.environ.get("SLURMX_JOB_KEY", "").strip().partition("=")
    index = key.split("_")
    if job and said == job and len(index) == 2 and all(part.isascii() and part.isdigit() for part in index):
        return key
    return job


def requeue_self() -> bool:
    """`scontrol requeue` this job: Slurm's `--signal` before the time limit is followed by nobody's requeue."""
    job = slurm_self()
    if not job:
        return False
    try:
        proc = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True, check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(f"slurmx: scontrol requeue {job} failed: {exc}", file=sys.stderr)
        return False
    if proc.returncode != 0:
        print(f"slurmx: scontrol requeue {job} failed: {proc.stderr.strip()}", file=sys.stderr)
    return proc.returncode == 0


def load_call(folder: Path, restarts: int) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """The call to make: the one a checkpoint saved (after a requeue), else the submitted one."""
    data = read_own(folder, RESUME) if restarts > 0 else None
    if data is None:
        data = read_own(folder, CALL)
    if data is None:
        raise FileNotFoundError(f"{folder / CALL}: missing")
    fn, args, kwargs = pickle.loads(data)
    return fn, tuple(args), dict(kwargs)


def run(folder: Path, max_requeues: int, pickled_by: str = "") -> int:
    """Run the call and write its outcome; the exit code the job script passes on to Slurm."""
    from slurmx.hooks import _env

    _redirect(folder)
    restarts = _env.restart_count()
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    if pickled_by and pickled_by != here:  # a function pickled by value is bytecode of that minor version
        return _finish(folder, outcome_error(RuntimeError(
            f"the call was pickled by Python {pickled_by} but the node runs Python {here} ({sys.executable}); "
            f"set Executor(...).update_parameters(python=...) to a Python {pickled_by} the nodes have")), 1)
    try:
        call = load_call(folder, restarts)
    except Exception as exc:  # nothing to run: say so in the outcome, as any failure
        return _finish(folder, outcome_error(exc), 1)
    if checkpoint_method(call[0]) is not None:
        signal.signal(_env.grace_signal(), _Grace(folder, call, max_requeues, restarts, _env.intent_path()))
        _env.announce_handler()  # the job script forwards the grace signal only to a payload that says it handles it
    fn, args, kwargs = call
    try:
        value = fn(*args, **kwargs)
    except Preempted:
        return _leave_for_requeue(_env.intent_path(), requeue=True)
    except SystemExit as exc:
        from slurmx import hooks

        if hooks.preempted():  # the function's own `slurmx.hooks.on_preempt` handler checkpointed and left
            return _leave_for_requeue(_env.intent_path(), requeue=restarts < max_requeues)
        return _finish(folder, outcome_error(exc), 1)
    except Exception as exc:
        return _finish(folder, outcome_error(exc), 1)
    return _finish(folder, outcome_ok(value), 0)


def _leave_for_requeue(intent: Path | None, requeue: bool) -> int:
    """The requeue exit code, after requeueing this job unless slurmxd will (its intent file is there)."""
    from slurmx.hooks import _env

    code = _env.requeue_exit_code()
    if intent is not None and intent.is_file():
        return code  # slurmxd (or `slurmx preempt`) requeues at the deadline
    if requeue and task_rank() == 0 and requeue_self():
        time.sleep(60)  # Slurm kills this job as it requeues it; leave anyway if it has not yet
    return code


def _finish(folder: Path, outcome: dict[str, Any], code: int) -> int:
    """Write the outcome, except in slurmxd's profiling sample of the call (`work:` set): a sample stops after a
    few steps, and its return value is not the call's."""
    import cloudpickle

    from slurmx.hooks import _env

    if _env.profile_steps() > 0:
        return code

    try:
        data = cloudpickle.dumps(outcome)
    except Exception as exc:  # a return value that does not pickle is the function's failure
        outcome, code = outcome_error(TypeError(f"the return value does not pickle: {exc}")), 1
        data = cloudpickle.dumps(outcome)
    write_private(folder, outcome_name(task_rank()), data)
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="_slurmx_call")
    parser.add_argument("--max-requeues", type=int, default=3)
    parser.add_argument("--folder", default=os.environ.get("SLURMX_SPOOL_DIR", ""))
    parser.add_argument("--pickled-by", default="", help="the submitting Python's major.minor version")
    parser.add_argument("--calls", default="", help="a function array's calls (zip), of which this task runs one")
    parser.add_argument("--index", type=int, default=-1, help="the array task's index (SLURM_ARRAY_TASK_ID)")
    opts = parser.parse_args(argv)
    if not opts.folder:
        print("slurmx: no group folder (SLURMX_SPOOL_DIR)", file=sys.stderr)
        return 2
    if opts.calls:
        try:
            task_call(Path(opts.folder), Path(opts.calls), opts.index)
        except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:  # no call: the outcome says why
            _redirect(Path(opts.folder))
            return _finish(Path(opts.folder), outcome_error(exc), 1)
    return run(Path(opts.folder), opts.max_requeues, opts.pickled_by)


if __name__ == "__main__":
    sys.exit(main())
