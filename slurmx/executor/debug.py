"""`Executor(folder, kind="debug")`: the call runs in this process, at the first `result()` (or `wait`, `done`,
`exception`), so `breakpoint()` in it stops in your terminal and `pdb.post_mortem(job.exception().__traceback__)`
walks its real frames.

The checkpoint protocol is the cluster's: `job.preempt()` (from another thread, while the call runs in the main
one) calls `checkpoint()`, resumes with what it returned (through a pickle round trip, as a requeued job loads
it), and counts a restart. Time limits are not simulated here; the local kind does that.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import cloudpickle

from slurmx.executor.job import JobAPI, JobError, JobPaths
from slurmx.executor.jobside import OUTCOME, Preempted, as_call, checkpoint_method

__all__ = ["DebugJob"]

Call = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class DebugJob(JobAPI):
    """A call run in this process when first asked for; the same questions as a cluster `Job`."""

    variant = "debug"

    def __init__(self, job_id: str, folder: Path, fn: Callable[..., Any], args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> None:
        self.job_id, self.folder, self.poll = job_id, Path(folder), 0.0
        # the call as the job side would load it: a pickled copy, so the caller's objects are not the call's
        self._call: Call = cloudpickle.loads(cloudpickle.dumps((fn, tuple(args), dict(kwargs))))
        self._outcome: dict[str, Any] | None = None
        self._error: BaseException | None = None
        self._running = False
        self._in_call = False  # the grace handler acts only while the call runs, never once it has returned
        self._handled = False  # the handler is installed (main thread only): else a signal would end this process
        self._handler_lock = threading.Lock()
        self.restarts = 0

    def __repr__(self) -> str:
        return f"DebugJob({self.job_id!r})"

    @property
    def job_ids(self) -> list[str]:
        return [self.job_id]

    @property
    def state(self) -> str:
        if self._outcome is None:
            return "RUNNING" if self._running else "PENDING"
        return "COMPLETED" if self._outcome["ok"] else "FAILED"

    @property
    def paths(self) -> JobPaths:
        return JobPaths(self.folder, self.folder / OUTCOME, None, None)  # nothing is written: it is all here

    def stdout(self) -> str | None:
        return None  # the call printed to this process's own stdout

    def stderr(self) -> str | None:
        return None

    def done(self) -> bool:
        self._run()
        return True

    def wait(self, timeout: float | None = None) -> dict[str, Any]:
        self._run()
        assert self._outcome is not None
        return self._outcome

    def result(self, timeout: float | None = None) -> Any:
        """The call's value; its exception raised as itself, with its own frames (no remote traceback here)."""
        outcome = self.wait(timeout)
        if self._error is not None:
            raise self._error
        return outcome["value"]

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._run()
        return self._error

    def cancel(self) -> list[str]:
        if self._outcome is not None or self._running:
            return []
        self._outcome = {"ok": False, "type": "Cancelled", "message": "cancelled before it ran"}
        self._error = JobError(f"debug job {self.job_id} has no result: it was cancelled before it ran")
        return [self.job_id]

    def preempt(self, grace: float = 0.0) -> None:
        """Preempt the call while it runs in the main thread (call this from another thread): it checkpoints and
        is resumed from what `checkpoint()` returned, as after a requeue. No effect when it is not running, or
        runs in another thread (Python handles signals in the main thread only)."""
        with self._handler_lock:  # the handler cannot be taken down between the check and the signal: SIGUSR2's
            if self._running and self._handled:  # default action would end this whole process
                os.kill(os.getpid(), signal.SIGUSR2)

    def _run(self) -> None:
        """Run the call once, resuming after each preemption, and keep its outcome."""
        if self._outcome is not None:
            return
        self._running = True
        try:
            while True:
                try:
                    fn, args, kwargs = self._call
                    with _GraceHandler(self):
                        self._in_call = True
                        try:
                            value = fn(*args, **kwargs)
                        finally:
                            self._in_call = False
                except Preempted:
                    self.restarts += 1
                    continue
                except Exception as exc:
                    self._error = exc
                    self._outcome = {"ok": False, "type": type(exc).__name__, "message": str(exc)}
                else:
                    self._outcome = {"ok": True, "value": value}
                return
        finally:
            self._running = False

    def _checkpoint(self, signum: int, frame: FrameType | None) -> None:
        """The grace handler of the job side, in memory: save the resumed call (pickled, as it would travel)."""
        if not self._in_call:
            return  # it finished during its grace: left alone, as on the cluster
        fn, args, kwargs = self._call
        method = checkpoint_method(fn)
        if method is not None:
            resumed = as_call(method(*args, **kwargs), fn, args, kwargs)
            self._call = cloudpickle.loads(cloudpickle.dumps(resumed))
        raise Preempted  # without a checkpoint, the requeued call starts again from the top


class _GraceHandler:
    """The debug job's grace handler for the time of one run (main thread only: Python runs handlers there)."""

    def __init__(self, job: DebugJob) -> None:
        self.job = job
        self.previous: Any = None

    def __enter__(self) -> None:
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGUSR2, self.job._checkpoint)
            self.job._handled = True

    def __exit__(self, *exc: object) -> None:
        with self.job._handler_lock:  # a signal sent before this is pending: restored, Python then ignores it
            if self.job._handled:
                self.job._handled = False
                signal.signal(signal.SIGUSR2, self.previous if self.previous is not None else signal.SIG_DFL)
