"""Job-side hooks: let a job survive preemption by the slurmx daemon, and report its progress.

The daemon preempts a running job by sending the grace signal (`SLURMX_GRACE_SIGNAL`, default SIGUSR2 — not
SIGUSR1, which NCCL uses) to the batch shell, waiting the grace period, then `scontrol requeue`-ing it; Slurm then
restarts the script from the top with `SLURM_RESTART_COUNT` incremented. A job therefore needs to (1) save a
checkpoint when the signal arrives and leave, and (2) resume from that checkpoint when restarted:

    from slurmx import hooks

    state = load(hooks.checkpoint_dir()) if hooks.is_resumed() else fresh()

    @hooks.on_preempt
    def save(deadline: float) -> None:      # runs once, in the main thread, between two bytecodes
        dump(state, hooks.checkpoint_dir())  # must finish before `deadline` (epoch seconds)

    for step in range(state.step, total):
        train(state)
        hooks.progress(step, total)          # cheap: call it every iteration

This package runs inside job scripts on compute nodes: standard library only, Python >= 3.9, importable from a
copy of `slurmx/hooks/` next to an empty `slurmx/__init__.py`. `hook.sh` offers the same for bash job scripts.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TYPE_CHECKING, NoReturn, TypeVar, overload

from . import _env
from ._env import checkpoint_dir, is_resumed, requeue_exit_code, restart_count
from .environment import JobEnvironment
from .progress import profile_path, progress, progress_path, read_progress, write_progress

__all__ = [
    "JobEnvironment",
    "checkpoint_dir",
    "grace_deadline",
    "is_resumed",
    "on_preempt",
    "preempted",
    "preemptible",
    "profile_path",
    "progress",
    "progress_path",
    "read_progress",
    "requeue",
    "requeue_exit_code",
    "restart_count",
    "write_progress",
]

Callback = Callable[[float], None]
_F = TypeVar("_F", bound=Callable[[float], None])
if TYPE_CHECKING:
    from typing import TypeAlias

    _Handler: TypeAlias = Callable[[int, FrameType | None], object]
    _Previous: TypeAlias = _Handler | int | signal.Handlers | None

# One preemption per process: once the grace signal has been handled, repeats are ignored for good.
_preempted = False
_deadline: float | None = None
_handling = False


def preempted() -> bool:
    """True once this process received the grace signal (for loops that poll instead of using a callback)."""
    return _preempted


def grace_deadline() -> float | None:
    """Epoch seconds by which the job must be gone, once preempted; else None.

    Falls back on `SLURMX_GRACE_DEADLINE`, so a checkpoint command started by `hook.sh` (or by a callback) on
    preemption learns the deadline too.
    """
    if _deadline is not None:
        return _deadline
    try:
        return float(os.environ["SLURMX_GRACE_DEADLINE"])
    except (KeyError, ValueError):
        return None


def requeue() -> NoReturn:
    """Leave as `SLURMX_ON_PREEMPT` says: `exit` with the requeue code, or `wait` (sleep) until Slurm requeues."""
    _leave(_env.on_preempt_mode(), _env.requeue_exit_code())


def _leave(mode: str, code: int) -> NoReturn:
    if mode == "wait":
        while True:  # Slurm's requeue kills the job; until then stay out of the way of the checkpoint on disk.
            time.sleep(3600)
    sys.exit(code)


def _handler_for(callback: Callback | None, mode: str, code: int, grace_s: int) -> _Handler:
    """The signal handler; mode, code and grace are read at install time so bad settings fail early, not here."""

    def handle(signum: int, frame: FrameType | None) -> None:
        global _preempted, _deadline, _handling
        if _handling:  # a repeated signal while (or after) the callback ran
            return
        _handling = True
        deadline = _env.preempt_deadline(time.time(), grace_s)
        _deadline = deadline
        os.environ["SLURMX_GRACE_DEADLINE"] = f"{deadline:.3f}"
        _preempted = True
        if callback is None:  # polling style: the loop checks preempted() and calls requeue() itself
            return
        try:
            callback(deadline)
        except Exception:
            # The last good checkpoint is still on disk: requeueing beats failing the job.
            traceback.print_exc()
            print("slurmx.hooks: the preempt callback failed; leaving for requeue anyway", file=sys.stderr)
        # Raising SystemExit here unwinds the main thread from wherever it was (even a sleep): `finally` blocks
        # and context managers in the job still run.
        _leave(mode, code)

    return handle


def _install(callback: Callback | None) -> tuple[signal.Signals, _Previous]:
    sig = _env.grace_signal()
    handler = _handler_for(callback, _env.on_preempt_mode(), _env.requeue_exit_code(), _env.grace_seconds())
    previous = signal.signal(sig, handler)
    _env.announce_handler()  # so the batch shell forwards the grace signal to this process
    return sig, previous


@overload
def on_preempt(callback: _F) -> _F: ...
@overload
def on_preempt(callback: None = None) -> None: ...
def on_preempt(callback: Callback | None = None) -> Callback | None:
    """Install the grace-signal handler: on the signal, run `callback(deadline)` once, then leave.

    Leaving follows `SLURMX_ON_PREEMPT`: `exit` raises SystemExit(`SLURMX_REQUEUE_EXIT_CODE`) in the main thread,
    `wait` sleeps until Slurm requeues the job. Without a callback the handler only records the signal, for loops
    that poll `preempted()`. Usable as a decorator. Call it from the main thread (a Python rule for signals).
    """
    _install(callback)
    return callback


@contextlib.contextmanager
def preemptible(callback: Callback | None = None) -> Iterator[None]:
    """`on_preempt(callback)` for the duration of a `with` block; the previous handler is restored afterwards."""
    sig, previous = _install(callback)
    try:
        yield
    finally:
        # None: the previous handler was not installed from Python and cannot be restored; fall back to default.
        signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
