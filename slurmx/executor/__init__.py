"""Run Python functions on the cluster: `Executor(site).submit(fn, *args) -> Job`, `job.result()`.

Each call is one slurmx group (one variant per resource kind, exactly one of which runs it); the call is pickled
with cloudpickle into the group folder, and the job writes back its return value or its exception with the remote
traceback. A callable object with a `checkpoint(*args, **kwargs)` method is checkpointed at the grace signal and
requeued (by slurmxd, or by the job itself before Slurm's time limit, up to `max_requeues`). `Executor(folder,
kind="local")` and `kind="debug"` run calls on this machine with the same API and checkpoint protocol.
docs/executor.md.
"""

from typing import Any, NamedTuple

from slurmx.executor.debug import DebugJob
from slurmx.executor.executor import Executor
from slurmx.executor.helpers import as_completed
from slurmx.executor.job import Job, JobError, JobPaths, RemoteTraceback
from slurmx.executor.local import LocalJob
from slurmx.executor.payload import NotYours
from slurmx.executor.sequence import FunctionSequence
from slurmx.hooks.environment import JobEnvironment

__all__ = ["DebugJob", "Executor", "FunctionSequence", "Job", "JobEnvironment", "JobError", "JobPaths", "LocalJob",
           "NotYours", "RemoteTraceback", "Resume", "as_completed"]


class Resume(NamedTuple):
    """What `checkpoint()` may return: the call to make after the requeue (returning None repeats the same call,
    returning a callable calls it with the same arguments)."""

    fn: Any
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = {}  # noqa: RUF012 - a NamedTuple default, never mutated
