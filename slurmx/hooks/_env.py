"""The environment contract between slurmx job templates, the daemon, and the job-side hooks.

Everything here is read from environment variables (set by the job templates or by Slurm) so that the hooks work
unchanged in the Python API, the `python3 -m slurmx.hooks` CLI and `hook.sh`. Standard library only: this package
runs inside job scripts on compute nodes, next to an empty `slurmx/__init__.py`, on Python >= 3.9.
"""

from __future__ import annotations

import os
import re
import signal
import stat
from pathlib import Path

DEFAULT_GRACE_SIGNAL = "USR2"  # not USR1: NCCL uses it
DEFAULT_GRACE_S = 120
DEFAULT_REQUEUE_EXIT_CODE = 99
DEFAULT_CHECKPOINT_DIR = "./slurmx-checkpoint"
DEFAULT_PROGRESS_INTERVAL_S = 1.0
ON_PREEMPT_MODES = ("exit", "wait")

_DEADLINE = re.compile(r"(?:^|\s)deadline=([0-9]+(?:\.[0-9]*)?)(?:\s|$)")
_JOB_KEY = re.compile(r"([0-9]+)=([0-9]+(?:_[0-9]+)?)", re.ASCII)
_GRACE = re.compile(r"(?:^|\s)grace=([0-9]+(?:\.[0-9]*)?)(?:\s|$)")


def _env_int(name: str, default: int) -> int:
    """An integer variable; a malformed value raises at set-up time rather than being silently replaced."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not an integer") from None


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number") from None


def grace_signal() -> signal.Signals:
    """The signal the daemon sends before requeueing: `SLURMX_GRACE_SIGNAL` as `USR2`, `SIGUSR2` or a number."""
    raw = os.environ.get("SLURMX_GRACE_SIGNAL", "").strip().upper() or DEFAULT_GRACE_SIGNAL
    try:
        return signal.Signals(int(raw)) if raw.isdigit() else signal.Signals["SIG" + raw.removeprefix("SIG")]
    except (KeyError, ValueError):
        raise ValueError(f"SLURMX_GRACE_SIGNAL={raw!r} is not a signal name") from None


def grace_seconds() -> int:
    """Seconds between the grace signal and the requeue, unless the daemon's intent file says otherwise."""
    return _env_int("SLURMX_GRACE_S", DEFAULT_GRACE_S)


def on_preempt_mode() -> str:
    """`exit` (leave with the requeue code after the callback) or `wait` (sleep until Slurm requeues the job)."""
    mode = os.environ.get("SLURMX_ON_PREEMPT", "").strip().lower() or "exit"
    if mode not in ON_PREEMPT_MODES:
        raise ValueError(f"SLURMX_ON_PREEMPT={mode!r}: expected one of {', '.join(ON_PREEMPT_MODES)}")
    return mode


def requeue_exit_code() -> int:
    """The exit code that tells the job template / daemon "requeue me" (`SLURMX_REQUEUE_EXIT_CODE`, default 99)."""
    return _env_int("SLURMX_REQUEUE_EXIT_CODE", DEFAULT_REQUEUE_EXIT_CODE)


def progress_interval() -> float:
    """Minimum seconds between two progress-file writes, so `progress()` can be called every iteration."""
    return _env_float("SLURMX_PROGRESS_INTERVAL", DEFAULT_PROGRESS_INTERVAL_S)


def profile_steps() -> int:
    """`SLURMX_PROFILE_STEPS`: in a profiling sample run, stop after this many steps (0: not profiling)."""
    return max(0, _env_int("SLURMX_PROFILE_STEPS", 0))


def job_id() -> str:
    """What this job's files are named by: `SLURM_JOB_ID`; `<SLURM_ARRAY_JOB_ID>_<SLURM_ARRAY_TASK_ID>` in a job
    array's task (slurmxd knows a task by its index, not by the id Slurm gives it when it splits it off its
    array); `local-<pid>` outside Slurm so files of unrelated local runs do not collide. A slurmx job script says
    which in `SLURMX_JOB_KEY` (`<job id>=<name>`, for that job id only: a plain job submitted from inside an array
    task inherits `SLURM_ARRAY_*`, and any job inherits the variable itself)."""
    said = _JOB_KEY.fullmatch(os.environ.get("SLURMX_JOB_KEY", "").strip())
    if said is not None and said[1] == os.environ.get("SLURM_JOB_ID", "").strip():
        return said[2]
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID", ""), os.environ.get("SLURM_ARRAY_TASK_ID", "")
    if array.isascii() and array.isdigit() and task.isascii() and task.isdigit():
        return f"{int(array)}_{int(task)}"
    return os.environ.get("SLURM_JOB_ID", "").strip() or f"local-{os.getpid()}"


