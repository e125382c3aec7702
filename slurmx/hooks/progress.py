"""Progress reporting from inside a job: `progress(step, total)`, cheap enough to call every iteration.

The daemon reads `$SLURMX_SPOOL_DIR/progress-$SLURM_JOB_ID.json` to see how far each running variant got and how
fast; in profile mode (`SLURMX_PROFILE_STEPS=N`) a short sample run times its first N steps and stops.

Why the fast path is one clock read and one compare: training loops call this millions of times, so anything
else (env lookups, file checks) happens in `_slow`, at most once per `SLURMX_PROGRESS_INTERVAL` seconds — or on
every call only while a profile is being recorded. The file is replaced atomically (temp file in the same folder,
then `os.replace`), so a concurrent reader sees the old or the new content, never half of one.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from . import _env

_monotonic = time.monotonic
# progress() does nothing but read the clock until this monotonic time. -inf: the next call takes the slow path
# (first call, or recording a profile); +inf: never (no spool folder, not profiling).
_next_slow = -math.inf


def progress(step: int, total: int | None = None) -> None:
    """Report that the job reached `step` (of `total`). Rate-limited; under a microsecond when nothing is due.

    In profile mode (`SLURMX_PROFILE_STEPS=N`) the call that reaches step N writes the profile and raises
    SystemExit(0): call it from the main thread, where that ends the run.
    """
    if _monotonic() < _next_slow:
        return
    _STATE.slow(step, total)


def progress_path(spool: Path, job_id: str) -> Path:
    """Where the progress of job `job_id` is written inside the group's spool folder."""
    return spool / f"progress-{job_id}.json"


def profile_path(spool: Path, job_id: str) -> Path:
    """Where a profiling sample run of job `job_id` writes its step times."""
    return spool / f"profile-{job_id}.json"