def spool_dir() -> Path | None:
    """The group's spool folder on shared storage (`SLURMX_SPOOL_DIR`); None: write no progress file."""
    raw = os.environ.get("SLURMX_SPOOL_DIR", "").strip()
    return Path(raw) if raw else None


def label(name: str) -> str | None:
    """`SLURMX_GROUP` / `SLURMX_VARIANT`, copied into progress and profile files so readers need no job lookup."""
    return os.environ.get(name) or None


def checkpoint_dir() -> Path:
    """Where the job keeps its state across requeues (`SLURMX_CHECKPOINT_DIR`), created if missing.

    Returned as an absolute path so that a later `chdir` in the job does not change where it points.
    """
    path = Path(os.environ.get("SLURMX_CHECKPOINT_DIR", "").strip() or DEFAULT_CHECKPOINT_DIR).expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return path.absolute()


def restart_count() -> int:
    """How many times Slurm has restarted this job (`SLURM_RESTART_COUNT`; 0 on the first run)."""
    try:
        return max(0, int(os.environ.get("SLURM_RESTART_COUNT", "").strip() or 0))
    except ValueError:
        return 0


def is_resumed() -> bool:
    """True when this run is a restart after a requeue, i.e. a checkpoint from an earlier run may exist."""
    return restart_count() > 0


def handler_marker_path() -> Path | None:
    """`$SLURMX_SPOOL_DIR/handler-$SLURM_JOB_ID`: a payload that installed a grace handler says so here, and the
    batch shell's hook (SLURMX_FORWARD_SIGNAL=auto) forwards the signal only to payloads that did."""
    spool = spool_dir()
    return spool / f"handler-{job_id()}" if spool is not None else None


def announce_handler() -> None:
    """Write this process's pid into the handler marker (best effort: a missing spool folder is no error)."""
    path = handler_marker_path()
    if path is None:
        return
    try:
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(f"{os.getpid()}\n")
        os.replace(tmp, path)
    except OSError:
        pass


def intent_path() -> Path | None:
    """`$SLURMX_SPOOL_DIR/preempt-$SLURM_JOB_ID`, which the daemon may write before it signals."""
    spool = spool_dir()
    return spool / f"preempt-{job_id()}" if spool is not None else None


def parse_intent(line: str, signalled_at: float) -> float | None:
    """Deadline from an intent line `preempt grace=120 deadline=<epoch> reason=<text>` (None if it has neither).

    The reason is free text and comes last, so only what precedes ` reason=` is searched.
    """
    if not line.startswith("preempt"):
        return None
    line = line.split(" reason=", 1)[0]
    match = _DEADLINE.search(line)
    if match:
        return float(match.group(1))
    match = _GRACE.search(line)
    return signalled_at + float(match.group(1)) if match else None


def preempt_deadline(signalled_at: float, grace_s: float) -> float:
    """The deadline (epoch seconds) for a grace signal received at `signalled_at`.

    The daemon's intent file wins when present, since it knows when it will requeue; otherwise the signal time
    plus the configured grace (the daemon keeps its own deadline when it could not write the file). Never raises
    nor blocks: it runs inside a signal handler, so only a regular file is read (a FIFO or a link there is not).
    """
    path = intent_path()
    if path is not None:
        try:
            line = _read_first_line(path)
            deadline = parse_intent(line.strip(), signalled_at) if line is not None else None
            if deadline is not None:
                return deadline
        except (OSError, ValueError):
            pass
    return signalled_at + grace_s


def _read_first_line(path: Path, limit: int = 4096) -> str | None:
    """The first line of a regular file at `path`, opened without following a link or waiting on a FIFO."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, limit).decode("utf-8", errors="replace").split("\n", 1)[0]
    finally:
        os.close(fd)