def read_progress(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """A progress (or profile) file as a dict; None if it does not exist (yet).

    Writers replace the file atomically, so malformed JSON means something else wrote it: that raises ValueError.
    """
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return data


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write `data` to `path` so that readers never see a partial file: temp file in the same folder + rename.

    No fsync: readers are concurrent processes, not a post-crash recovery, and fsync on shared storage is slow.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def write_progress(step: int, total: int | None = None) -> Path | None:
    """Write the progress file now, without rate limit (the CLI; one process per call).

    The rate (steps/s; null until a step past the first report) is measured from the first report of this run:
    its time and step are carried in the file itself (`start_time`, `start_step`) and taken over when the existing
    file belongs to the same job and restart.
    Returns the path written, or None when `SLURMX_SPOOL_DIR` is not set.
    """
    spool = _env.spool_dir()
    if spool is None:
        return None
    job, restarts = _env.job_id(), _env.restart_count()
    path = progress_path(spool, job)
    now = time.time()
    start_time, start_step = now, step
    try:
        old = read_progress(path)
    except (OSError, ValueError):
        old = None
    if old and old.get("job_id") == job and old.get("restart_count") == restarts:
        t0, s0 = old.get("start_time"), old.get("start_step")
        if isinstance(t0, (int, float)) and isinstance(s0, int) and t0 <= now and s0 <= step:
            start_time, start_step = float(t0), s0
    rate = (step - start_step) / (now - start_time) if step != start_step and now > start_time else None
    write_json_atomic(path, _record(job, restarts, step, total, now, rate, start_time, start_step))
    return path


def _record(job: str, restarts: int, step: int, total: int | None, now: float, rate: float | None,
            start_time: float, start_step: int) -> dict[str, Any]:
    return {
        "job_id": job,
        "group": _env.label("SLURMX_GROUP"),
        "variant": _env.label("SLURMX_VARIANT"),
        "step": step,
        "total": total,
        "time": now,
        "rate": rate,
        "restart_count": restarts,
        "start_time": start_time,
        "start_step": start_step,
    }


class _State:
    """Everything `progress()` needs beyond the fast path; configured from the environment on the first call."""

    def __init__(self) -> None:
        self.configured = False
        self.spool: Path | None = None
        self.interval = _env.DEFAULT_PROGRESS_INTERVAL_S
        self.profile_steps = 0
        self.write_after = -math.inf
        self.start_mono = 0.0
        self.start_time = 0.0
        self.start_step = 0
        self.times: list[float] = []
        self.steps: list[int] = []
        self.warned = False

    def configure(self, step: int) -> None:
        self.spool = _env.spool_dir()
        self.interval = max(0.0, _env.progress_interval())
        self.profile_steps = _env.profile_steps()
        self.start_mono, self.start_time, self.start_step = _monotonic(), time.time(), step
        self.configured = True

    def slow(self, step: int, total: int | None) -> None:
        global _next_slow
        if not self.configured:
            self.configure(step)
        mono = _monotonic()
        if self.profile_steps:
            self.times.append(mono)
            self.steps.append(step)
            if step >= self.profile_steps:
                self.finish_profile(step, total, mono)
        if self.spool is not None and mono >= self.write_after:
            self.write(step, total, mono)
            self.write_after = mono + self.interval
        if self.profile_steps:
            _next_slow = -math.inf
        elif self.spool is None:
            _next_slow = math.inf
        else:
            _next_slow = self.write_after

    def write(self, step: int, total: int | None, mono: float) -> None:
        """Write the progress file; a failure (quota, stale NFS handle) is reported once and never stops the job."""
        assert self.spool is not None
        elapsed = mono - self.start_mono
        rate = (step - self.start_step) / elapsed if step != self.start_step and elapsed > 0 else None
        job = _env.job_id()
        record = _record(job, _env.restart_count(), step, total, time.time(), rate, self.start_time, self.start_step)
        try:
            write_json_atomic(progress_path(self.spool, job), record)
        except OSError as exc:
            if not self.warned:
                self.warned = True
                print(f"slurmx.hooks: cannot write progress: {exc}", file=sys.stderr)

    def finish_profile(self, step: int, total: int | None, mono: float) -> None:
        """Write the profile (step times of this sample run) and end the run cleanly with exit code 0."""
        times, steps = self.times, self.steps
        per_step = [(times[i] - times[i - 1]) / (steps[i] - steps[i - 1])
                    for i in range(1, len(times)) if steps[i] > steps[i - 1]]
        spool = self.spool if self.spool is not None else Path(".")
        job = _env.job_id()
        write_json_atomic(profile_path(spool, job), {
            "steps": self.profile_steps,
            "times": [t - times[0] for t in times],
            "at_steps": list(steps),
            "seconds_per_step": statistics.median(per_step) if per_step else None,
            "job_id": job,
            "group": _env.label("SLURMX_GROUP"),
            "variant": _env.label("SLURMX_VARIANT"),
        })
        if self.spool is not None:
            self.write(step, total, mono)
        sys.exit(0)


_STATE = _State()


def main(argv: list[str] | None = None) -> int:
    """`python3 -m slurmx.hooks progress STEP [TOTAL]`: write the progress file now; 0 even if it cannot.

    A failed progress write must not fail a `set -e` job script, so only usage errors return non-zero (2).
    """
    args = sys.argv[1:] if argv is None else argv
    usage = "usage: python3 -m slurmx.hooks progress STEP [TOTAL]"
    if len(args) not in (2, 3) or args[0] != "progress":
        print(usage, file=sys.stderr)
        return 2
    try:
        step = int(args[1])
        total = int(args[2]) if len(args) == 3 else None
    except ValueError:
        print(f"{usage}\nSTEP and TOTAL are integers", file=sys.stderr)
        return 2
    try:
        write_progress(step, total)
    except (OSError, ValueError) as exc:
        print(f"slurmx.hooks: cannot write progress: {exc}", file=sys.stderr)
    return 0
